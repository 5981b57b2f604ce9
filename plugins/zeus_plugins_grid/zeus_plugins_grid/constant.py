"""The ``constant`` source: a ``[grid]`` number, the same value at every time."""

from __future__ import annotations

import math

from zeus_core.grid import CARBON, SourceRequest, Step
from zeus_core.job import grid_bound_problem


class Constant:
    """One value at every time; its forecast is that value, for all time to come."""

    def __init__(self, value: float, source: str) -> None:
        self.value = float(value)
        self.source = source

    @classmethod
    def parse(cls, spec: str, request: SourceRequest) -> Constant:
        try:
            value = float(spec)
        except ValueError:
            raise ValueError(f"constant:{spec!r} is not a number") from None
        if not math.isfinite(value) or (request.quantity == CARBON and value < 0):
            raise ValueError(
                f"a constant {request.quantity} must be a finite number{' >= 0' if request.quantity == CARBON else ''}, got {spec}"
            )
        problem = grid_bound_problem(request.quantity, value)
        if problem:
            raise ValueError(f"constant:{spec}: {problem}")
        return cls(value, f"constant:{value:g}")

    def steps(self, start: float, end: float) -> list[Step]:
        return [Step(start, max(start, end), self.value)]

    def forecast(self, at: float) -> Step:
        return Step(at, math.inf, self.value)

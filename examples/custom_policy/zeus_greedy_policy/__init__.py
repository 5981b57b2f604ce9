"""An explore-then-exploit batch-size policy, as a third-party zeus plugin."""

from __future__ import annotations

import attrs

from zeus_core import hookimpl


def _positive_list(_inst, attribute, value):
    if value is not None and (not value or any(b <= 0 for b in value)):
        raise ValueError(f"{attribute.name} must be a non-empty list of positive batch sizes")


@attrs.define
class GreedyOptions:
    batch_sizes: list[int] | None = attrs.field(default=None, validator=_positive_list)


class GreedyPolicy:
    """Try each batch size once, then exploit the cheapest one that reached the target."""

    def __init__(self, options: GreedyOptions, context) -> None:
        workload = context.parts.get("workload")
        self.candidates = list(options.batch_sizes or getattr(workload, "batch_sizes", None) or [])
        if not self.candidates:
            raise ValueError("set batch_size.batch_sizes: the workload lists no batch sizes")
        self.costs: dict[str, float] = {}
        self.tried: list[int] = []

    def choose(self, ctx) -> int:
        for bs in self.candidates:
            if bs not in self.tried:
                return bs
        if not self.costs:
            return self.candidates[0]
        return int(min(self.costs, key=self.costs.get))

    def observe(self, ctx, record) -> None:
        if record.batch_size not in self.tried:
            self.tried.append(record.batch_size)
        if record.reached:
            key = str(record.batch_size)
            self.costs[key] = min(record.cost, self.costs.get(key, float("inf")))

    def get_state(self):
        return {"costs": self.costs, "tried": self.tried}

    def set_state(self, state) -> None:
        self.costs = dict(state["costs"])
        self.tried = list(state["tried"])


@hookimpl
def zeus_register_batch_size_policies(register):
    register("greedy", GreedyPolicy, options=GreedyOptions)

"""An explore-then-exploit batch-size policy, as a third-party zeus plugin.

Everything it needs from zeus comes from ``import zeus_core``'s public names.
"""

from __future__ import annotations

from typing import Any

import attrs

from zeus_core import BuildContext, OffersBatchSizes, PolicyContext, TryRecord, hookimpl
from zeus_core.validators import distinct_numbers


@attrs.define
class GreedyOptions:
    """``[batch_size] plugin = "greedy"``: ``batch_sizes`` to try (default: the workload's list)."""

    batch_sizes: list[int] | None = attrs.field(default=None, validator=distinct_numbers(1, what="batch sizes"))


class GreedyPolicy:
    """Try each batch size once, then exploit the cheapest one that reached the target."""

    def __init__(self, options: GreedyOptions, context: BuildContext) -> None:
        workload = context.parts.get("workload")
        offered = workload.batch_sizes if isinstance(workload, OffersBatchSizes) else None
        self.candidates = list(options.batch_sizes or offered or [])
        if not self.candidates:
            raise ValueError("set batch_size.batch_sizes: the workload lists no batch sizes")
        self.costs: dict[str, float] = {}
        self.tried: list[int] = []

    def choose(self, ctx: PolicyContext) -> int:
        for bs in self.candidates:
            if bs not in self.tried:
                return bs
        if not self.costs:
            return self.candidates[0]
        return int(min(self.costs, key=self.costs.get))

    def observe(self, ctx: PolicyContext, record: TryRecord) -> None:
        if record.batch_size not in self.tried:
            self.tried.append(record.batch_size)
        if record.reached:
            key = str(record.batch_size)
            self.costs[key] = min(record.cost, self.costs.get(key, float("inf")))

    def get_state(self) -> dict[str, Any]:
        return {"costs": self.costs, "tried": self.tried}

    def set_state(self, state: dict[str, Any]) -> None:
        self.costs = dict(state["costs"])
        self.tried = list(state["tried"])


@hookimpl
def zeus_register_batch_size_policies(register):
    register("greedy", GreedyPolicy, options=GreedyOptions, help="Try each batch size once, then keep the cheapest.")

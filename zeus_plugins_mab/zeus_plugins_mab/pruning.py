"""The pruning stage of Zeus's batch-size policy, as a resumable state machine.

Each round walks the batch sizes down from the current default (the default
itself first), then up from the one above it, and stops a direction at the
first batch size whose try fails to reach the target. The next round starts
from the cheapest batch size of the last one and re-tests only the survivors.

A state machine rather than a generator because its state must be saved to
the store after every try and restored by another process (a generator
cannot be serialised). It is the ``paper`` variant's explorer
(:class:`~zeus_plugins_mab.strategies.Explorer`); it sets no cost bound of its
own, as in the paper.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs

from zeus_plugins_mab.strategies import Env, SequentialExplorer, state_json

if TYPE_CHECKING:
    from zeus_core import PolicyContext


def round_order(batch_sizes: list[int], default: int) -> tuple[list[int], list[int]]:
    """(down, up): ``default`` and the smaller sizes descending, then the larger ones ascending."""
    idx = batch_sizes.index(default)
    return batch_sizes[: idx + 1][::-1], batch_sizes[idx + 1 :]


@attrs.define
class Pruning(SequentialExplorer):
    """Where the pruning stage is.

    ``survivors`` are the batch sizes the current round walks (all of them in
    round 0); ``down``/``up`` the round's two walks, fixed when it starts;
    ``leg`` 0 (down) or 1 (up) and ``pos`` the next index in that walk;
    ``good`` the sizes that reached the target this round, ``round_best`` and
    ``default`` the cheapest of them (the next round's starting point).
    """

    survivors: list[int]
    default: int
    rounds: int = 2
    round: int = 0
    down: list[int] = attrs.field(factory=list)
    up: list[int] = attrs.field(factory=list)
    leg: int = 0
    pos: int = 0
    good: list[int] = attrs.field(factory=list)
    round_best: float | None = None  # stored as "best_cost" (the name states have always used)

    name = "pruning"

    @classmethod
    def create(cls, env: Env, batch_sizes: list[int], default: int, ctx: PolicyContext) -> Pruning:
        return cls.start(batch_sizes, default, env.options.pruning_rounds)

    @classmethod
    def start(cls, batch_sizes: list[int], default: int, rounds: int = 2) -> Pruning:
        bss = sorted(set(int(b) for b in batch_sizes))
        p = cls(survivors=bss, default=int(default), rounds=rounds)
        p._begin_round()
        return p

    def _begin_round(self) -> None:
        self.down, self.up = round_order(self.survivors, self.default)
        self.leg, self.pos, self.good, self.round_best = 0, 0, [], None
        self._skip_empty()

    def _skip_empty(self) -> None:
        while not self.done and self.pos >= len(self._walk()):
            if self.leg == 0:
                self.leg, self.pos = 1, 0
            else:
                self._end_round()

    def _walk(self) -> list[int]:
        return self.down if self.leg == 0 else self.up

    def _end_round(self) -> None:
        # Nothing reached the target this round: keep the round's survivors
        # rather than leave the bandit without arms.
        if self.good:
            self.survivors = sorted(self.good)
        self.round += 1
        if not self.done:
            self._begin_round()

    @property
    def done(self) -> bool:
        return self.round >= self.rounds

    def next(self) -> int | None:
        """The batch size to try next, or None when pruning is over."""
        return None if self.done else self._walk()[self.pos]

    def observe(self, batch_size: int, cost: float, reached: bool) -> None:
        """Record the try of :meth:`next`; its cost is the cost of that single try."""
        expected = self.next()
        if expected is None:
            raise RuntimeError("pruning is over; nothing to observe")
        if int(batch_size) != expected:
            raise RuntimeError(f"pruning expected a try at batch size {expected}, got one at {batch_size}")
        if reached:
            self.good.append(expected)
            if self.round_best is None or cost < self.round_best:
                self.round_best = float(cost)
                self.default = expected
            self.pos += 1
        else:
            self.leg, self.pos = self.leg + 1, 0
            if self.leg > 1:
                self._end_round()
                return
        self._skip_empty()

    def to_json(self) -> dict[str, Any]:
        # The field is stored under its old name, in its place: a method of every explorer is named best_cost.
        d = {("best_cost" if k == "round_best" else k): v for k, v in state_json(self).items()}
        if d["best_cost"] is not None and not math.isfinite(d["best_cost"]):
            d["best_cost"] = None
        return d

    @classmethod
    def from_json(cls, state: dict[str, Any], env: Env) -> Pruning:
        return cls(**{("round_best" if k == "best_cost" else k): v for k, v in state.items()})

"""The improved variant's exploration: a best-first walk down and up from the default.

The paper's pruning (:mod:`zeus_plugins_mab.pruning`) walks all the way down,
then all the way up, stops a direction only at a try that fails to reach the
target, and then re-runs every survivor in a second round. On the NSDI'23
traces most of its excess cost over the oracle is spent there: walking on
into batch sizes whose cost has already turned up (cifar100 on V100 walks
128 -> 64 -> 32 although 64 costs 1.8x the best), walking down from a
default whose better side is up (movielens: 1024 -> 512 -> 256 before 2048),
and re-running the default a second time at twice the oracle's cost.

The cost of a recurrence against batch size is close to unimodal in these
traces (epochs to target grow with the batch size, time per epoch shrinks), so:

* the two directions advance best-first: the next try extends the direction
  whose last try was cheaper (an unstarted direction counts the default's
  cost; ties go down, as in the paper);
* a direction ends at a try that fails, at its last batch size, after
  ``patience`` tries in a row that cost more than ``1 + tolerance`` times the
  best so far (one is not enough: on movielens a run's epochs to target vary
  from 4 to 7, so one unlucky try can look 75 % worse than its batch size is),
  or when none of its tries ever beat the best and its last one is out of
  tolerance (it is heading uphill from a better point found elsewhere);
* there is one round: the Thompson-sampling stage re-tries the promising
  sizes on its own, since its posterior needs one observation per arm only
  (:mod:`zeus_plugins_mab.relative_ts`).

It is the ``improved`` variant's explorer when the device predicts no epoch
costs (:class:`~zeus_plugins_mab.strategies.Explorer`); its only cost bound is
the optional noise bound (``explore_bound_sds``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from zeus_plugins_mab.pruning import round_order
from zeus_plugins_mab.strategies import Env, Sampler, SequentialExplorer, noise_bound, state_json

if TYPE_CHECKING:
    from zeus_core import PolicyContext


@attrs.define
class Direction:
    """One side of the default: the batch sizes in walking order and how the walk went."""

    sizes: list[int]
    pos: int = 0
    strikes: int = 0
    improved: bool = False
    last_cost: float | None = None
    ended: bool = False


@attrs.define
class Walk(SequentialExplorer):
    """Where the walk is. ``costs`` maps each batch size that reached the target
    (as a string: JSON keys) to its cost; ``failed`` lists those that did not."""

    default: int
    down: Direction
    up: Direction
    tolerance: float
    patience: int = 2
    costs: dict[str, float] = attrs.field(factory=dict)
    failed: list[int] = attrs.field(factory=list)
    started: bool = False
    env: Env | None = attrs.field(default=None, init=False, repr=False, eq=False)

    name = "walk"

    @classmethod
    def create(cls, env: Env, batch_sizes: list[int], default: int, ctx: PolicyContext) -> Walk:
        o = env.options
        walk = cls.start(batch_sizes, default, o.tolerance, o.patience)
        walk.env = env
        return walk

    @classmethod
    def start(cls, batch_sizes: list[int], default: int, tolerance: float, patience: int = 2) -> Walk:
        down, up = round_order(sorted(set(int(b) for b in batch_sizes)), int(default))
        return cls(int(default), Direction(down[1:]), Direction(up), float(tolerance), int(patience))

    @property
    def best(self) -> float | None:
        return min(self.costs.values()) if self.costs else None

    def _out(self, cost: float | None) -> bool:
        best = self.best
        return cost is not None and best is not None and cost > (1.0 + self.tolerance) * best

    def _alive(self, d: Direction) -> bool:
        if d.ended or d.pos >= len(d.sizes):
            return False
        # Never beat the best and last seen out of tolerance: uphill from elsewhere.
        start = d.last_cost if d.last_cost is not None else self.costs.get(str(self.default))
        return d.improved or not self._out(start)

    def _pick(self) -> Direction | None:
        alive = [d for d in (self.down, self.up) if self._alive(d)]
        if not alive:
            return None

        def score(d: Direction) -> float:
            c = d.last_cost if d.last_cost is not None else self.costs.get(str(self.default))
            return float("inf") if c is None else c

        return min(alive, key=score)  # min() keeps the first on ties: down

    @property
    def done(self) -> bool:
        return self.started and self._pick() is None

    def next(self) -> int | None:
        if not self.started:
            return self.default
        d = self._pick()
        return None if d is None else d.sizes[d.pos]

    def observe(self, batch_size: int, cost: float, reached: bool) -> None:
        expected = self.next()
        if expected is None:
            raise RuntimeError("the exploration walk is over; nothing to observe")
        if int(batch_size) != expected:
            raise RuntimeError(f"the exploration walk expected a try at batch size {expected}, got one at {batch_size}")
        if not self.started:
            self.started = True
            if reached:
                self.costs[str(expected)] = float(cost)
            else:
                self.failed.append(expected)
            return
        d = self._pick()
        assert d is not None
        d.pos += 1
        if not reached:
            self.failed.append(expected)
            d.ended = True
            return
        best = self.best
        if best is None or cost < best:
            d.improved = True
        self.costs[str(expected)] = float(cost)
        d.last_cost = float(cost)
        d.strikes = d.strikes + 1 if self._out(cost) else 0
        if d.strikes >= self.patience:
            d.ended = True

    @property
    def survivors(self) -> list[int]:
        return sorted(int(b) for b in self.costs)

    def best_cost(self, sampler: Sampler | None) -> float | None:
        """The cheapest try so far while walking; once the walk is over, the sampler knows best."""
        return None if self.done else self.best

    def try_cost_bound(self, ctx: PolicyContext, batch_size: int, sampler: Sampler | None) -> float | None:
        """The noise bound (``explore_bound_sds``) on a try at a size the walk has not seen reach the target."""
        if self.done or str(int(batch_size)) in self.costs:
            return None
        assert self.env is not None
        o = self.env.options
        # While walking there is no sampler yet: the prior relative noise.
        cv = o.cv0 if sampler is None else sampler.cv()
        return noise_bound(o.explore_bound_sds, self.best, cv)

    def to_json(self) -> dict[str, Any]:
        return state_json(self)

    @classmethod
    def from_json(cls, state: dict[str, Any], env: Env) -> Walk:
        d = dict(state)
        d["down"], d["up"] = Direction(**d["down"]), Direction(**d["up"])
        walk = cls(**d)
        walk.env = env
        return walk

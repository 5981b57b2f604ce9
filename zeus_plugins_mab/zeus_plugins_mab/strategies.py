"""What a ``mab`` variant is made of: an explorer and a Thompson sampler.

Zeus chooses a recurrence's batch size in two stages: exploration finds the
batch sizes worth sampling, then Thompson sampling chooses among them. Each
stage is a small protocol, and a variant (:mod:`zeus_plugins_mab.variants`) is
the explorers it may use (the first that applies to the job explores) and its
sampler. :class:`~zeus_plugins_mab.policy.MabPolicy` talks to them only
through these protocols, so a new way of exploring is one class that
implements :class:`Explorer`, plus its name in a variant's list.

An explorer owns what exploration learns and the cost bounds of the
exploratory tries it proposes (``try_cost_bound``): a bound only makes sense
to the explorer whose tries it stops. Both kinds of strategy are saved in the
job's store after every try (``to_json``) and restored by another process
(``from_json``), so their state is JSON and their settings come from
:class:`Env`, not from the state: an option changed between two ``zeus run``
invocations applies to the next try.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import attrs

from zeus_core import EpochPrediction

if TYPE_CHECKING:
    from typing import Self

    import numpy as np

    from zeus_core import PolicyContext, TryRecord
    from zeus_plugins_mab.options import MabOptions

#: The device's ``predict_epoch`` (:class:`zeus_core.EpochPredictor`): one epoch's rows at a batch size, or None.
PredictEpoch = Callable[[int], Sequence[EpochPrediction] | None]


@attrs.frozen
class Env:
    """What strategies are built with besides their own state: the ``[batch_size]`` options,
    the device's epoch predictions (None when it makes none) and the sampler's seed."""

    options: MabOptions
    predict_epoch: PredictEpoch | None = None
    seed: int = 0


class Sampler(Protocol):
    """Thompson sampling over ``arms`` (sorted batch sizes) from rewards, the negative
    cost of each try. ``name`` identifies the class in stored states.

    The random generator's state is part of ``to_json``, so a sampler restored in
    another process draws what it would have drawn."""

    name: ClassVar[str]
    arms: list[int]

    @classmethod
    def create(cls, arms: list[int], env: Env) -> Self:
        """A sampler with no observations, its settings from ``env``."""
        ...

    @classmethod
    def from_json(cls, state: dict[str, Any]) -> Self: ...

    def to_json(self) -> dict[str, Any]: ...

    def observe(self, arm: int, reward: float) -> None: ...

    def predict(self, among: list[int] | None = None) -> int:
        """The arm to pull, drawn among ``among`` (None: every arm)."""
        ...

    def posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, sd) of every arm's mean reward; sd inf: nothing known yet."""
        ...

    def cv(self) -> float:
        """The relative noise of one try's cost, as far as the sampler has estimated it."""
        ...


class Explorer(Protocol):
    """Which batch sizes to try before (or between) Thompson sampling, and what they taught.

    Each choice the policy asks :meth:`propose`; None hands the choice to the
    sampler, over :meth:`choices`. The sampler is built once :meth:`arms` names its
    arms (fed every earlier observation of them) and observes every try from then on;
    the explorer observes every try (:meth:`observe_try`). ``name`` identifies the
    class in stored states. Explorers may subclass this protocol for the defaults
    of the last four methods: sample over :meth:`arms`, no best cost, no bound of
    their own, nothing to add to ``summary.json``.
    """

    name: ClassVar[str]

    @classmethod
    def create(cls, env: Env, batch_sizes: list[int], default: int, ctx: PolicyContext) -> Self | None:
        """Start exploring ``batch_sizes`` (sorted) from ``default``, or None when this explorer
        cannot serve the job (guided exploration on a device that predicts nothing)."""
        ...

    @classmethod
    def from_json(cls, state: dict[str, Any], env: Env) -> Self: ...

    def to_json(self) -> dict[str, Any]: ...

    def propose(self, ctx: PolicyContext, sampler: Sampler | None) -> int | None:
        """The batch size to explore with this try, or None to let the sampler choose."""
        ...

    def observe_try(self, record: TryRecord, cost: float) -> None:
        """A try's outcome; ``cost`` is what the policy learns from it (``record`` has the rest)."""
        ...

    def arms(self) -> list[int] | None:
        """The batch sizes Thompson sampling keeps posteriors for, None until exploration knows them."""
        ...

    def choices(self) -> list[int]:
        """The batch sizes the sampler chooses among when :meth:`propose` says None."""
        return self.arms() or []

    def best_cost(self, sampler: Sampler | None) -> float | None:
        """The expected cost of a recurrence at the best batch size known to reach the target,
        or None: an exploratory try is there to beat it."""
        return None

    def try_cost_bound(self, ctx: PolicyContext, batch_size: int, sampler: Sampler | None) -> float | None:
        """Where a try at ``batch_size`` should stop (:class:`zeus_core.TryCostBound`), or None."""
        return None

    def summary(self) -> dict[str, Any]:
        """What exploration did, for ``summary.json``."""
        return {}


class SequentialExplorer(Explorer):
    """An explorer that runs to its end before sampling starts, over the sizes it kept.

    A resumable state machine (the paper's pruning, the walk): ``next()`` names the
    size to try until ``done``; ``observe(batch_size, cost, reached)`` records that
    try; ``survivors`` become the sampler's arms once it is done. Tries after the end
    are the sampler's alone."""

    @property
    def done(self) -> bool:
        """Whether the explorer has run to its end."""
        raise NotImplementedError

    @property
    def survivors(self) -> list[int]:
        """The sizes kept: the sampler's arms once :attr:`done`."""
        raise NotImplementedError

    def next(self) -> int | None:
        raise NotImplementedError

    def observe(self, batch_size: int, cost: float, reached: bool) -> None:
        raise NotImplementedError

    def propose(self, ctx: PolicyContext, sampler: Sampler | None) -> int | None:
        return self.next()

    def observe_try(self, record: TryRecord, cost: float) -> None:
        if not self.done:
            self.observe(int(record.batch_size), cost, bool(record.reached))

    def arms(self) -> list[int] | None:
        return self.survivors if self.done else None

    def summary(self) -> dict[str, Any]:
        # "pruning_done": the key summary.json has always had, whichever of the two explored.
        return {"pruning_done": self.done, "survivors": self.survivors}


def state_json(state: Any) -> dict[str, Any]:
    """An attrs strategy's stored state: its init fields (settings from :class:`Env` are not)."""
    return attrs.asdict(state, filter=lambda a, _v: a.init)


def noise_bound(sds: float, best: float | None, cv: float) -> float | None:
    """``explore_bound_sds``: an exploratory try stops ``sds`` noise sds (relative noise
    ``cv``) above the best known cost ``best``; None when off or nothing is known."""
    if not math.isfinite(sds) or best is None:
        return None
    return best * (1.0 + sds * cv)

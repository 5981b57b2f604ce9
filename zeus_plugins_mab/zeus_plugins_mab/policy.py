"""The ``mab`` batch-size policy: exploration, then Thompson sampling, as a variant composes them.

The same class serves ``zeus run`` (through the core's runner) and the
trace plugin's fast simulator (which calls :meth:`MabPolicy.choose` and
:meth:`MabPolicy.observe` exactly as the runner does), so a benchmark
measures the policy that users run.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NoReturn

from zeus_core import zeus_cost
from zeus_plugins_mab.strategies import Env, Explorer, PredictEpoch, Sampler
from zeus_plugins_mab.variants import COMPOSITIONS, START_OVER, Composition

if TYPE_CHECKING:
    from zeus_core import JobSummary, PolicyContext, TryRecord
    from zeus_plugins_mab.options import MabOptions

#: A try the cost bound did not let start is fed back as this many times the bound
#: (``beta x min_cost``); where that bound is infinite the try teaches only the explorer.
NEVER_RAN_PENALTY = 100.0

#: Where states written before the variants were compositions (issue #12) kept the
#: explorer that is not ``guided`` (under "pruning"), and which sampler "bandit" holds.
_LEGACY = {"paper": ("pruning", "gaussian-ts"), "improved": ("walk", "relative-ts")}


def _never_ran(record: TryRecord) -> bool:
    """Whether a try stopped before its first epoch without reaching the target."""
    return record.epochs == 0 and not record.reached


def effective_default(batch_sizes: list[int], default: int) -> int:
    """The largest listed batch size not above ``default`` (the paper's min(b0, max bs))."""
    below = [b for b in batch_sizes if b <= default]
    if not below:
        raise ValueError(
            f"default batch size {default} is smaller than every batch size the workload offers "
            f"({', '.join(map(str, batch_sizes))}); set batch_size.default to one of them"
        )
    return max(below)


class MabPolicy:
    """Zeus's batch-size optimizer for one recurring job.

    Two stages: an explorer (:class:`~zeus_plugins_mab.strategies.Explorer`)
    proposes the tries that find the batch sizes worth sampling, and a Thompson
    sampler (:class:`~zeus_plugins_mab.strategies.Sampler`) chooses whenever the
    explorer proposes nothing. ``options.variant`` picks the composition
    (:data:`~zeus_plugins_mab.variants.COMPOSITIONS`); ``composition`` overrides it
    (to run an explorer or a sampler that no variant uses yet). The explorer also bounds the
    cost of the tries it proposes (:meth:`try_cost_bound`).

    ``predict_epoch`` is the device's (:class:`zeus_core.EpochPredictor`), when it
    has one: explorers may plan with it (guided exploration does).
    """

    def __init__(
        self,
        options: MabOptions,
        job_seed: int = 0,
        predict_epoch: PredictEpoch | None = None,
        composition: Composition | None = None,
    ) -> None:
        self.options = options
        self.composition = COMPOSITIONS[options.variant] if composition is None else composition
        self.env = Env(options, predict_epoch, job_seed if options.seed is None else options.seed)
        self.batch_sizes: list[int] | None = None
        self.default_batch_size: int | None = options.default or None
        self.explorer: Explorer | None = None
        self.sampler: Sampler | None = None
        #: (batch size, reward) of every observation, in order.
        self.history: list[tuple[int, float]] = []

    @property
    def predict_epoch(self) -> PredictEpoch | None:
        return self.env.predict_epoch

    # -- setup --

    def _register(self, ctx: PolicyContext) -> Explorer:
        bss = sorted(set(self.options.batch_sizes or ctx.batch_sizes or []))
        if not bss:
            raise ValueError("the mab policy needs batch sizes: set batch_size.batch_sizes or use a workload that lists them")
        b0 = self.options.default or ctx.default_batch_size
        if not b0:
            raise ValueError("the mab policy needs a default batch size: set batch_size.default")
        self.batch_sizes = bss
        self.default_batch_size = effective_default(bss, int(b0))
        self.explorer = self.composition.start_explorer(self.env, bss, self.default_batch_size, ctx)
        self._sampler_ready()
        return self.explorer

    def _sampler_ready(self) -> Sampler | None:
        """The sampler, built once the explorer names its arms and fed every earlier observation of them."""
        assert self.explorer is not None
        if self.sampler is None and (arms := self.explorer.arms()) is not None:
            if not arms:
                self._nothing_reached()
            sampler = self.composition.sampler.create(arms, self.env)
            for bs, reward in self.history:
                if bs in sampler.arms:
                    sampler.observe(bs, reward)
            self.sampler = sampler
        return self.sampler

    def _nothing_reached(self) -> NoReturn:
        raise RuntimeError(
            f"no batch size reached the target during exploration (tried {sorted({b for b, _ in self.history})}); "
            "check job.target_metric and job.max_epochs"
        )

    def _check_arms(self, batch_sizes: list[int] | None) -> None:
        """A stored state belongs to one batch-size list (one trace, one GPU)."""
        if self.options.batch_sizes or not batch_sizes or self.batch_sizes is None:
            return
        if sorted(set(batch_sizes)) != self.batch_sizes:
            raise ValueError(
                f"the store holds a mab state for batch sizes {self.batch_sizes}, but the workload offers "
                f"{sorted(set(batch_sizes))} (another trace or GPU?); {START_OVER}"
            )

    # -- the BatchSizePolicy protocol --

    def choose(self, ctx: PolicyContext) -> int:
        explorer = self._register(ctx) if self.explorer is None else self.explorer
        self._check_arms(ctx.batch_sizes)
        nxt = explorer.propose(ctx, self.sampler)
        if nxt is not None:
            return nxt
        sampler = self._sampler_ready()
        if sampler is None:
            raise RuntimeError(f"the {explorer.name!r} explorer proposed no batch size but named none to sample among")
        choices = explorer.choices()
        if not choices:
            self._nothing_reached()
        return sampler.predict(among=choices)

    def best_known_cost(self) -> float | None:
        """The explorer's expected cost of a recurrence at the best batch size known to reach
        the target (what an exploratory try has to beat), or None."""
        return None if self.explorer is None else self.explorer.best_cost(self.sampler)

    def try_cost_bound(self, ctx: PolicyContext, batch_size: int) -> float | None:
        """The explorer's bound on a try at ``batch_size`` (:class:`zeus_core.TryCostBound`): the
        runner stops the try at the lower of it and ``beta x min_cost``. The paper's pruning sets
        none; see :meth:`Guided.try_cost_bound <zeus_plugins_mab.guided.Guided.try_cost_bound>` and
        :meth:`Walk.try_cost_bound <zeus_plugins_mab.walk.Walk.try_cost_bound>`."""
        return None if self.explorer is None else self.explorer.try_cost_bound(ctx, int(batch_size), self.sampler)

    def cost_of(self, ctx: PolicyContext, record: TryRecord) -> float:
        """The cost the policy learns from: the try's, or a penalty when it never started."""
        o = self.options
        if _never_ran(record):
            beta = o.beta_knob if o.beta_knob is not None else ctx.job.beta_knob
            return NEVER_RAN_PENALTY * beta * ctx.min_cost
        if self.composition.steady_cost and record.steady_cost is not None and o.eta_knob is None:
            return float(record.steady_cost)
        if o.eta_knob is None:
            return float(record.cost)
        return float(zeus_cost(record.energy_j, record.time_s, o.eta_knob, ctx.max_power_w))

    def observe(self, ctx: PolicyContext, record: TryRecord) -> None:
        explorer = self._register(ctx) if self.explorer is None else self.explorer
        bs = int(record.batch_size)
        cost = self.cost_of(ctx, record)
        if math.isinf(cost) and _never_ran(record):
            # It never ran and no finite bound stopped it (a client whose process ended before its
            # first report, under beta_knob = inf or before any recurrence finished): the explorer
            # learns that it failed; there is no cost for the sampler to learn.
            explorer.observe_try(record, cost)
            return
        if not math.isfinite(cost):
            raise ValueError(f"try at batch size {bs} has a non-finite cost {cost!r}")
        self.history.append((bs, -cost))
        explorer.observe_try(record, cost)
        if self.sampler is not None:
            self.sampler.observe(bs, -cost)

    # -- state --

    def get_state(self) -> dict[str, Any]:
        e, s = self.explorer, self.sampler
        return {
            "variant": self.options.variant,
            "batch_sizes": self.batch_sizes,
            "default": self.default_batch_size,
            "explorer": None if e is None else {"name": e.name, "state": e.to_json()},
            "sampler": None if s is None else {"name": s.name, "state": s.to_json()},
            "history": [[b, r] for b, r in self.history],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        if state.get("variant") != self.options.variant:
            raise ValueError(
                f"the store holds the state of mab variant {state.get('variant')!r}, but the job asks for "
                f"{self.options.variant!r}; {START_OVER}"
            )
        wanted = sorted(set(self.options.batch_sizes))
        if wanted and state["batch_sizes"] is not None and wanted != state["batch_sizes"]:
            raise ValueError(
                f"the store holds a mab state for batch sizes {state['batch_sizes']}, but the job lists {wanted}; {START_OVER}"
            )
        if "explorer" not in state:
            state = _upgrade(state)
        self.batch_sizes = state["batch_sizes"]
        self.default_batch_size = state["default"]
        stored_explorer, stored_sampler = state["explorer"], state["sampler"]
        self.explorer = None if stored_explorer is None else self.composition.restore_explorer(stored_explorer, self.env)
        self.sampler = None if stored_sampler is None else self.composition.restore_sampler(stored_sampler)
        self.history = [(int(b), float(r)) for b, r in state["history"]]

    def summary(self, job: JobSummary) -> dict[str, Any]:
        out: dict[str, Any] = {"variant": self.options.variant, "default_batch_size": self.default_batch_size}
        if self.explorer is not None:
            out.update(self.explorer.summary())
        if self.sampler is not None:
            # null for a batch size nothing is known of (never tried, flat prior); + 0.0: never a negative zero
            mean, sd = self.sampler.posterior()
            out["posterior_mean_cost"] = {
                str(a): -float(m) + 0.0 if math.isfinite(float(s)) else None for a, m, s in zip(self.sampler.arms, mean, sd)
            }
        return out


def _upgrade(state: dict[str, Any]) -> dict[str, Any]:
    """A state in the layout before issue #12: the explorer under "guided" or "pruning", the sampler under "bandit"."""
    explorer_name, sampler_name = _LEGACY[state["variant"]]
    explorer = None
    if state.get("guided") is not None:
        explorer = {"name": "guided", "state": state["guided"]}
    elif state.get("pruning") is not None:
        explorer = {"name": explorer_name, "state": state["pruning"]}
    sampler = None if state.get("bandit") is None else {"name": sampler_name, "state": state["bandit"]}
    return {**state, "explorer": explorer, "sampler": sampler}

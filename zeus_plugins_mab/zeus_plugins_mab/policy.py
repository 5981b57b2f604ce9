"""The ``mab`` batch-size policy: pruning, then Gaussian Thompson sampling.

The same class serves ``zeus run`` (through the core's runner) and the
trace plugin's fast simulator (which calls :meth:`MabPolicy.choose` and
:meth:`MabPolicy.observe` exactly as the runner does), so a benchmark
measures the policy that users run.
"""

from __future__ import annotations

import math
from typing import Any

from zeus_core import zeus_cost

from zeus_plugins_mab.gaussian_ts import GaussianTS
from zeus_plugins_mab.guided import EpochPredictor, Guided, epoch_costs
from zeus_plugins_mab.options import MabOptions
from zeus_plugins_mab.pruning import Pruning
from zeus_plugins_mab.relative_ts import RelativeTS
from zeus_plugins_mab.walk import Walk

#: A try the cost bound did not let start is fed back as this many times the bound.
NEVER_RAN_PENALTY = 100.0

#: Once ``explore_budget`` is spent, an exploratory try still runs until it costs the best
#: size's expected cost plus this many noise sds: until then it may still beat the best.
BUDGET_FLOOR_SDS = 2.0


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

    Two stages: exploration (``paper``: two pruning rounds; ``improved``: one
    walk down and up that also stops where cost turns up), then Thompson
    sampling over the batch sizes exploration kept (``paper``: per-arm noise;
    ``improved``: noise pooled over arms). The improved variant also learns
    from a try's steady-state cost (``record.extra["steady_cost"]``, what it
    would have cost without the power-profiling epoch) when the power policy
    reports one, since that is what later tries at that batch size will cost.

    ``predict_epoch`` (the device's, when it has one) predicts one epoch's
    (limit, time, energy) rows at a batch size before it runs; with it, the
    improved variant explores where a model of epochs to target expects
    savings (:mod:`zeus_plugins_mab.guided`) instead of walking; without it
    (a real GPU), or with ``use_predictions = false``, it walks.
    """

    def __init__(self, options: MabOptions, job_seed: int = 0, predict_epoch: EpochPredictor | None = None) -> None:
        self.options = options
        self.predict_epoch = predict_epoch
        self.guided: Guided | None = None
        self.seed = job_seed if options.seed is None else options.seed
        self.batch_sizes: list[int] | None = None
        self.default_batch_size: int | None = options.default or None
        self.paper = options.variant == "paper"
        self.pruning: Pruning | Walk | None = None
        self.ts: GaussianTS | RelativeTS | None = None
        #: (batch size, reward) of every observation, in order.
        self.history: list[tuple[int, float]] = []

    # -- setup --

    def _register(self, ctx: Any) -> None:
        batch_sizes, default = ctx.batch_sizes, ctx.default_batch_size
        bss = sorted(set(self.options.batch_sizes or batch_sizes or []))
        if not bss:
            raise ValueError("the mab policy needs batch sizes: set batch_size.batch_sizes or use a workload that lists them")
        b0 = self.options.default or default
        if not b0:
            raise ValueError("the mab policy needs a default batch size: set batch_size.default")
        self.batch_sizes = bss
        self.default_batch_size = effective_default(bss, int(b0))
        o = self.options
        if self.paper:
            self.pruning = Pruning.start(bss, self.default_batch_size, o.pruning_rounds)
            return
        eta = o.eta_knob if o.eta_knob is not None else ctx.job.eta_knob
        cpe = epoch_costs(self.predict_epoch, bss, eta, ctx.max_power_w) if o.use_predictions else None
        if cpe is None:
            self.pruning = Walk.start(bss, self.default_batch_size, o.tolerance, o.patience)
            return
        self.guided = Guided(bss, cpe, self.default_batch_size, o.min_improvement_prob, o.sigma_w, o.sigma_slope)
        self.ts = self._relative_ts(bss)

    def horizon(self) -> int:
        """``explore_budget``'s horizon: the option, or the recurrences the paper's evaluation
        gives a job, 2 x batch sizes x power limits (the device's limits per batch size)."""
        if self.options.horizon:
            return self.options.horizon
        bss = self.batch_sizes or []
        limits = max((len(self.predict_epoch(int(b)) or ()) for b in bss), default=0) if self.predict_epoch else 0
        return 2 * len(bss) * max(limits, 1)

    def _relative_ts(self, arms: list[int]) -> RelativeTS:
        o = self.options
        return RelativeTS(arms, cv0=o.cv0, prior_mean=o.prior_mean, prior_precision=o.prior_precision, window=o.window, seed=self.seed)

    def _build_bandit(self) -> GaussianTS | RelativeTS:
        assert self.pruning is not None
        o = self.options
        arms = self.pruning.survivors
        if not arms:
            raise RuntimeError(
                f"no batch size reached the target during exploration (tried {sorted({b for b, _ in self.history})}); "
                "check job.target_metric and job.max_epochs"
            )
        ts: GaussianTS | RelativeTS
        if self.paper:
            ts = GaussianTS(
                arms,
                prior_mean=o.prior_mean,
                prior_precision=o.prior_precision,
                num_exploration=o.num_exploration,
                window=o.window,
                seed=self.seed,
            )
        else:
            ts = self._relative_ts(arms)
        for bs, reward in self.history:
            if bs in ts.rewards:
                ts.rewards[bs].append(reward)
        if isinstance(ts, GaussianTS):
            for a in ts.arms:
                ts.fit(a)
        return ts

    # -- the BatchSizePolicy protocol --

    def _check_arms(self, batch_sizes: list[int] | None) -> None:
        """A stored state belongs to one batch-size list (one trace, one GPU)."""
        if self.options.batch_sizes or not batch_sizes or self.batch_sizes is None:
            return
        if sorted(set(batch_sizes)) != self.batch_sizes:
            raise ValueError(
                f"the store holds a mab state for batch sizes {self.batch_sizes}, but the workload offers "
                f"{sorted(set(batch_sizes))} (another trace or GPU?); use another job.store (or zeus run --fresh) to start over"
            )

    def _started(self) -> bool:
        return self.pruning is not None or self.guided is not None

    def _choose_guided(self, ctx: Any) -> int:
        assert self.guided is not None and isinstance(self.ts, RelativeTS)
        reached = [self.guided.batch_sizes[k] for k in self.guided.reached]
        if reached and ctx.try_index > 1:
            # A try of this recurrence stopped: restart at a size known to reach the target.
            return self.ts.predict(among=reached)
        nxt = self.guided.explore(self.best_known_cost())
        return nxt if nxt is not None else self.ts.predict(among=reached)

    def choose(self, ctx: Any) -> int:
        if not self._started():
            self._register(ctx)
        self._check_arms(ctx.batch_sizes)
        if self.guided is not None:
            return self._choose_guided(ctx)
        assert self.pruning is not None
        nxt = self.pruning.next()
        if nxt is not None:
            return nxt
        if self.ts is None:
            self.ts = self._build_bandit()
        return self.ts.predict()

    def best_known_cost(self) -> float | None:
        """The expected steady-state cost of a recurrence at the best batch size known to
        reach the target (lowest posterior mean among them; the walk's lowest cost while
        it walks), or None before any has."""
        if self.guided is not None:
            assert isinstance(self.ts, RelativeTS)
            reached = [self.guided.batch_sizes[k] for k in self.guided.reached]
            if not reached:
                return None
            mean = dict(zip(self.ts.arms, self.ts.posterior()[0]))
            return min(-float(mean[b]) for b in reached)
        if isinstance(self.pruning, Walk) and not self.pruning.done:
            return self.pruning.best
        return None

    def try_cost_bound(self, ctx: Any, batch_size: int) -> float | None:
        """The improved variant stops an exploratory try once it has lost to the best.

        A try at a batch size not yet known to reach the target is there to learn
        whether that size is cheaper than the best known one (expected cost ``C``,
        :meth:`best_known_cost`). The runner's early stop counts steady-state epochs,
        the unit the policy learns in, so the bound is comparable with ``C``. Two
        bounds, the lower applies; the runner takes the smaller of it and the paper's
        ``beta x min_cost`` (2x the best recurrence: a size that never reaches the
        target, imagenet's 64, costs 2 recurrences there):

        * ``explore_stop`` (guided exploration, on by default): where finishing the try
          is expected to cost more than a restart at the best size, by the epochs
          model and a prior chance ``fail_prob`` that a run never reaches the target
          (:meth:`Guided.stop_epochs`); the stopped size may be tried again while the
          model still gives it a chance (:meth:`Guided.explore`).
        * ``explore_bound_sds = k`` (off by default; the walk too): ``C x (1 + k cv)``,
          ``cv`` the pooled relative noise of a try's cost (:meth:`RelativeTS.cv`).
          On the NSDI'23 grid it censors unlucky runs of movielens' best sizes (4-7
          epochs) and, with retries, retries sizes within noise of the best over and
          over (see the README).
        * ``explore_budget = f`` (guided exploration, 5 % by default): the exploratory
          tries that stop before the target are pure loss (their recurrence starts
          again), and together they may waste at most ``f x horizon x C``. A try may
          run until it has cost what the budget has left, but at least ``C x (1 + 2 cv)``
          (until then it may still show its size beats the best). This bounds what a
          short job loses to a size that never reaches the target (P100 imagenet's 64:
          24 recurrences, a stop at 1.8 C was 7.5 % of the job); on long jobs the
          budget is never spent and the model's bound is the one that acts.

        Sampling tries (sizes that reached the target) keep the paper's bound, and the
        paper variant keeps it everywhere.
        """
        if self.paper:
            return None
        bounds = (self._model_bound(ctx, batch_size), self._noise_bound(batch_size), self._budget_bound(ctx, batch_size))
        bounds = [b for b in bounds if b is not None]
        return min(bounds) if bounds else None

    def _model_bound(self, ctx: Any, batch_size: int) -> float | None:
        """Guided exploration's bound (``explore_stop``): see :meth:`Guided.stop_epochs`."""
        o = self.options
        if self.guided is None or not o.explore_stop:
            return None
        bs = int(batch_size)
        k = self.guided.batch_sizes.index(bs)
        if k in self.guided.reached:  # a sampling try: the paper's bound
            return None
        cpe = self.guided.cost_per_epoch[k]
        # The most epochs the runner allows this try: the job's, and beta x min_cost.
        most = int(ctx.job.max_epochs)
        beta = o.beta_knob if o.beta_knob is not None else ctx.job.beta_knob
        if math.isfinite(ctx.min_cost):
            most = min(most, int(beta * ctx.min_cost // cpe))
        assert isinstance(self.ts, RelativeTS)
        e = self.guided.stop_epochs(bs, self.best_known_cost(), o.fail_prob, most, o.stop_margin_sds * self.ts.cv())
        # Half an epoch of slack: the runner stops before the epoch that would pass the bound.
        return None if e is None else (e + 0.5) * cpe

    def _budget_bound(self, ctx: Any, batch_size: int) -> float | None:
        """``explore_budget``'s bound: see :meth:`try_cost_bound`."""
        o = self.options
        if self.guided is None or not math.isfinite(o.explore_budget):
            return None
        k = self.guided.batch_sizes.index(int(batch_size))
        best = self.best_known_cost()
        if k in self.guided.reached or best is None or not best > 0:
            return None
        assert isinstance(self.ts, RelativeTS)
        floor = best * (1.0 + BUDGET_FLOOR_SDS * self.ts.cv())
        # Half an epoch of slack, as the model's bound: the runner stops before the epoch that would pass it.
        # The job's horizon, or more once it has run longer.
        left = self.guided.budget_left(o.explore_budget, max(self.horizon(), ctx.recurrence), best)
        return max(floor, left) + 0.5 * self.guided.cost_per_epoch[k]

    def _noise_bound(self, batch_size: int) -> float | None:
        """``explore_bound_sds``'s bound: see :meth:`try_cost_bound`."""
        if not math.isfinite(self.options.explore_bound_sds):
            return None
        bs = int(batch_size)
        if self.guided is not None:
            known = bs in [self.guided.batch_sizes[k] for k in self.guided.reached]
        elif isinstance(self.pruning, Walk) and not self.pruning.done:
            known = str(bs) in self.pruning.costs
        else:
            return None
        best = self.best_known_cost()
        if known or best is None:
            return None
        cv = self.ts.cv() if isinstance(self.ts, RelativeTS) else self.options.cv0
        return best * (1.0 + self.options.explore_bound_sds * cv)

    def cost_of(self, ctx: Any, record: Any) -> float:
        """The cost the policy learns from: the try's, or a penalty when it never started."""
        o = self.options
        if record.epochs == 0 and not record.reached:
            beta = o.beta_knob if o.beta_knob is not None else ctx.job.beta_knob
            return NEVER_RAN_PENALTY * beta * ctx.min_cost
        if not self.paper and "steady_cost" in record.extra and o.eta_knob is None:
            return float(record.extra["steady_cost"])
        if o.eta_knob is None:
            return float(record.cost)
        return float(zeus_cost(record.energy_j, record.time_s, o.eta_knob, ctx.max_power_w))

    def observe(self, ctx: Any, record: Any) -> None:
        if not self._started():
            self._register(ctx)
        bs = int(record.batch_size)
        cost = self.cost_of(ctx, record)
        if not math.isfinite(cost):
            raise ValueError(f"try at batch size {bs} has a non-finite cost {cost!r}")
        self.history.append((bs, -cost))
        if self.guided is not None:
            assert self.ts is not None
            self.guided.observe(bs, int(record.epochs), bool(record.reached), float(record.cost))
            self.ts.observe(bs, -cost)
            return
        assert self.pruning is not None
        if not self.pruning.done:
            self.pruning.observe(bs, cost, bool(record.reached))
        elif self.ts is not None:
            self.ts.observe(bs, -cost)

    # -- state --

    def get_state(self) -> dict[str, Any]:
        return {
            "variant": self.options.variant,
            "batch_sizes": self.batch_sizes,
            "default": self.default_batch_size,
            "pruning": None if self.pruning is None else self.pruning.to_json(),
            "guided": None if self.guided is None else self.guided.to_json(),
            "bandit": None if self.ts is None else self.ts.to_json(),
            "history": [[b, r] for b, r in self.history],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        if state.get("variant") != self.options.variant:
            raise ValueError(
                f"the store holds the state of mab variant {state.get('variant')!r}, but the job asks for "
                f"{self.options.variant!r}; use another job.store (or zeus run --fresh) to start over"
            )
        wanted = sorted(set(self.options.batch_sizes))
        if wanted and state["batch_sizes"] is not None and wanted != state["batch_sizes"]:
            raise ValueError(
                f"the store holds a mab state for batch sizes {state['batch_sizes']}, but the job lists {wanted}; "
                "use another job.store (or zeus run --fresh) to start over"
            )
        self.batch_sizes = state["batch_sizes"]
        self.default_batch_size = state["default"]
        explorer, bandit = (Pruning, GaussianTS) if self.paper else (Walk, RelativeTS)
        self.pruning = None if state["pruning"] is None else explorer.from_json(state["pruning"])
        self.guided = None if state.get("guided") is None else Guided.from_json(state["guided"])
        self.ts = None if state["bandit"] is None else bandit.from_json(state["bandit"])
        self.history = [(int(b), float(r)) for b, r in state["history"]]

    def summary(self, _summary: Any = None) -> dict[str, Any]:
        out: dict[str, Any] = {"variant": self.options.variant, "default_batch_size": self.default_batch_size}
        if self.pruning is not None:
            out["pruning_done"] = self.pruning.done
            out["survivors"] = self.pruning.survivors
        if self.guided is not None:
            out["explored"] = sorted(self.guided.batch_sizes[k] for k in self.guided.tried)
            out["predicted_cost_per_epoch"] = {str(b): c for b, c in zip(self.guided.batch_sizes, self.guided.cost_per_epoch)}
            # What stopped exploratory tries cost, against explore_budget x horizon.
            out["exploration_waste"] = self.guided.waste
            out["horizon"] = self.horizon()
        if self.ts is not None:
            out["posterior_mean_cost"] = {str(a): -float(m) for a, m in zip(self.ts.arms, self.ts.mean)}
        return out

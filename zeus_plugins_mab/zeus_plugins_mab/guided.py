"""The improved variant's exploration when the device predicts epoch costs.

The walk (:mod:`zeus_plugins_mab.walk`) has to run a batch size to learn what
it costs. A device that can predict the time and energy of one epoch at
every (batch size, power limit) (the ``trace`` device's ``predict_epoch``)
leaves one unknown per batch size, the epochs to target, which
:class:`~zeus_plugins_mab.epochs_model.EpochsModel` models from the batch
sizes already run. Exploration then goes where the model expects savings:

* each choice, for every batch size never run, the model gives the
  probability that a recurrence there costs less than the best batch size so
  far (the lowest posterior mean cost among those that reached the target)
  and the expected saving;
* among those with probability at least ``min_improvement_prob``, the one
  with the largest expected saving is run next (it may jump past its
  neighbours: on movielens, once 2048 takes as many epochs as 1024, the model
  expects flat epochs and goes straight to 16384);
* when none qualifies, Thompson sampling with pooled noise
  (:class:`~zeus_plugins_mab.relative_ts.RelativeTS`) chooses among the batch
  sizes that reached the target; the check runs again at every choice, so
  exploration resumes if the best batch size turns out worse than it looked.

A try that stopped before the target still tells the model that its batch
size needs more epochs than it ran (a censored observation); the size stays a
candidate, with its chance computed from all its stopped runs, so an unlucky
run of a good size is not the end of it. A try the cost bound did not let
start marks its batch size as run, with nothing learned about its epochs (one
epoch there already costs more than the bound).

:class:`Guided` is the ``improved`` variant's explorer when the device predicts
epoch costs (:class:`~zeus_plugins_mab.strategies.Explorer`), and it bounds its
exploratory tries three ways (:meth:`Guided.try_cost_bound`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from zeus_core import zeus_cost
from zeus_plugins_mab.epochs_model import EpochsModel
from zeus_plugins_mab.strategies import Env, Explorer, PredictEpoch, Sampler, noise_bound, state_json

if TYPE_CHECKING:
    from zeus_core import PolicyContext, TryRecord

#: Once ``explore_budget`` is spent, an exploratory try still runs until it costs the best
#: size's expected cost plus this many noise sds: until then it may still beat the best.
BUDGET_FLOOR_SDS = 2.0


def epoch_costs(predict: PredictEpoch | None, batch_sizes: list[int], eta: float, max_power_w: float) -> list[float] | None:
    """Per batch size, the predicted cost of one epoch at its cheapest limit (what the JIT holds),
    or None when the device predicts nothing for some batch size (a real GPU)."""
    if predict is None:
        return None
    out = []
    for b in batch_sizes:
        rows = predict(int(b))
        costs = [zeus_cost(e, t, eta, max_power_w) for _p, t, e in rows or ()]
        costs = [c for c in costs if math.isfinite(c) and c > 0]
        if not costs:
            return None
        out.append(min(costs))
    return out


@attrs.define
class Guided(Explorer):
    """What exploration has learned: per batch-size index, the log epochs of runs that
    reached the target and the most epochs of a run that did not; which indices ran."""

    batch_sizes: list[int]
    cost_per_epoch: list[float]
    default: int
    min_improvement_prob: float = 0.2
    sigma_w: float = 0.3
    sigma_slope: float = 0.3
    #: Total cost of the exploratory tries that stopped before the target.
    waste: float = 0.0
    log_epochs: dict[str, list[float]] = attrs.field(factory=dict)
    censored: dict[str, list[float]] = attrs.field(factory=dict)
    tried: list[int] = attrs.field(factory=list)
    _model: EpochsModel | None = attrs.field(default=None, init=False, repr=False, eq=False)
    env: Env | None = attrs.field(default=None, init=False, repr=False, eq=False)

    name = "guided"

    @classmethod
    def create(cls, env: Env, batch_sizes: list[int], default: int, ctx: PolicyContext) -> Guided | None:
        """Guided exploration, when ``use_predictions`` is on and the device predicts every size's epochs."""
        o = env.options
        if not o.use_predictions:
            return None
        eta = o.eta_knob if o.eta_knob is not None else ctx.job.eta_knob
        cpe = epoch_costs(env.predict_epoch, batch_sizes, eta, ctx.max_power_w)
        if cpe is None:
            return None
        guided = cls(batch_sizes, cpe, default, o.min_improvement_prob, o.sigma_w, o.sigma_slope)
        guided.env = env
        return guided

    def _epochs_model(self) -> EpochsModel:
        if self._model is None:
            self._model = EpochsModel(self.batch_sizes, self.sigma_w, self.sigma_slope)
        return self._model

    @property
    def reached(self) -> list[int]:
        """Indices of the batch sizes with a run that reached the target."""
        return sorted(int(k) for k, v in self.log_epochs.items() if v)

    def sigma_e(self) -> float:
        """Pooled spread of a run's log epochs around its batch size's (prior 0.1, two runs' worth)."""
        ss, dof = 2 * 0.1**2, 2.0
        for v in self.log_epochs.values():
            if len(v) > 1:
                m = math.fsum(v) / len(v)
                ss += math.fsum((x - m) ** 2 for x in v)
                dof += len(v) - 1
        return math.sqrt(ss / dof)

    def _posterior(self):
        return self._epochs_model().fit(
            {int(k): v for k, v in self.log_epochs.items()},
            {int(k): c for k, c in self.censored.items()},
            self.sigma_e(),
        )

    def open_sizes(self) -> list[int]:
        """Indices still to learn about: never run, or only stopped before the target."""
        reached = set(self.reached)
        return [k for k in range(len(self.batch_sizes)) if k not in self.tried or (str(k) in self.censored and k not in reached)]

    def explore(self, best_cost: float | None) -> int | None:
        """The batch size to run next for what it may save, or None to exploit.

        Candidates are the sizes never run and those whose runs all stopped before the
        target: a stopped run is a lower bound on its size's epochs, and while that
        bound (with the model) still leaves the size at least ``min_improvement_prob``
        chance of beating the best, it is worth another try (an unlucky run of a good
        size stopped early is not the end of it)."""
        if not self.tried:
            return self.default
        untried = [k for k in range(len(self.batch_sizes)) if k not in self.tried]
        if not self.reached or best_cost is None or not best_cost > 0:
            if not untried:
                return None
            # Nothing reached the target yet: the untried size nearest the default.
            x0 = math.log2(self.default)
            return self.batch_sizes[min(untried, key=lambda k: (abs(math.log2(self.batch_sizes[k]) - x0), k))]
        open_ = self.open_sizes()
        if not open_:
            return None
        prob, gain = self._posterior().improvement(open_, [self.cost_per_epoch[k] for k in open_], best_cost)
        gain = np.where(prob >= self.min_improvement_prob, gain, 0.0)
        i = int(np.argmax(gain))  # the first on ties: the smaller batch size
        return self.batch_sizes[open_[i]] if gain[i] > 0.0 else None

    def stop_epochs(self, batch_size: int, best_cost: float | None, fail_prob: float, max_epochs: int, margin: float = 0.0) -> int | None:
        """After how many epochs without reaching the target an exploratory try at
        ``batch_size`` is best stopped (the recurrence then restarts at the best size,
        expected cost ``best_cost``), or None: run it to ``max_epochs`` (the most the
        runner allows: ``beta x min_cost`` or the job's ``max_epochs``).

        An optimal stopping rule for the try's own recurrence. A run reaches the target
        at an epoch the epochs model predicts (with the size's stopped runs and the run
        noise), unless it fails to reach it at all, with chance ``fail_prob`` (runs that
        never reach the target are common in the traces: imagenet's 64, movielens' small
        sizes, single runs elsewhere). After ``e`` epochs without the target, running
        one more costs ``cpe`` and ends the try with the chance that the target comes in
        that epoch; stopping costs a restart, ``best_cost``. Backward induction from
        ``max_epochs`` (where the try stops anyway) gives the first ``e`` at which
        stopping is the cheaper. Early on a run is likely to reach soon, so it goes on,
        also past the best size's cost (finishing is still cheaper than a restart);
        once the epochs pass what the model expects, a run that has not reached the target
        is ever more likely one that never will, and it stops, where the paper's
        ``beta x min_cost`` would run it to twice the best recurrence. What is learnt
        from the try is left out (a stopped size may be tried again, see :meth:`explore`).
        """
        k = self.batch_sizes.index(int(batch_size))
        if k in self.reached or best_cost is None or not best_cost > 0 or max_epochs < 2:
            return None
        e = np.arange(0, max_epochs + 1)
        surv = fail_prob + (1.0 - fail_prob) * self._posterior().reach_survival(k, e)
        surv[0] = 1.0
        c = self.cost_per_epoch[k] / best_cost
        # value[e]: expected cost to finish the recurrence after e epochs without the target
        # (units of best_cost), stopping where that is cheaper.
        go_on = np.empty(max_epochs + 1)
        value = 1.0
        for n in range(max_epochs - 1, -1, -1):
            go_on[n] = c + (surv[n + 1] / surv[n] if surv[n] > 0 else 0.0) * value
            value = min(1.0, go_on[n])
        # Never before the try has cost best_cost x (1 + margin): until then it may still beat the best.
        first = max(1, math.ceil((1.0 + margin) / c - 1e-9))
        stop = np.flatnonzero(go_on[first:max_epochs] >= 1.0)
        return int(stop[0]) + first if stop.size else None

    def budget_left(self, fraction: float, recurrences: int, best_cost: float) -> float:
        """What stopped exploratory tries may still waste: ``fraction`` of the job's
        expected cost at the best size over ``recurrences``, less what they have wasted so far."""
        return fraction * max(recurrences, 1) * best_cost - self.waste

    def observe(self, batch_size: int, epochs: int, reached: bool, cost: float = 0.0) -> None:
        """A try's outcome; ``cost``: what it cost, counted as waste when it was
        exploratory (its size never reached the target) and stopped before the target."""
        k = self.batch_sizes.index(int(batch_size))
        if not reached and k not in self.reached:
            self.waste += float(cost)
        if k not in self.tried:
            self.tried.append(k)
        if reached:
            self.log_epochs.setdefault(str(k), []).append(math.log(max(int(epochs), 1)))
        elif epochs > 0:
            self.censored.setdefault(str(k), []).append(math.log(int(epochs)))

    # -- the Explorer protocol --

    def reached_sizes(self) -> list[int]:
        """The batch sizes with a run that reached the target."""
        return [self.batch_sizes[k] for k in self.reached]

    def propose(self, ctx: PolicyContext, sampler: Sampler | None) -> int | None:
        if ctx.try_index > 1 and self.reached:
            return None  # a try of this recurrence stopped: restart at a size known to reach the target
        return self.explore(self.best_cost(sampler))

    def observe_try(self, record: TryRecord, cost: float) -> None:
        self.observe(int(record.batch_size), int(record.epochs), bool(record.reached), float(record.cost))

    def arms(self) -> list[int]:
        return self.batch_sizes

    def choices(self) -> list[int]:
        return self.reached_sizes()

    def best_cost(self, sampler: Sampler | None) -> float | None:
        """The lowest posterior mean cost among the sizes that reached the target."""
        reached = self.reached_sizes()
        if not reached or sampler is None:
            return None
        mean = dict(zip(sampler.arms, sampler.posterior()[0]))
        return min(-float(mean[b]) for b in reached)

    def horizon(self) -> int:
        """``explore_budget``'s horizon: the option, or the recurrences the paper's evaluation
        gives a job, 2 x batch sizes x power limits (the device's limits per batch size)."""
        assert self.env is not None
        if self.env.options.horizon:
            return self.env.options.horizon
        predict = self.env.predict_epoch
        limits = max((len(predict(int(b)) or ()) for b in self.batch_sizes), default=0) if predict else 0
        return 2 * len(self.batch_sizes) * max(limits, 1)

    def try_cost_bound(self, ctx: PolicyContext, batch_size: int, sampler: Sampler | None) -> float | None:
        """Stop an exploratory try once it has lost to the best size (expected cost ``C``,
        :meth:`best_cost`); sampling tries (sizes that reached the target) keep the runner's
        ``beta x min_cost``. The runner's early stop counts steady-state epochs, the unit the
        policy learns in, so the bound is comparable with ``C``. Of the bounds that are on,
        the lowest applies:

        * ``explore_stop`` (on by default): where finishing the try is expected to cost more
          than a restart at the best size, by the epochs model and a prior chance ``fail_prob``
          that a run never reaches the target (:meth:`stop_epochs`); the stopped size may be
          tried again while the model still gives it a chance (:meth:`explore`).
        * ``explore_bound_sds = k`` (off by default): ``C x (1 + k cv)``, ``cv`` the sampler's
          pooled relative noise of a try's cost. It censors unlucky runs of good sizes, and
          with retries it retries sizes within noise of the best over and over (see the README).
        * ``explore_budget = f`` (5 % by default): the exploratory tries that stop before the
          target are pure loss (their recurrence starts again), and together they may waste at
          most ``f x horizon x C``. A try may run until it has cost what the budget has left,
          but at least ``C x (1 + 2 cv)`` (until then it may still show its size beats the best).
          On long jobs the budget is never spent and the model's bound is the one that acts.
        """
        k = self.batch_sizes.index(int(batch_size))
        best = self.best_cost(sampler)
        if k in self.reached or best is None:
            return None
        assert self.env is not None and sampler is not None
        o, cv = self.env.options, sampler.cv()
        found = (self._model_bound(ctx, k, best, cv), noise_bound(o.explore_bound_sds, best, cv), self._budget_bound(ctx, k, best, cv))
        bounds = [b for b in found if b is not None]
        return min(bounds) if bounds else None

    def _model_bound(self, ctx: PolicyContext, k: int, best: float, cv: float) -> float | None:
        """``explore_stop``'s bound: see :meth:`stop_epochs`."""
        assert self.env is not None
        o = self.env.options
        if not o.explore_stop:
            return None
        cpe = self.cost_per_epoch[k]
        # The most epochs the runner allows this try: the job's, and beta x min_cost.
        most = int(ctx.job.max_epochs)
        beta = o.beta_knob if o.beta_knob is not None else ctx.job.beta_knob
        if math.isfinite(ctx.min_cost):
            most = min(most, int(beta * ctx.min_cost // cpe))
        e = self.stop_epochs(self.batch_sizes[k], best, o.fail_prob, most, o.stop_margin_sds * cv)
        # Half an epoch of slack: the runner stops before the epoch that would pass the bound.
        return None if e is None else (e + 0.5) * cpe

    def _budget_bound(self, ctx: PolicyContext, k: int, best: float, cv: float) -> float | None:
        """``explore_budget``'s bound: see :meth:`try_cost_bound`."""
        assert self.env is not None
        fraction = self.env.options.explore_budget
        if not math.isfinite(fraction) or not best > 0:
            return None
        floor = best * (1.0 + BUDGET_FLOOR_SDS * cv)
        # The job's horizon, or more once it has run longer.
        left = self.budget_left(fraction, max(self.horizon(), ctx.recurrence), best)
        # Half an epoch of slack, as the model's bound: the runner stops before the epoch that would pass it.
        return max(floor, left) + 0.5 * self.cost_per_epoch[k]

    def summary(self) -> dict[str, Any]:
        return {
            "explored": sorted(self.batch_sizes[k] for k in self.tried),
            "predicted_cost_per_epoch": {str(b): c for b, c in zip(self.batch_sizes, self.cost_per_epoch)},
            # What stopped exploratory tries cost, against explore_budget x horizon.
            "exploration_waste": self.waste,
            "horizon": self.horizon(),
        }

    def to_json(self) -> dict[str, Any]:
        return state_json(self)

    @classmethod
    def from_json(cls, state: dict[str, Any], env: Env) -> Guided:
        d = dict(state)
        d.pop("horizon", None)  # stored for a while; it is the policy's option (or its default), not learnt
        # Stores written before stopped runs were kept one by one hold only the longest.
        d["censored"] = {k: [float(v)] if isinstance(v, (int, float)) else [float(x) for x in v] for k, v in d.get("censored", {}).items()}
        guided = cls(**d)
        guided.env = env
        return guided

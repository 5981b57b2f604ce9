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
epoch there already costs more than the bound). Exploratory tries stop by
:meth:`Guided.stop_epochs` (the policy's ``explore_stop``).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import attrs
import numpy as np

from zeus_plugins_mab.epochs_model import EpochsModel

#: ``predict_epoch(batch_size)``: [(power limit, time_s, energy_j), ...] of one epoch, or None.
EpochPredictor = Callable[[int], Any]


def epoch_costs(predict: EpochPredictor | None, batch_sizes: list[int], eta: float, max_power_w: float) -> list[float] | None:
    """Per batch size, the predicted cost of one epoch at its cheapest limit (what the JIT holds),
    or None when the device predicts nothing for some batch size (a real GPU)."""
    if predict is None:
        return None
    out = []
    for b in batch_sizes:
        rows = predict(int(b))
        costs = [eta * e + (1.0 - eta) * max_power_w * t for _p, t, e in rows or ()]
        costs = [c for c in costs if math.isfinite(c) and c > 0]
        if not costs:
            return None
        out.append(min(costs))
    return out


@attrs.define
class Guided:
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

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self, filter=lambda a, _v: a.init)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Guided:
        d = dict(d)
        d.pop("horizon", None)  # stored for a while; it is the policy's option (or its default), not learnt
        # Stores written before stopped runs were kept one by one hold only the longest.
        d["censored"] = {k: [float(v)] if isinstance(v, (int, float)) else [float(x) for x in v] for k, v in d.get("censored", {}).items()}
        return cls(**d)

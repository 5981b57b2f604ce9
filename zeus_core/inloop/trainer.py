"""zeus in a trainer that owns the loop (Hugging Face ``Trainer``, Lightning): :class:`TrainerHooks`.

A trainer calls its callbacks at the epoch and step boundaries; a zeus callback
for it (``zeus-plugins-hf``, ``zeus-plugins-lightning``) only translates those
calls into :class:`TrainerHooks`' (upstream Zeus's callback names), which do the
rest the same way for every trainer:

* measure every epoch (a window over the monitor's devices; with a power
  policy, the policy's combined epoch measurement over every rank);
* run the power policy between steps (:class:`~zeus_core.PowerLimitOptimizer`,
  created when training begins, so that a process group the trainer sets up
  is there to join);
* judge each evaluation: the target reached, or the try of a
  :class:`~zeus_core.BatchSizeOptimizer` no longer paying off
  (:meth:`~zeus_core.inloop.batch_size.BatchSizeTry.should_stop`) ends training;
* when training ends, report the try to the batch-size optimizer (energy and
  time of the whole run, evaluations included; the metric; the power limit);
* hand back what to log (``zeus/energy_j``, ``zeus/time_s``, ``zeus/cost``,
  ``zeus/power_limit``) for the trainer's own logs.

A batch-size optimizer needs a way to succeed: a target (``target_metric``, or
the optimizer's) and the metric's name in the trainer's evaluation; without
one, the callback is refused when it is created, before anything trains.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zeus_core.engine.session import target_reached
from zeus_core.inloop.batch_size import BatchSizeOptimizer, BatchSizeTry, counted_energy
from zeus_core.inloop.monitor import ZeusMonitor
from zeus_core.inloop.power import PowerLimitOptimizer
from zeus_core.measurement import Measurement
from zeus_core.windows import Monitor

if TYPE_CHECKING:  # annotations only
    from zeus_core.engine.registry import Registry
    from zeus_core.results import TryRecord

RUN = "zeus-run"
EPOCH = "zeus-epoch"


class TrainerHooks:
    """What a trainer callback does for zeus, whatever the trainer.

    ``monitor``: the :class:`~zeus_core.ZeusMonitor` to measure with (default: one
    opened when training begins, every GPU, or under a launcher the rank's own).
    ``power``: a registered power policy (``jit``), None for none, with
    ``power_options`` its table; ``job``, ``store``, ``eta_knob``, ``batch_size``: as
    for :class:`~zeus_core.PowerLimitOptimizer`. ``bso`` and ``trial``: the
    :class:`~zeus_core.BatchSizeOptimizer` and the try (``bso.next()``, whose batch
    size the trainer was configured with) to report when training ends; ``metric``:
    the evaluation metric's name in the trainer (``eval_accuracy``); ``target_metric``
    and ``higher_is_better``: default the optimizer's.
    """

    def __init__(
        self,
        monitor: Monitor | None = None,
        *,
        power: str | None = "jit",
        power_options: dict[str, Any] | None = None,
        job: str | None = None,
        store: str | Path | None = None,
        eta_knob: float | None = None,
        batch_size: int | None = None,
        bso: BatchSizeOptimizer | None = None,
        trial: BatchSizeTry | None = None,
        metric: str | None = None,
        target_metric: float | None = None,
        higher_is_better: bool | None = None,
        registry: Registry | None = None,
    ) -> None:
        if monitor is not None and not isinstance(monitor, Monitor):
            raise ValueError(f"monitor must be a zeus_core.ZeusMonitor, got {type(monitor).__name__}")
        if bso is not None and not isinstance(bso, BatchSizeOptimizer):
            raise ValueError(f"bso must be a zeus_core.BatchSizeOptimizer, got {type(bso).__name__}")
        if (bso is None) != (trial is None):
            raise ValueError(
                "pass bso= and trial= together: trial = bso.next() chooses the batch size to configure the trainer "
                "with, and the callback reports that try when training ends"
            )
        if trial is not None and not isinstance(trial, BatchSizeTry):
            raise ValueError(f"trial must be what bso.next() returned, got {type(trial).__name__}")
        if metric is not None and not (isinstance(metric, str) and metric):
            raise ValueError(f'metric must name an evaluation metric of the trainer (e.g. "eval_accuracy"), got {metric!r}')
        self.target = target_metric if target_metric is not None else (bso.target_metric if bso is not None else None)
        self.higher_is_better = (
            higher_is_better if higher_is_better is not None else (bso.job.higher_is_better if bso is not None else True)
        )
        if bso is not None and (self.target is None or metric is None):
            missing = " and ".join(x for x, v in (("target_metric=", self.target), ("metric=", metric)) if v is None)
            raise ValueError(
                f"the batch-size optimizer's try can never reach its target, so it would be retried until the job "
                f'fails: pass {missing} (the evaluation metric\'s name in the trainer, e.g. metric="eval_accuracy", '
                "and the value training must reach)"
            )
        if trial is not None:
            if batch_size is not None and batch_size != trial.batch_size:
                raise ValueError(f"batch_size={batch_size} but the trial's batch size is {trial.batch_size}")
            batch_size = trial.batch_size
        if bso is not None and eta_knob is None:
            eta_knob = bso.job.eta_knob
        if bso is not None and job is None:
            job = bso.job.name
        self.monitor: Monitor | None = monitor
        self._owns_monitor = monitor is None
        self.power = power
        self.power_options = power_options
        self.job = job
        self.store = store
        self.eta_knob = 0.5 if eta_knob is None else eta_knob
        self.batch_size = batch_size
        self.bso = bso
        self.trial = trial
        self.metric = metric
        self.registry = registry
        self.plo: PowerLimitOptimizer | None = None
        #: what was logged after each epoch
        self.epochs: list[dict[str, float]] = []
        self.last_metric: float | None = None
        self.reached = False
        self.record: TryRecord | None = None
        self._time = 0.0
        self._energy_so_far: dict[str, float] = {}
        self._sources: dict[str, str] = {}
        self._scopes: dict[str, str] = {}
        self._errors_so_far: dict[str, float] = {}
        self._running = False

    # -- the trainer's events --

    def on_train_begin(self) -> None:
        if self._running:
            return
        if self.monitor is None:
            self.monitor = ZeusMonitor(registry=self.registry)
        monitor = self.monitor
        if self.power is not None:
            self.plo = PowerLimitOptimizer(
                self.monitor,
                self.power,
                self.job,
                options=self.power_options,
                batch_size=self.batch_size,
                eta_knob=self.eta_knob,
                store=self.store,
                registry=self.registry,
            )
        monitor.begin_window(RUN, restart=True)
        self._running = True

    def on_epoch_begin(self, steps: int | None = None) -> None:
        self._monitor().begin_window(EPOCH, restart=True)
        if self.plo is not None:
            self.plo.on_epoch_begin(steps)

    def on_step_begin(self) -> None:
        if self.plo is not None:
            self.plo.on_step_begin()

    def on_step_end(self) -> None:
        if self.plo is not None:
            self.plo.on_step_end()

    def on_epoch_end(self) -> dict[str, float]:
        """End the epoch; what to log about it."""
        if self.plo is not None:
            self.plo.on_epoch_end()
        m = self._monitor().end_window(EPOCH)
        if self.plo is not None:  # every rank's steered devices, combined
            e = self.plo.epochs[-1]
            logs = {"zeus/energy_j": e["energy_j"], "zeus/time_s": e["time_s"], "zeus/cost": e["cost"]}
            if e["power_limit"] is not None:
                logs["zeus/power_limit"] = float(e["power_limit"])
        else:
            energy = counted_energy(m)
            logs = {"zeus/energy_j": energy, "zeus/time_s": m.time}
            if self.bso is not None:
                logs["zeus/cost"] = self.bso.cost(energy, m.time)
        self.epochs.append(logs)
        return logs

    def metric_in(self, metrics: Mapping[str, Any], fix: str) -> float | None:
        """This callback's metric among a trainer's ``metrics`` (None when it decides nothing); a
        ValueError naming the ones there are, and ``fix``, when it is missing."""
        if self.metric is None:
            return None
        if self.metric not in metrics:
            raise ValueError(f"no metric {self.metric!r} among the trainer's ({', '.join(sorted(metrics)) or 'none'}); {fix}")
        return float(metrics[self.metric])

    def on_evaluate(self, metric: float | None) -> bool:
        """An evaluation's metric (None when it has none); True when training should stop (the
        target is reached, or the try can no longer pay off)."""
        if metric is not None:
            if isinstance(metric, bool) or not isinstance(metric, (int, float)) or not math.isfinite(metric):
                raise ValueError(f"metric {self.metric!r} must be a finite number, got {metric!r}")
            self.last_metric = float(metric)
            self.reached = target_reached(self.last_metric, self.target, self.higher_is_better)
        if self.reached:
            return True
        if self.trial is not None:
            return self.trial.should_stop(self._so_far())
        return False

    def on_train_end(self) -> TryRecord | None:
        """Training ended: the power policy's run ends (the GPUs go back), and the try is reported."""
        if not self._running:
            return None
        self._running = False
        so_far = self._so_far(restart=False)
        try:
            if self.plo is not None:
                self.plo.close()
            if self.bso is not None and self.trial is not None:
                self.record = self.bso.report(
                    self.trial,
                    energy_j=counted_energy(so_far),
                    time_s=so_far.time,
                    reached=self.reached,
                    metric=self.last_metric,
                    power=self.plo,
                    epochs=self.trial.epochs or len(self.epochs),
                )
        finally:
            if self._owns_monitor and self.monitor is not None:
                self.monitor.close()
        return self.record

    # -- internals --

    def _monitor(self) -> Monitor:
        assert self.monitor is not None, "on_train_begin() opens the monitor"
        return self.monitor

    def _so_far(self, restart: bool = True) -> Measurement:
        """The run's measurement so far (evaluations included)."""
        monitor = self._monitor()
        m = monitor.end_window(RUN)
        if restart:
            monitor.begin_window(RUN)
        self._time += m.time
        for k, v in m.energy.items():
            self._energy_so_far[k] = self._energy_so_far.get(k, 0.0) + v
        self._sources.update(m.sources)
        self._scopes.update(m.scopes)
        for k, v in m.errors.items():  # the bound of a sum of windows: the sum of their bounds
            self._errors_so_far[k] = self._errors_so_far.get(k, 0.0) + v
        return Measurement(
            self._time, dict(self._energy_so_far), dict(self._sources), scopes=dict(self._scopes), errors=dict(self._errors_so_far)
        )


class TrainerCallbackMixin:
    """What a trainer callback built on :class:`TrainerHooks` (``self.hooks``) offers its user,
    whatever the trainer: ``callback.epochs`` and ``callback.record``.

    Example::

        class ZeusCallback(TrainerCallbackMixin, SomeTrainerCallback):
            def __init__(self, monitor=None, **options):
                self.hooks = TrainerHooks(monitor, **options)
    """

    hooks: TrainerHooks

    @property
    def epochs(self) -> list[dict[str, float]]:
        """What was logged after each epoch."""
        return self.hooks.epochs

    @property
    def record(self) -> TryRecord | None:
        """The reported try (a :class:`~zeus_core.TryRecord`), once training ended; else None."""
        return self.hooks.record


__all__ = ["TrainerCallbackMixin", "TrainerHooks"]

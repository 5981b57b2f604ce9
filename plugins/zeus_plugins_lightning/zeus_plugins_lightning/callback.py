"""``ZeusCallback``: zeus in a Lightning ``Trainer`` (a ``lightning.pytorch.Callback``).

The trainer owns the loop; the callback translates its hooks into
:class:`zeus_core.TrainerHooks` (measure every training epoch, run the power
policy between batches, judge the epoch's validation metric, report the try to
a batch-size optimizer when training ends) and logs what zeus measured through
the module (``pl_module.log``: ``zeus/energy_j``, ``zeus/time_s``, ``zeus/cost``,
``zeus/power_limit`` every epoch, so the trainer's loggers, ``callback_metrics``
and progress bar have them). When the target is reached, or the try can no
longer pay off, it sets ``trainer.should_stop``.

Lightning runs an epoch's validation before ``on_train_epoch_end``; the
callback reads the metric there, from ``trainer.callback_metrics``, so validate
every epoch (the default) for the try to stop as soon as it can.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from lightning.pytorch import Callback

from zeus_core import BatchSizeOptimizer, BatchSizeTrial, Monitor, TrainerHooks


class ZeusCallback(Callback):
    """``Trainer(..., callbacks=[ZeusCallback(...)])``.

    ``monitor``: a :class:`zeus_core.ZeusMonitor` (default: one opened when training
    starts: every GPU, or the rank's own under ``torchrun``). ``power``: a registered
    power policy (default ``jit``; None: measure only), ``power_options`` its table.
    ``job``: the job's name (its store keeps what the power policy learned); default
    the batch-size optimizer's. ``bso`` and ``trial``: report this try
    (``trial = bso.next()``, whose ``batch_size`` the data loader uses) when training
    ends; ``metric``: the logged validation metric that decides (``"val_acc"``),
    ``target_metric`` and ``higher_is_better``: default the optimizer's.
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
        trial: BatchSizeTrial | None = None,
        metric: str | None = None,
        target_metric: float | None = None,
        higher_is_better: bool | None = None,
    ) -> None:
        self.hooks = TrainerHooks(
            monitor, power=power, power_options=power_options, job=job, store=store, eta_knob=eta_knob,
            batch_size=batch_size, bso=bso, trial=trial, metric=metric, target_metric=target_metric,
            higher_is_better=higher_is_better,
        )
        self.metric = metric

    # -- the trainer's hooks --

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self.hooks.on_train_begin()

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        n = trainer.num_training_batches
        self.hooks.on_epoch_begin(int(n) if isinstance(n, int) or (isinstance(n, float) and math.isfinite(n)) else None)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self.hooks.on_step_begin()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.hooks.on_step_end()

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        for name, value in self.hooks.on_epoch_end().items():
            pl_module.log(name, value, on_step=False, on_epoch=True, sync_dist=False)
        value = None
        if self.metric is not None:
            metrics = trainer.callback_metrics
            if self.metric not in metrics:
                raise ValueError(
                    f"no logged metric {self.metric!r} at the end of the epoch (logged: "
                    f"{', '.join(sorted(metrics)) or 'none'}); log it in validation_step (self.log(...)), or pass "
                    "ZeusCallback(metric=...) one of those"
                )
            value = float(metrics[self.metric])
        if self.hooks.on_evaluate(value):
            trainer.should_stop = True

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.hooks.on_train_end()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        if self.hooks.plo is not None:
            self.hooks.plo.close()  # the GPUs go back at once (the journal would at exit)

    # -- facts --

    @property
    def epochs(self) -> list[dict[str, float]]:
        """What was logged after each epoch."""
        return self.hooks.epochs

    @property
    def record(self) -> Any:
        """The reported try (a :class:`zeus_core.TryRecord`), once training ended; else None."""
        return self.hooks.record

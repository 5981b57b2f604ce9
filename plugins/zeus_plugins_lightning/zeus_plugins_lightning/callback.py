"""``ZeusCallback``: zeus in a Lightning ``Trainer`` (a ``lightning.pytorch.Callback``).

The trainer owns the loop; the callback translates its hooks into
:class:`zeus_core.inloop.trainer.TrainerHooks` (measure every training epoch, run the power
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
from typing import Any

from lightning.pytorch import Callback

from zeus_core import Monitor
from zeus_core.inloop.trainer import TrainerCallbackMixin, TrainerHooks


class ZeusCallback(TrainerCallbackMixin, Callback):
    """``Trainer(..., callbacks=[ZeusCallback(monitor, bso=bso, trial=trial, metric="val_acc")])``.

    The arguments are :class:`zeus_core.inloop.trainer.TrainerHooks`': ``monitor`` (default: a
    ``ZeusMonitor`` opened when training starts), ``power`` and ``power_options`` (the
    power policy, ``jit`` by default), ``job`` and ``store``, ``bso`` and ``trial``
    (the try whose ``batch_size`` the data loader uses, reported when training ends),
    ``metric`` (a name ``validation_step`` logs), ``target_metric`` and ``higher_is_better``.
    """

    def __init__(self, monitor: Monitor | None = None, **options: Any) -> None:
        self.hooks = TrainerHooks(monitor, **options)

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
        # With a power policy, every rank under DDP holds the same values (rank 0's combined
        # measurement of all ranks), so the mean over ranks that sync_dist takes is the value itself;
        # asking for it keeps Lightning from warning that an epoch-level metric is not synchronised.
        # Without one (power=None) each rank logs its own measurement.
        combined = self.hooks.plo is not None and trainer.world_size > 1
        for name, value in self.hooks.on_epoch_end().items():
            pl_module.log(name, value, on_step=False, on_epoch=True, sync_dist=combined)
        metric = self.hooks.metric_in(
            trainer.callback_metrics, "log it in validation_step (self.log(...)), or pass ZeusCallback(metric=...) one of those"
        )
        if self.hooks.on_evaluate(metric):
            trainer.should_stop = True

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.hooks.on_train_end()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        if self.hooks.plo is not None:
            self.hooks.plo.close()  # the GPUs go back at once (the journal would at exit)

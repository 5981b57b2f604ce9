"""``ZeusCallback``: zeus in a Hugging Face ``Trainer`` (a ``transformers.TrainerCallback``).

The trainer owns the loop; the callback translates its events into
:class:`zeus_core.inloop.trainer.TrainerHooks` (measure every epoch, run the power policy
between steps, judge each evaluation, report the try to a batch-size optimizer)
and writes what zeus measured into the trainer's own logs
(``trainer.state.log_history``, hence ``trainer_state.json``): after each epoch
an entry with ``zeus/energy_j``, ``zeus/time_s``, ``zeus/cost`` and
``zeus/power_limit``; after training, ``zeus/try_energy_j`` and friends when a
try was reported. When the target is reached, or the try can no longer pay off,
it asks the trainer to stop (``control.should_training_stop``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from zeus_core import Monitor
from zeus_core.inloop.trainer import TrainerCallbackMixin, TrainerHooks


class ZeusCallback(TrainerCallbackMixin, TrainerCallback):
    """``Trainer(..., callbacks=[ZeusCallback(monitor, bso=bso, trial=trial, metric="eval_accuracy")])``.

    The arguments are :class:`zeus_core.inloop.trainer.TrainerHooks`': ``monitor`` (default: a
    ``ZeusMonitor`` opened when training begins), ``power`` and ``power_options`` (the
    power policy, ``jit`` by default), ``job`` and ``store``, ``bso`` and ``trial``
    (the try whose ``batch_size`` the ``TrainingArguments`` use, reported when
    training ends), ``metric`` (an evaluation metric: ``compute_metrics`` names them
    ``eval_<name>``), ``target_metric`` and ``higher_is_better``. Evaluate every epoch
    (``eval_strategy="epoch"``) for the try to stop as soon as it can.
    """

    def __init__(self, monitor: Monitor | None = None, **options: Any) -> None:
        self.hooks = TrainerHooks(monitor, **options)

    # -- the trainer's events --

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.hooks.on_train_begin()

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        loader: Any = kwargs.get("train_dataloader")  # None, or a loader without a length: no length (TypeError)
        steps = None
        try:
            steps = math.ceil(len(loader) / max(1, int(args.gradient_accumulation_steps)))
        except TypeError:  # an iterable dataset: the policy plans without the epoch's length
            pass
        self.hooks.on_epoch_begin(steps)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.hooks.on_step_begin()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.hooks.on_step_end()

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        logs = self.hooks.on_epoch_end()
        state.log_history.append({**logs, "epoch": state.epoch, "step": state.global_step})

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: dict[str, float] | None = None, **kwargs: Any) -> None:
        value = self.hooks.metric_in(metrics or {}, "pass ZeusCallback(metric=...) one of them, or compute it with compute_metrics=")
        if self.hooks.on_evaluate(value):
            control.should_training_stop = True

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        record = self.hooks.on_train_end()
        if record is not None:
            state.log_history.append(
                {
                    "zeus/try_energy_j": record.energy_j,
                    "zeus/try_time_s": record.time_s,
                    "zeus/try_cost": record.cost,
                    "zeus/batch_size": record.batch_size,
                    "zeus/reached": record.reached,
                    "step": state.global_step,
                }
            )


class HFGlobalPowerLimitOptimizer(ZeusCallback):
    """Upstream Zeus's ``HFGlobalPowerLimitOptimizer(monitor, ...)``: the power-limit optimizer as a
    ``TrainerCallback``, here ``ZeusCallback`` with ``jit`` and upstream's keyword arguments
    (``warmup_steps``, ``profile_steps``, ``pl_step``, ``wait_steps``; ``optimum_selector`` is the
    default cost at ``eta_knob`` 0.5; for the others use ``ZeusCallback(power_options=...)``)."""

    def __init__(
        self,
        monitor: Monitor,
        optimum_selector: Any = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: int = 25,
        profile_path: str | Path | None = None,
        **kwargs: Any,
    ) -> None:
        if optimum_selector is not None or profile_path is not None:
            raise ValueError(
                "HFGlobalPowerLimitOptimizer here takes no optimum_selector or profile_path: pass "
                'ZeusCallback(power_options={"select": "energy"|"time"|"max-slowdown", ...}) and job= to keep '
                "the choice in the job's store"
            )
        options = {"wait_iters": wait_steps, "warmup_iters": warmup_steps, "measure_iters": profile_steps, "step_w": float(pl_step)}
        super().__init__(monitor, power="jit", power_options=options, **kwargs)

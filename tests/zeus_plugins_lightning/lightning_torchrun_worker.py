"""One rank of ``test_torchrun.py`` here, started by torchrun (not collected by pytest).

argv: out_dir, recurrences. A Lightning ``Trainer`` under torchrun (``strategy="ddp"`` over gloo
on CPU) with ``ZeusCallback`` on every rank, the batch size from a ``BatchSizeOptimizer``, one
try per recurrence; each rank writes what it saw (the batch size, its GPU's limit at every step,
the epochs' logs, the reported try) to out_dir.
"""

import json
import os
import sys
from pathlib import Path

import lightning as L
import torch
from inloop_helpers import gpu_limit
from tiny_trainers import separable_data, tiny_lightning_module

from zeus_core import BatchSizeOptimizer, ZeusMonitor
from zeus_plugins_lightning.callback import ZeusCallback

out, recurrences = Path(sys.argv[1]), int(sys.argv[2])
rank = int(os.environ["RANK"])
torch.set_num_threads(1)


class Limits(L.Callback):
    """This rank's GPU limit at every step (read from the driver, after zeus set it)."""

    def __init__(self, monitor):
        self.monitor, self.seen = monitor, []

    def on_train_batch_start(self, *args, **kwargs):
        self.seen.append(gpu_limit(self.monitor.gpu_indices[0]))


seen = []
with ZeusMonitor(cpu_indices=[]) as monitor:
    bso = BatchSizeOptimizer(
        job="lit-ranks", policy="mab", batch_sizes=[8, 16], default=8, monitor=monitor, target_metric=1.01, store=out / "lit-ranks.sqlite"
    )
    for _ in range(recurrences):
        trial = bso.next()
        cb = ZeusCallback(monitor, power_options={"warmup_iters": 1, "measure_iters": 2}, bso=bso, trial=trial, metric="val_acc")
        lim = Limits(monitor)
        trainer = L.Trainer(
            max_epochs=2,
            accelerator="cpu",
            devices=2,
            strategy="ddp",
            callbacks=[cb, lim],
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            logger=False,
            default_root_dir=str(out / "lit"),
        )
        trainer.fit(tiny_lightning_module(), separable_data(256, trial.batch_size, 1), separable_data(64, 32, 2))
        r = cb.record
        seen.append(
            {
                "batch_size": trial.batch_size,
                "limits": lim.seen,
                "gpu": monitor.gpu_indices,
                "world": trainer.world_size,
                "epochs": cb.epochs,
                "record": None if r is None else [r.recurrence, r.batch_size, r.energy_j, r.time_s, r.reached],
            }
        )
    bso.close()
(out / f"lit-{rank}.json").write_text(json.dumps(seen))

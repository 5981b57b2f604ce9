"""One rank of ``test_torchrun.py`` here, started by torchrun (not collected by pytest).

argv: out_dir, recurrences. A Hugging Face ``Trainer`` under torchrun (DDP over gloo on CPU)
with ``ZeusCallback`` on every rank, the batch size from a ``BatchSizeOptimizer``, one try per
recurrence; each rank writes what it saw (the batch size, its GPU's limit at every step, the
epochs' logs, the reported try) to out_dir.
"""

import json
import os
import sys
from pathlib import Path

import torch
import transformers
from inloop_helpers import gpu_limit
from tiny_trainers import Tokens, tiny_bert

from zeus_core import BatchSizeOptimizer, ZeusMonitor
from zeus_plugins_hf.callback import ZeusCallback

out, recurrences = Path(sys.argv[1]), int(sys.argv[2])
rank = int(os.environ["RANK"])
torch.set_num_threads(1)


class Limits(transformers.TrainerCallback):
    """This rank's GPU limit at every step (read from the driver, after zeus set it)."""

    def __init__(self, monitor):
        self.monitor, self.seen = monitor, []

    def on_step_begin(self, args, state, control, **kwargs):
        self.seen.append(gpu_limit(self.monitor.gpu_indices[0]))


seen = []
with ZeusMonitor(cpu_indices=[]) as monitor:
    bso = BatchSizeOptimizer(
        job="hf-ranks",
        policy="mab",
        batch_sizes=[8, 16],
        default=8,
        monitor=monitor,
        target_metric=0.0,
        higher_is_better=False,
        store=out / "hf-ranks.sqlite",
    )
    for _ in range(recurrences):
        trial = bso.next()
        cb = ZeusCallback(monitor, power_options={"warmup_iters": 1, "measure_iters": 2}, bso=bso, trial=trial, metric="eval_loss")
        lim = Limits(monitor)
        args = transformers.TrainingArguments(
            output_dir=str(out / "hf"),
            per_device_train_batch_size=trial.batch_size,
            per_device_eval_batch_size=32,
            num_train_epochs=2,
            eval_strategy="epoch",
            save_strategy="no",
            report_to="none",
            use_cpu=True,
            logging_strategy="no",
            disable_tqdm=True,
            dataloader_num_workers=0,
            learning_rate=1e-3,
        )
        trainer = transformers.Trainer(
            model=tiny_bert(), args=args, train_dataset=Tokens(256, 1), eval_dataset=Tokens(64, 2), callbacks=[cb, lim]
        )
        trainer.train()
        r = cb.record
        seen.append(
            {
                "batch_size": trial.batch_size,
                "limits": lim.seen,
                "gpu": monitor.gpu_indices,
                "world": torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1,
                "epochs": cb.epochs,
                "record": None if r is None else [r.recurrence, r.batch_size, r.energy_j, r.time_s, r.reached],
            }
        )
    bso.close()
(out / f"hf-{rank}.json").write_text(json.dumps(seen))

"""``ZeusCallback`` in a Lightning ``Trainer``: a tiny module, generated data, the simulated NVIDIA driver."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
from inloop_helpers import assert_one_trainer_job_across_ranks, fake_gpus, limits, torchrun_trainer_ranks
from tiny_trainers import separable_data, tiny_lightning_module

from zeus_core import BatchSizeOptimizer, ZeusMonitor
from zeus_core.engine.registry import get_registry
from zeus_core.engine.stores.locations import open_store

HERE = Path(__file__).resolve().parent

L = pytest.importorskip("lightning")
from zeus_plugins_lightning.callback import ZeusCallback  # noqa: E402


def test_the_callback_logs_energy_steers_stops_at_the_target_and_reports_the_try(tmp_path, monkeypatch):
    driver = fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=1)
    torch.set_num_threads(1)
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as monitor:
        bso = BatchSizeOptimizer(job="lit", policy="mab", batch_sizes=[8, 16], default=8, monitor=monitor, target_metric=0.9)
        trial = bso.next()
        cb = ZeusCallback(monitor, power_options={"warmup_iters": 1, "measure_iters": 2}, bso=bso, trial=trial, metric="val_acc")
        trainer = L.Trainer(
            max_epochs=5,
            accelerator="cpu",
            devices=1,
            callbacks=[cb],
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            logger=L.pytorch.loggers.CSVLogger(tmp_path / "logs"),
            log_every_n_steps=1,
        )
        trainer.fit(tiny_lightning_module(), separable_data(512, trial.batch_size, 1), separable_data(128, 128, 2))
        assert limits(driver) == [400.0]
        bso.close()
    assert cb.record is not None and cb.record.batch_size == trial.batch_size
    assert cb.record.reached is (trainer.callback_metrics["val_acc"] >= 0.9).item()
    assert cb.record.reached and trainer.current_epoch < 5  # stopped at the target
    for key in ("zeus/energy_j", "zeus/time_s", "zeus/cost", "zeus/power_limit"):
        assert key in trainer.callback_metrics
    rows = list(csv.DictReader((tmp_path / "logs" / "lightning_logs" / "version_0" / "metrics.csv").open()))
    logged = [float(r["zeus/energy_j"]) for r in rows if r.get("zeus/energy_j")]
    assert len(logged) == len(cb.epochs) and all(e > 0 for e in logged)
    store = open_store(".zeus/lit.sqlite", get_registry())
    try:
        assert [(t.recurrence, t.reached, t.power_limit) for t in store.tries()] == [(1, True, cb.epochs[-1]["zeus/power_limit"])]
    finally:
        store.close()


def test_a_try_with_no_way_to_succeed_is_refused_when_the_callback_is_made():
    bso = BatchSizeOptimizer(job="lit-refused", batch_sizes=[8], default=8, max_power_w=400.0)
    trial = bso.next()
    with pytest.raises(ValueError, match=r"can never reach its target.*pass target_metric= and metric="):
        ZeusCallback(bso=bso, trial=trial)


def test_under_torchrun_every_rank_follows_one_decision_and_the_try_is_recorded_once(tmp_path, monkeypatch):
    """``torchrun --nproc-per-node=2`` of a script whose Trainer runs ``strategy="ddp"`` over gloo on CPU."""
    code, output, driver, ranks = torchrun_trainer_ranks(tmp_path, monkeypatch, HERE / "lightning_torchrun_worker.py", "lit")
    assert_one_trainer_job_across_ranks(code, output, driver, ranks, tmp_path / "lit-ranks.sqlite")
    assert "sync_dist=True" not in output  # zeus's logs are the ranks' combined values: no warning about them

"""``ZeusCallback`` in a Hugging Face ``Trainer``: a tiny BERT built from a config (no download),
generated data, on the simulated NVIDIA driver."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from inloop_helpers import assert_one_trainer_job_across_ranks, fake_gpus, limits, torchrun_trainer_ranks
from tiny_trainers import Tokens, tiny_bert

from zeus_core import BatchSizeOptimizer, ZeusMonitor
from zeus_core.engine.registry import get_registry
from zeus_core.engine.stores.locations import open_store

HERE = Path(__file__).resolve().parent

transformers = pytest.importorskip("transformers")
from zeus_plugins_hf.callback import HFGlobalPowerLimitOptimizer, ZeusCallback  # noqa: E402

JIT = {"warmup_iters": 1, "measure_iters": 2}


def _trainer(tmp_path, batch_size, callback, epochs=3):
    model = tiny_bert()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"),
        per_device_train_batch_size=batch_size,
        per_device_eval_batch_size=64,
        num_train_epochs=epochs,
        eval_strategy="epoch",
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        logging_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        learning_rate=1e-3,
    )
    return transformers.Trainer(model=model, args=args, train_dataset=Tokens(384, 1), eval_dataset=Tokens(64, 2), callbacks=[callback])


def test_the_callback_measures_steers_stops_at_the_target_and_reports_the_try(tmp_path, monkeypatch):
    driver = fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=1)
    torch.set_num_threads(1)
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as monitor:
        bso = BatchSizeOptimizer(job="hf", policy="mab", batch_sizes=[8, 16], default=8, monitor=monitor)
        trial = bso.next()
        cb = ZeusCallback(monitor, power_options=JIT, bso=bso, trial=trial, metric="eval_loss", target_metric=0.8, higher_is_better=False)
        trainer = _trainer(tmp_path, trial.batch_size, cb)
        trainer.train()
        assert limits(driver) == [400.0]  # the try's end put the GPU back
        bso.close()
    epochs = [e for e in trainer.state.log_history if "zeus/energy_j" in e]
    evals = [e["eval_loss"] for e in trainer.state.log_history if "eval_loss" in e]
    assert 1 <= len(epochs) == len(cb.epochs) <= 3 and len(evals) == len(epochs)
    assert all(e["zeus/energy_j"] > 0 and e["zeus/time_s"] > 0 and e["zeus/cost"] > 0 for e in epochs)
    reached = evals[-1] <= 0.8
    assert cb.record.reached is reached and (reached or len(epochs) == 3)  # stopped at the target, or ran out
    assert trainer.state.log_history[-1]["zeus/try_energy_j"] == cb.record.energy_j
    assert cb.record.energy_j >= sum(e["zeus/energy_j"] for e in epochs) * 0.99  # evaluations included
    store = open_store(".zeus/hf.sqlite", get_registry())
    try:
        tries = store.tries()
        power = store.get("policy:power")
    finally:
        store.close()
    assert [(t.recurrence, t.batch_size, t.reached) for t in tries] == [(1, trial.batch_size, reached)]
    assert power["choices"][str(trial.batch_size)]["power_limit"] == tries[0].power_limit
    # the callback ran the jit policy over every limit, and the last epoch held the one it chose
    assert sorted(float(k) for k in power["choices"][str(trial.batch_size)]["profile"]) == list(range(100, 401, 25))
    assert epochs[-1]["zeus/power_limit"] == power["choices"][str(trial.batch_size)]["power_limit"]


def test_a_try_with_no_way_to_succeed_is_refused_when_the_callback_is_made(tmp_path, monkeypatch):
    fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=1)
    bso = BatchSizeOptimizer(job="hf-refused", batch_sizes=[8], default=8, max_power_w=400.0)
    trial = bso.next()
    with pytest.raises(ValueError, match=r"can never reach its target.*pass target_metric= and metric="):
        ZeusCallback(bso=bso, trial=trial)
    with pytest.raises(ValueError, match="pass bso= and trial= together"):
        ZeusCallback(bso=bso)
    with pytest.raises(ValueError, match="no optimum_selector or profile_path"):
        HFGlobalPowerLimitOptimizer(None, profile_path="p.json")
    # A metric the evaluation does not have is named with the ones it has.
    cb = ZeusCallback(power=None, bso=bso, trial=trial, metric="eval_acc", target_metric=0.9)
    trainer = _trainer(tmp_path, 8, cb, epochs=1)
    with pytest.raises(ValueError, match="no metric 'eval_acc' among the trainer's \\(.*eval_loss"):
        trainer.train()


def test_under_torchrun_every_rank_follows_one_decision_and_the_try_is_recorded_once(tmp_path, monkeypatch):
    """``torchrun --nproc-per-node=2`` of a script whose Trainer runs DDP over gloo on CPU."""
    code, output, driver, ranks = torchrun_trainer_ranks(tmp_path, monkeypatch, HERE / "hf_torchrun_worker.py", "hf")
    assert_one_trainer_job_across_ranks(code, output, driver, ranks, tmp_path / "hf-ranks.sqlite")

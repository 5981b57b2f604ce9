"""``zeus run`` with ``[workload] plugin = "torch"``: real training, errors, lr scaling."""

from __future__ import annotations

import json

import pytest
from zeus_test_helpers import run_cli, write_job

from zeus_core.engine.stores.sqlite import Store

JOB = """
[job]
name = "lin"
recurrences = {recurrences}
target_metric = 0.9
max_epochs = 8
store = "state.sqlite"

[workload]
plugin = "torch"
entry = "{module}:train"
default_batch_size = 16
{workload}

[workload.args]
{args}

[device]
plugin = "wall"

[batch_size]
plugin = "fixed"
default = {batch_size}
"""


def job(tmp_path, module, *, recurrences=2, batch_size=32, workload="", args=""):
    return write_job(
        tmp_path / "job.toml", JOB.format(recurrences=recurrences, module=module, batch_size=batch_size, workload=workload, args=args)
    )


def test_trains_to_the_target_each_recurrence(tmp_path, registry, write_trainer):
    path = job(tmp_path, write_trainer(tmp_path), args=f'out = "{tmp_path}/out.jsonl"\nscale = true')
    # Real training on a shared machine: wall time varies, so no early stop here.
    result = run_cli(registry, "run", str(path), "--set", "job.beta_knob=inf")
    assert result.exit_code == 0, result.output
    tries = Store(tmp_path / "state.sqlite").tries()
    assert [t.recurrence for t in tries] == [1, 2] and all(t.reached for t in tries)
    assert all(t.extra["metric"] >= 0.9 and t.energy_j > 0 and t.time_s > 0 for t in tries)
    recs = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["epochs"][-1] for r in recs] == [t.epochs for t in tries]
    assert recs[0]["lr_factor"] == pytest.approx(2.0)  # SGD: linear, 32 / 16


def test_a_training_function_that_raises_fails_the_run_and_keeps_results(tmp_path, registry, write_trainer):
    path = job(tmp_path, write_trainer(tmp_path), recurrences=3, args="fail_recurrence = 2")
    result = run_cli(registry, "run", str(path))
    assert result.exit_code == 1
    assert "recurrence 2, try 1 (batch size 32) failed in the workload" in result.output
    assert "ZeroDivisionError: training blew up on purpose" in result.output
    tries = Store(tmp_path / "state.sqlite").tries()
    assert [(t.recurrence, t.reached) for t in tries] == [(1, True)]


def test_bad_entry_is_bad_input(tmp_path, registry, write_trainer):
    path = job(tmp_path, write_trainer(tmp_path))
    result = run_cli(registry, "run", str(path), "--set", "workload.entry=nosuchmodule_xyz:train")
    assert result.exit_code == 2
    assert "no module named 'nosuchmodule_xyz'" in result.output
    result = run_cli(registry, "run", str(path), "--set", f"workload.entry={path.parent.glob('train_*.py').__next__().stem}:nope")
    assert result.exit_code == 2 and "has no attribute 'nope'" in result.output


def test_options_are_validated_with_their_path(tmp_path, registry, write_trainer):
    path = job(tmp_path, write_trainer(tmp_path), workload='lr_scaling = "cubic"\nbatch_sizes = [8, 32]')
    result = run_cli(registry, "validate", str(path))
    assert result.exit_code == 2
    assert "lr_scaling must be one of" in result.output and "$.workload.lr_scaling" in result.output
    path = job(tmp_path, write_trainer(tmp_path), workload='entry_point = "x"')
    result = run_cli(registry, "validate", str(path))
    assert "unknown key 'entry_point'" in result.output


def test_how_the_job_runs_is_not_what_it_learned(tmp_path, registry, write_trainer):
    # The store serves the job again when only the ranks' timeout, the search path or seeding
    # change; a different learning-rate rule is another problem, and it is refused.
    path = job(tmp_path, write_trainer(tmp_path), recurrences=1)
    assert run_cli(registry, "run", str(path), "--set", "job.beta_knob=inf").exit_code == 0
    result = run_cli(
        registry,
        "run",
        str(path),
        "--set",
        "job.beta_knob=inf",
        "--set",
        "workload.timeout_s=30",
        "--set",
        'workload.python_path=[".", "lib"]',
        "--set",
        "workload.seed_each_try=false",
    )
    assert result.exit_code == 0, result.output
    result = run_cli(registry, "run", str(path), "--set", "job.beta_knob=inf", "--set", 'workload.lr_scaling="none"')
    assert result.exit_code == 2 and "workload.lr_scaling" in result.output and "--fresh" in result.output

"""examples/torch_recurring runs as written (shrunk: two recurrences, small data, an easy target): it shows
the epochs of each try as they end, and writes the trace jobs' figures from its own tries."""

from __future__ import annotations

from zeus_test_helpers import run_cli

from zeus_core.engine.registry import load as load_plugins
from zeus_core.engine.stores.sqlite import Store


def test_example_job_trains_and_prints_the_comparison(repo_root, tmp_path):
    job = repo_root / "examples" / "torch_recurring" / "job.toml"
    reg = load_plugins()
    assert run_cli(reg, "validate", str(job)).exit_code == 0
    result = run_cli(
        reg,
        "run",
        str(job),
        "--output",
        str(tmp_path / "out"),
        "--set",
        f"job.store={tmp_path / 'state.sqlite'}",
        "--set",
        "job.recurrences=2",
        "--set",
        "job.target_metric=0.5",
        "--set",
        "workload.args.train_samples=512",
        "--set",
        "workload.args.val_samples=256",
        "--set",
        "workload.args.width=32",
        "--set",
        "workload.args.lr=0.003",
    )
    assert result.exit_code == 0, result.output
    tries = Store(tmp_path / "state.sqlite").tries()
    assert {t.recurrence for t in tries} == {1, 2} and tries[-1].reached
    assert tries[0].batch_size == 16  # the policy starts from the user's batch size
    assert all(t.energy_j > 0 for t in tries if t.epochs)  # cpu-estimate measured the training
    assert "against fixed batch sizes" in result.output and "best fixed" in result.output
    assert (tmp_path / "out" / "summary.json").exists()
    # Not a terminal: a line per finished epoch (its steps: 512 samples / 16), before its recurrence's line.
    lines = result.output.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("  recurrence 1, try 1, batch 16: epoch 1: 32 steps, "))
    assert "J" in lines[first] and "metric " in lines[first] and "(target 0.5)" in lines[first]
    epochs = [line for line in lines if line.startswith("  recurrence 1, try 1, batch 16: epoch ")]
    assert len(epochs) == tries[0].epochs
    assert first < next(i for i, line in enumerate(lines) if line.startswith("recurrence 1: "))
    for png in ("cost_per_recurrence.png", "pareto.png"):
        assert (tmp_path / "out" / png).read_bytes()[:4] == b"\x89PNG"

"""Data-parallel jobs: ``job.processes = 2`` on CPU with gloo."""

from __future__ import annotations

import csv
import json

import pytest
from zeus_test_helpers import run_cli, write_job

from zeus_core.engine.stores.sqlite import Store

JOB = """
[job]
name = "ddp"
recurrences = {recurrences}
target_metric = 0.9
max_epochs = 8
store = "state.sqlite"
processes = 2
beta_knob = {beta}

[workload]
plugin = "torch"
entry = "{module}:train"
default_batch_size = 16
timeout_s = 60

[workload.args]
out = "{out}"
{args}

[device]
plugin = "wall"
log = "{log}"

[batch_size]
plugin = "fixed"
default = 32

[power]
plugin = "fixed"
limit_w = 200
"""


def ddp_job(tmp_path, module, recurrences=2, args="", beta="inf"):
    # beta = inf by default: real wall time on a shared machine varies, and a
    # slow second recurrence must not be stopped early where a test expects it to reach.
    return write_job(
        tmp_path / "job.toml",
        JOB.format(
            recurrences=recurrences,
            module=module,
            out=f"{tmp_path}/out-{{rank}}.jsonl",
            beta=beta,
            log=f"{tmp_path}/device-{{rank}}.jsonl",
            args=args,
        ),
    )


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_two_ranks_share_decisions_and_sum_energy(tmp_path, registry, write_trainer):
    path = ddp_job(tmp_path, write_trainer(tmp_path))
    result = run_cli(registry, "run", str(path))
    assert result.exit_code == 0, result.output
    tries = Store(tmp_path / "state.sqlite").tries()
    assert [t.recurrence for t in tries] == [1, 2] and all(t.reached for t in tries)
    r0, r1 = lines(tmp_path / "out-0.jsonl"), lines(tmp_path / "out-1.jsonl")
    for a, b, t in zip(r0, r1, tries):
        # Same decisions on every rank: global batch, epochs, outcome, metric (averaged).
        assert (a["batch_size"], a["epochs"], a["reached"], a["metric"]) == (b["batch_size"], b["epochs"], b["reached"], b["metric"])
        assert a["local_batch_size"] == b["local_batch_size"] == 16 and a["world_size"] == 2
        # Energy summed over ranks, time the slowest rank's, epoch by epoch.
        assert t.energy_j == pytest.approx(sum(e for _, e in a["local"]) + sum(e for _, e in b["local"]), rel=1e-9)
        assert t.time_s == pytest.approx(sum(max(x[0], y[0]) for x, y in zip(a["local"], b["local"])), rel=1e-9)
        # Rank 1 draws twice rank 0's power on the test device: its energy is really in the sum.
        assert sum(e for _, e in b["local"]) > sum(e for _, e in a["local"])
    # The power policy's limit reached rank 1, and both devices were put back.
    dev1 = lines(tmp_path / "device-1.jsonl")
    assert {"rank": 1, "event": "set", "w": 200.0} in dev1 and dev1[-1]["event"] == "restore"
    assert lines(tmp_path / "device-0.jsonl")[-1] == {"rank": 0, "event": "restore", "w": 300.0}


def test_a_try_over_two_ranks_is_charged_every_ranks_share_of_the_gpus_they_shared(tmp_path, registry, write_trainer):
    """Each rank's process is 3/4 of its GPU's work beside a stranger; rank 1 draws twice rank 0's power, so
    only every rank's process together makes 3/4 of the try's energy (rank 0's alone would be 1/4 of it)."""
    path = ddp_job(tmp_path, write_trainer(tmp_path), recurrences=1)
    path.write_text(path.read_text().replace('plugin = "wall"', 'plugin = "wall-shared"'))
    result = run_cli(registry, "run", str(path), "--output", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    with open(tmp_path / "out" / "recurrences.csv") as f:
        (row,) = list(csv.DictReader(f))
    assert float(row["energy_attributed_j"]) == pytest.approx(0.75 * float(row["energy_j"]), rel=1e-6)
    assert row["energy_attribution"] == "sm"


def failed_run(tmp_path, registry, module, **job) -> str:
    """``zeus run`` of a job that must fail (exit status 1) and leave every rank's device put back;
    its output on one line."""
    result = run_cli(registry, "run", str(ddp_job(tmp_path, module, **job)))
    assert result.exit_code == 1, result.output
    for rank in (0, 1):
        assert lines(tmp_path / f"device-{rank}.jsonl")[-1]["event"] == "restore"
    return " ".join(result.output.split())


def test_a_rank_that_raises_fails_the_job_and_restores_devices(tmp_path, registry, write_trainer):
    out = failed_run(tmp_path, registry, write_trainer(tmp_path), recurrences=3, args="fail_recurrence = 2\nfail_rank = 1")
    assert "rank 1 of 2 failed: ZeroDivisionError: training blew up on purpose" in out
    assert [(t.recurrence, t.reached) for t in Store(tmp_path / "state.sqlite").tries()] == [(1, True)]


def test_a_killed_rank_fails_the_job_clearly(tmp_path, registry, write_trainer):
    path = ddp_job(tmp_path, write_trainer(tmp_path), recurrences=2, args="fail_recurrence = 1\nfail_rank = 1\nhard = true")
    result = run_cli(registry, "run", str(path))
    assert result.exit_code == 1
    out = " ".join(result.output.split())
    assert "rank 1 of 2 (pid" in out and "exited with code 7" in out
    # The killed rank could not restore its device; the journal did, from rank 0.
    assert lines(tmp_path / "device-1.jsonl")[-1]["event"] == "journal-restore"
    assert lines(tmp_path / "device-0.jsonl")[-1]["event"] == "restore"


def test_early_stop_ends_every_rank_and_records_not_reached(tmp_path, registry, write_trainer):
    # Recurrence 1 reaches the target; from recurrence 2 on the metric stalls, so each try
    # stops once its cost would pass beta x the first recurrence's (long before max_epochs).
    # The costs are real time: recurrence 1's three epochs, slowed by a loaded machine, raise
    # the bound; 400 epochs leave room for a first recurrence 60 times slower than the stalled ones.
    path = ddp_job(tmp_path, write_trainer(tmp_path), recurrences=2, beta="2.0", args="stall_from = 2")
    result = run_cli(registry, "run", str(path), "--set", "job.max_tries=2", "--set", "job.max_epochs=400")
    assert result.exit_code == 1 and "did not reach the target metric in 2 tries" in result.output
    tries = Store(tmp_path / "state.sqlite").tries()
    assert (tries[0].recurrence, tries[0].reached) == (1, True)
    assert [(t.recurrence, t.reached, t.stopped) for t in tries[1:]] == [(2, False, "early-stop")] * 2
    r1 = lines(tmp_path / "out-1.jsonl")[1:]
    assert [(r["reached"], r["stopped"], len(r["epochs"])) for r in r1] == [(False, "early-stop", t.epochs) for t in tries[1:]]


def test_fresh_with_processes_2_starts_over_a_store_that_learned_one_process(tmp_path, registry, write_trainer):
    """#27 case 5: the store learned the job with job.processes = 1; `zeus run --fresh --set job.processes=2`
    starts it over on both ranks (the spawned rank opens no store, so it cannot refuse it), and without
    --fresh every rank stops with the identity refusal, exit 2."""
    path = ddp_job(tmp_path, write_trainer(tmp_path), recurrences=1)
    first = run_cli(registry, "run", str(path), "--set", "job.processes=1")
    assert first.exit_code == 0, first.output
    refused = run_cli(registry, "run", str(path))
    assert refused.exit_code == 2 and "job.processes" in refused.output and "--fresh" in refused.output
    fresh = run_cli(registry, "run", str(path), "--fresh")
    assert fresh.exit_code == 0, fresh.output
    assert "learned a different job" not in fresh.output
    with Store(tmp_path / "state.sqlite") as s:
        assert s.identity()["job"]["processes"] == 2 and [t.recurrence for t in s.tries()] == [1]
    assert lines(tmp_path / "out-1.jsonl")  # rank 1 trained


def test_a_rank_whose_calls_diverge_fails_the_job_naming_both_ops(tmp_path, registry, write_trainer):
    # Rank 1 reports its metric twice an epoch: where it expects rank 0's next "metric",
    # rank 0 has gone on to end the epoch.
    out = failed_run(tmp_path, registry, write_trainer(tmp_path), recurrences=1, args="diverge_rank = 1")
    assert "rank 1 of 2 failed: ProtocolError: rank 1 expected metric from rank 0 but got epoch_end" in out
    assert "the ranks' calls diverged" in out

"""``run_job`` from the user's own script, and the comparison against fixed batch sizes."""

from __future__ import annotations

import pytest
from zeus_test_helpers import write_job

from zeus_core import TryRecord
from zeus_plugins_torch.api import run_job
from zeus_plugins_torch.report import compare

SEEN = []


def my_train(batch_size, zeus):
    """The user's own loop: no [workload] table in the job, the function is handed over directly."""
    for epoch in zeus.epochs():
        sum(range(20000))  # some work for the device to measure
        zeus.report_metric(epoch / 2)
    SEEN.append((zeus.recurrence, batch_size, zeus.reached))


def _cpu_job(tmp_path, recurrences: int):
    """A job file for the user's own function: a fixed batch size of 8 on the CPU, to a metric of 1.0
    (no early stop: a slow epoch under load must not end a recurrence), its store beside it."""
    return write_job(
        tmp_path / "job.toml",
        f"""
        [job]
        recurrences = {recurrences}
        target_metric = 1.0
        beta_knob = inf
        store = "s.sqlite"
        [device]
        plugin = "cpu-estimate"
        scope = "process"
        [batch_size]
        plugin = "fixed"
        default = 8
    """,
    )


def test_run_job_drives_the_users_own_function(tmp_path):
    job = _cpu_job(tmp_path, recurrences=2)
    SEEN.clear()
    summary = run_job(job, my_train)
    assert SEEN == [(1, 8, True), (2, 8, True)]
    assert summary.recurrences == 2 and [r.epochs for r in summary.records] == [2, 2]
    summary = run_job(job, my_train, overrides=["job.recurrences=1"])  # continues the stored history
    assert summary.recurrences == 3 and SEEN[-1] == (3, 8, True)


def test_run_job_writes_the_outputs_zeus_run_writes_and_fresh_starts_over_as_zeus_run_fresh(tmp_path):
    """One owner of a job's end: run_job's output folder is what ``zeus run --output`` writes (its provenance
    naming run_job), and ``fresh`` has zeus run's one meaning: the job starts over in its first write."""
    import json

    job = _cpu_job(tmp_path, recurrences=2)
    out = tmp_path / "out"
    run_job(job, my_train, output=out)
    rows = (out / "recurrences.csv").read_text().splitlines()
    assert rows[0].startswith("recurrence,try,batch_size,power_limit") and len(rows) == 3
    summary = json.loads((out / "summary.json").read_text())
    assert summary["provenance"]["command"] == "zeus_plugins_torch.run_job"
    recorded = set(summary["provenance"]["outputs"])
    assert {"recurrences.csv", "summary.json"} <= recorded
    assert "cost_per_recurrence.png" in recorded and (out / "cost_per_recurrence.png").exists()  # the workload's figure

    summary = run_job(job, my_train, overrides=["job.recurrences=1"], fresh=True, output=out)
    assert summary.recurrences == 1 and [r.recurrence for r in summary.records] == [1]  # started over
    assert len((out / "recurrences.csv").read_text().splitlines()) == 2


def rec(recurrence, bs, cost, reached=True, try_index=1):
    return TryRecord(recurrence, try_index, bs, None, 3, cost / 10, cost / 2, cost, reached)


def test_comparison_uses_the_reached_tries_per_batch_size():
    records = [rec(1, 32, 100.0), rec(2, 64, 80.0, reached=False), rec(2, 16, 60.0, try_index=2), rec(3, 16, 40.0), rec(4, 16, 50.0)]
    c = compare(records, default_batch_size=32)
    assert c.recurrences == 4
    assert c.method["cost"] == pytest.approx(330.0)
    assert (c.default.batch_size, c.default.tries, c.default.cost) == (32, 1, 100.0)
    assert (c.best.batch_size, c.best.tries, c.best.cost) == (16, 3, pytest.approx(50.0))
    out = c.to_json()
    assert out["vs_default"]["cost_saved"] == pytest.approx(1 - 330.0 / 400.0)
    assert out["vs_best_fixed"]["regret"] == pytest.approx(330.0 / 200.0 - 1)
    assert compare(records, default_batch_size=128).default is None  # never reached: no default row


INTERRUPT_AT: list[int] = []  # the recurrence in which the user presses Ctrl-C (none: run through)


def stoppable_train(batch_size, zeus):
    """The user's loop; Ctrl-C pressed during recurrence INTERRUPT_AT arrives in it as a KeyboardInterrupt."""
    for epoch in zeus.epochs():
        if zeus.recurrence in INTERRUPT_AT:
            raise KeyboardInterrupt
        zeus.report_metric(epoch / 2)


def test_ctrl_c_in_the_users_script_reaches_it_after_the_job_is_closed(tmp_path):
    """run_job hands Ctrl-C back to the script that called it (a KeyboardInterrupt, not a RunFailed nor a
    summary), after closing the job: its store is free and the next call continues the history."""
    job = _cpu_job(tmp_path, recurrences=3)
    out = tmp_path / "out"
    INTERRUPT_AT[:] = [2]
    with pytest.raises(KeyboardInterrupt):
        run_job(job, stoppable_train, output=out)
    assert not out.exists()  # no summary of a run the user stopped
    INTERRUPT_AT.clear()
    summary = run_job(job, stoppable_train, overrides=["job.recurrences=1"])
    reached = [r.recurrence for r in summary.records if r.reached]
    assert reached[0] == 1 and len(reached) == 2  # recurrence 1 kept; the next call ran one more to its end

"""``zeus run --fresh`` while other runners of the job run, with real concurrent processes on a SQLite
store (the same on PostgreSQL: tests/zeus_plugins_postgres/test_postgres_fresh.py).

A result is stored only in the history that began its recurrence: ``--fresh`` refuses while live
runners hold open recurrences (naming them), or waits for them with ``--wait``; a runner whose
history was started over under it stops (exit 1) naming the clear, and writes nothing into the new
history; two ``--fresh`` runs started together leave one history that every store command reads.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from concurrent_runners import finish, killed_at_end, start_run, wait_until, zeus
from zeus_test_helpers import TOY_JOB, write_job

from zeus_core.engine.history import ledger
from zeus_core.engine.stores.sqlite import Store

STORE = Path(".zeus") / "toyjob.sqlite"
#: Recurrences of 3 s each (6 epochs of 0.5 s): long enough to act while one is open, even on a loaded machine
#: (a runner that starts late finds the others' recurrences still open).
SLOW = ("--set", "workload.sleep_s=0.5")


@pytest.fixture
def job(tmp_path) -> Path:
    return write_job(tmp_path / "job.toml", TOY_JOB)


def _open_recurrences(path: Path) -> dict:
    if not path.exists():
        return {}
    with Store(path) as s:
        return ledger(s).open


def _check_and_export(site, tmp_path) -> dict:
    """``zeus store check`` and ``zeus store export`` both read the store; the export's content."""
    r = zeus(site, tmp_path, "store", "check", str(tmp_path / STORE))
    assert r.returncode == 0, r.stderr
    r = zeus(site, tmp_path, "store", "export", str(tmp_path / STORE))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_fresh_refuses_while_a_live_runner_holds_an_open_recurrence_and_names_it(site, job, tmp_path):
    with killed_at_end([]) as procs:
        a = start_run(site, job, tmp_path, "--set", "job.recurrences=3", *SLOW)
        procs.append(a)
        wait_until(lambda: _open_recurrences(tmp_path / STORE), procs, "runner A began a recurrence")
        b = start_run(site, job, tmp_path, "--fresh", "--set", "job.recurrences=1")
        procs.append(b)
        code, _, err = finish(b)
        assert code == 2, err
        assert "--fresh would throw away the job's history while other runners of the job are in the middle of it" in err
        assert f"recurrence 1 (pid {a.pid} on " in err and "Nothing was changed" in err and "--wait" in err
        code, _, err = finish(a)
        assert code == 0, err
    data = _check_and_export(site, tmp_path)
    assert sorted({t["recurrence"] for t in data["tries"] if t["reached"]}) == [1, 2, 3]  # A's history, whole
    assert data["state"]["runner"]["next_recurrence"] == 4


def test_fresh_wait_starts_over_once_the_runners_ended_their_recurrences(site, job, tmp_path):
    with killed_at_end([]) as procs:
        # A runs (8 recurrences of seconds each) far longer than B takes to start: B finds it mid-job
        a = start_run(site, job, tmp_path, "--set", "job.recurrences=8", *SLOW)
        procs.append(a)
        wait_until(lambda: _open_recurrences(tmp_path / STORE), procs, "runner A began a recurrence")
        b = start_run(site, job, tmp_path, "--fresh", "--wait", "--set", "job.recurrences=1")
        procs.append(b)
        code_b, _, err_b = finish(b)
        code_a, _, err_a = finish(a)
    assert code_b == 0, err_b
    waited = " ".join(err_b.split())
    assert re.search(
        r"--fresh --wait: waiting for the job's other runners to end their recurrences \(recurrence \d+ \(pid "
        rf"{a.pid} ",
        waited,
    ), waited
    # A ended its run, or (B started over between two of its recurrences) stopped naming the clear
    assert code_a == 0 or (code_a == 1 and "history was cleared under this run by pid" in err_a), err_a
    data = _check_and_export(site, tmp_path)
    assert [t["recurrence"] for t in data["tries"]] == [1] and data["state"]["runner"]["next_recurrence"] == 2
    assert "runner:open" not in data["state"] or data["state"]["runner:open"] == {}


def test_a_runner_whose_history_was_cleared_under_it_stops_and_writes_nothing_into_the_new_one(site, job, tmp_path):
    """A clear that did not wait (a service's, an older zeus-core's --fresh): the runner's next step stops it."""
    with killed_at_end([]) as procs:
        a = start_run(site, job, tmp_path, "--set", "job.recurrences=3", *SLOW)
        procs.append(a)
        wait_until(lambda: _open_recurrences(tmp_path / STORE), procs, "runner A began a recurrence")
        with Store(tmp_path / STORE) as s:
            s.clear()
        code, _, err = finish(a)
    assert code == 1, err
    assert "the job's history was cleared under this run" in err and "writes nothing into the new history" in err
    assert "Traceback" not in err
    data = _check_and_export(site, tmp_path)
    assert data["tries"] == [] and data["state"] == {}


def test_two_fresh_runs_started_together_keep_one_whole_history(site, job, tmp_path):
    with killed_at_end([]) as procs:
        procs += [start_run(site, job, tmp_path, "--fresh", "--set", "job.recurrences=3", *SLOW) for _ in range(2)]
        results = [finish(p) for p in procs]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 2], [err for _, _, err in results]
    winner = next(p for p, (code, _, _) in zip(procs, results) if code == 0)
    loser_err = next(err for code, _, err in results if code == 2)
    assert f"(pid {winner.pid} on " in loser_err
    data = _check_and_export(site, tmp_path)
    assert sorted({t["recurrence"] for t in data["tries"] if t["reached"]}) == [1, 2, 3]
    assert data["state"]["runner"]["next_recurrence"] == 4


def test_two_fresh_wait_runs_started_together_each_run_whole(site, job, tmp_path):
    with killed_at_end([]) as procs:
        procs += [start_run(site, job, tmp_path, "--fresh", "--wait", "--set", "job.recurrences=1", *SLOW) for _ in range(2)]
        results = [finish(p) for p in procs]
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]
    data = _check_and_export(site, tmp_path)
    assert [t["recurrence"] for t in data["tries"]] == [1] and data["state"]["runner"]["next_recurrence"] == 2


def test_wait_without_fresh_is_bad_input_before_anything_runs(toy_plugin, job, tmp_path):
    from zeus_test_helpers import run_cli, toy_registry

    r = run_cli(toy_registry(toy_plugin), "run", str(job), "--wait")
    assert r.exit_code == 2 and "--wait waits to start the job over: it goes with --fresh" in r.output
    assert not (tmp_path / STORE).exists()  # nothing ran, no store made

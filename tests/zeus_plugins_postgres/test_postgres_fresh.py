"""``zeus run --fresh`` while other runners of the job run, on a real PostgreSQL server: as on SQLite
(tests/core/test_fresh_concurrency.py), the history is one whole history that every store command reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from concurrent_runners import finish, killed_at_end, start_run, wait_until, zeus
from zeus_test_helpers import TOY_JOB, write_job

from zeus_core.engine.history import ledger
from zeus_core.engine.registry import get_registry
from zeus_core.engine.stores.locations import open_store

SLOW = ("--set", "workload.sleep_s=0.5")


@pytest.fixture
def job(tmp_path) -> Path:
    return write_job(tmp_path / "job.toml", TOY_JOB)


def _open_recurrences(url: str) -> dict:
    with open_store(url, get_registry(), job="toyjob") as s:
        return ledger(s).open


def _check_and_export(site, tmp_path, url: str) -> dict:
    r = zeus(site, tmp_path, "store", "check", url, "--job", "toyjob")
    assert r.returncode == 0, r.stderr
    r = zeus(site, tmp_path, "store", "export", url, "--job", "toyjob")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_fresh_refuses_while_a_live_runner_holds_an_open_recurrence(site, job, tmp_path, pg_url):
    store = ("--set", f'job.store="{pg_url}"')
    with killed_at_end([]) as procs:
        a = start_run(site, job, tmp_path, *store, "--set", "job.recurrences=3", *SLOW)
        procs.append(a)
        wait_until(lambda: _open_recurrences(pg_url), procs, "runner A began a recurrence")
        b = start_run(site, job, tmp_path, *store, "--fresh", "--set", "job.recurrences=1")
        procs.append(b)
        code, _, err = finish(b)
        assert code == 2, err
        assert f"recurrence 1 (pid {a.pid} on " in err and "Nothing was changed" in err and "--wait" in err
        code, _, err = finish(a)
        assert code == 0, err
    data = _check_and_export(site, tmp_path, pg_url)
    assert sorted({t["recurrence"] for t in data["tries"] if t["reached"]}) == [1, 2, 3]


def test_a_runner_whose_history_was_cleared_under_it_stops(site, job, tmp_path, pg_url):
    store = ("--set", f'job.store="{pg_url}"')
    with killed_at_end([]) as procs:
        a = start_run(site, job, tmp_path, *store, "--set", "job.recurrences=3", *SLOW)
        procs.append(a)
        wait_until(lambda: _open_recurrences(pg_url), procs, "runner A began a recurrence")
        with open_store(pg_url, get_registry(), job="toyjob") as s:
            s.clear()
        code, _, err = finish(a)
    assert code == 1, err
    assert "the job's history was cleared under this run" in err and "Traceback" not in err
    data = _check_and_export(site, tmp_path, pg_url)
    assert data["tries"] == [] and data["state"] == {}


def test_two_fresh_runs_started_together_keep_one_whole_history(site, job, tmp_path, pg_url):
    store = ("--set", f'job.store="{pg_url}"')
    with killed_at_end([]) as procs:
        procs += [start_run(site, job, tmp_path, *store, "--fresh", "--set", "job.recurrences=3", *SLOW) for _ in range(2)]
        results = [finish(p) for p in procs]
    assert sorted(code for code, _, _ in results) == [0, 2], [err for _, _, err in results]
    winner = next(p for p, (code, _, _) in zip(procs, results) if code == 0)
    assert f"(pid {winner.pid} on " in next(err for code, _, err in results if code == 2)
    data = _check_and_export(site, tmp_path, pg_url)
    assert sorted({t["recurrence"] for t in data["tries"] if t["reached"]}) == [1, 2, 3]


def test_fresh_wait_starts_over_once_the_runners_ended_their_recurrences(site, job, tmp_path, pg_url):
    store = ("--set", f'job.store="{pg_url}"')
    with killed_at_end([]) as procs:
        a = start_run(site, job, tmp_path, *store, "--set", "job.recurrences=3", *SLOW)
        procs.append(a)
        wait_until(lambda: _open_recurrences(pg_url), procs, "runner A began a recurrence")
        b = start_run(site, job, tmp_path, *store, "--fresh", "--wait", "--set", "job.recurrences=1")
        procs.append(b)
        code_b, _, err_b = finish(b)
        code_a, _, err_a = finish(a)
    assert code_b == 0 and "waiting for the job's other runners" in err_b, err_b
    assert code_a == 0 or (code_a == 1 and "history was cleared under this run by pid" in err_a), err_a
    data = _check_and_export(site, tmp_path, pg_url)
    assert [t["recurrence"] for t in data["tries"]] == [1]

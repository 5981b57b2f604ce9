"""Jobs through ``zeus serve``: the same choices as ``zeus run``, 16 concurrent clients, faults.

Every test starts a real ``zeus serve`` process on loopback (and, where the
issue asks for it, a real PostgreSQL server behind it); clients are real
``zeus run`` processes or the client store used by a script.
"""

from __future__ import annotations

import json
import math
import time

import httpx
import pytest
from cluster_helpers import check_history, run_job
from pg_server import PASSWORD
from serve_helpers import Serve

from zeus_core import TryRecord
from zeus_core.engine.assembly import build_history
from zeus_core.engine.history import History
from zeus_core.engine.registry import get_registry
from zeus_core.engine.remote import HistorySetup
from zeus_core.engine.stores.locations import open_store

TOKEN = "serve-test-token-0123456789"


def _wait_for(predicate, timeout: float = 180, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _taken(url: str, job: str = "zeus-cifar100") -> int:
    try:
        r = httpx.get(f"{url}/v1/jobs/{job}", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
        return r.json()["next_recurrence"] - 1 if r.status_code == 200 else 0
    except httpx.HTTPError:
        return 0


def _env(monkeypatch=None) -> dict:
    import os

    return {**os.environ, "ZEUS_SERVE_TOKEN": TOKEN}


def test_a_job_through_the_service_makes_the_same_choices_as_zeus_run(tmp_path):
    local = run_job(str(tmp_path / "local.sqlite"), 8, tmp_path, "--output", str(tmp_path / "local"))
    assert local.wait(300) == 0, local.stderr.read()
    with Serve(str(tmp_path / "served"), token=TOKEN) as svc:
        served = run_job(svc.url, 8, tmp_path, "--output", str(tmp_path / "served-out"), env=_env())
        out, err = served.communicate(timeout=300)
        assert served.returncode == 0, err
    assert (tmp_path / "local" / "recurrences.csv").read_text() == (tmp_path / "served-out" / "recurrences.csv").read_text()
    a = json.loads((tmp_path / "local" / "summary.json").read_text())
    b = json.loads((tmp_path / "served-out" / "summary.json").read_text())
    pa, pb = a.pop("provenance"), b.pop("provenance")  # what produced each: the same code, at other times
    since_a, since_b = a["covers"].pop("since"), b["covers"].pop("since")  # when each history began
    assert since_a <= since_b
    assert a == b  # totals, knobs, and what the policies report (their state came back from the service)
    assert pa["versions"] == pb["versions"] and pa["ended"] <= pb["started"]
    # The service kept the job in its own SQLite file, as zeus run keeps it: the same trust rules apply.
    with open_store(str(tmp_path / "served" / "zeus-cifar100.sqlite"), get_registry()) as s:
        assert len(s.tries()) == a["tries"] and s.identity() is not None


def test_16_clients_x_25_recurrences_through_the_service_lose_nothing(pg_url, tmp_path):
    with Serve(pg_url, token=TOKEN) as svc:
        procs = [run_job(svc.url, 25, tmp_path, env=_env()) for _ in range(16)]
        for p in procs:
            out, err = p.communicate(timeout=900)
            assert p.returncode == 0, err[-2000:]
        log = svc.log.read_text()
    assert "Traceback" not in log and PASSWORD not in log and TOKEN not in log
    with open_store(pg_url, get_registry(), job="zeus-cifar100") as store:
        tries = check_history(store)
        assert store.get("runner")["next_recurrence"] == 401
    assert sorted({t.recurrence for t in tries}) == list(range(1, 401))


def test_the_service_killed_and_restarted_loses_and_doubles_nothing(pg_url, tmp_path):
    svc = Serve(pg_url, token=TOKEN).start()
    try:
        job = run_job(svc.url + "?retry_s=120", 30, tmp_path, env=_env())
        _wait_for(lambda: _taken(svc.url) >= 8, what="eight recurrences")
        svc.kill()  # SIGKILL: answers in flight are lost, transactions the database had not committed roll back
        time.sleep(1.0)
        svc.start()  # the same port; sessions are gone, the client registers again and retries
        _wait_for(lambda: _taken(svc.url) >= 18, what="more recurrences")
        svc.kill()
        svc.start()
        out, err = job.communicate(timeout=600)
        assert job.returncode == 0, err[-3000:]
    finally:
        svc.stop()
    with open_store(pg_url, get_registry(), job="zeus-cifar100") as store:
        tries = check_history(store)
        assert store.get("runner")["next_recurrence"] == 31
    assert sorted({t.recurrence for t in tries}) == list(range(1, 31))


def test_a_client_killed_mid_request_leaves_the_job_whole(tmp_path):
    with Serve(str(tmp_path / "served"), token=TOKEN, args=("--lease-s", "1")) as svc:
        procs = [run_job(svc.url, 12, tmp_path, env=_env()) for _ in range(3)]
        _wait_for(lambda: _taken(svc.url) >= 6, what="six recurrences")
        procs[0].kill()  # SIGKILL, whatever it was sending
        for p in procs[1:]:
            out, err = p.communicate(timeout=600)
            assert p.returncode == 0, err[-3000:]
        procs[0].communicate()
        later = run_job(svc.url, 2, tmp_path, env=_env())  # the job goes on
        out, err = later.communicate(timeout=300)
        assert later.returncode == 0, err[-3000:]
        assert "Traceback" not in svc.log.read_text()
    with open_store(str(tmp_path / "served" / "zeus-cifar100.sqlite"), get_registry()) as store:
        check_history(store, unfinished=1)


def test_another_setup_is_refused_through_the_service_and_fresh_starts_over(tmp_path):
    with Serve(str(tmp_path / "served"), token=TOKEN) as svc:
        first = run_job(svc.url, 2, tmp_path, env=_env())
        assert first.wait(300) == 0
        other = run_job(svc.url, 1, tmp_path, "--set", "job.eta_knob=0.9", env=_env())
        out, err = other.communicate(timeout=300)
        assert other.returncode == 2 and "learned a different job" in err and "job.eta_knob" in err and "--fresh" in err
        fresh = run_job(svc.url, 1, tmp_path, "--set", "job.eta_knob=0.9", "--fresh", env=_env())
        out, err = fresh.communicate(timeout=300)
        assert fresh.returncode == 0, err
        info = httpx.get(f"{svc.url}/v1/jobs/zeus-cifar100", headers={"Authorization": f"Bearer {TOKEN}"}).json()
        assert info["tries"] >= 1 and info["next_recurrence"] == 2 and info["identity"]["job"]["eta_knob"] == 0.9


def test_without_the_token_a_run_is_refused_clearly_and_a_service_that_is_gone_exits_1(tmp_path):
    with Serve(str(tmp_path / "served"), token=TOKEN) as svc:
        url = svc.url
        import os

        env = {k: v for k, v in os.environ.items() if k != "ZEUS_SERVE_TOKEN"}
        wrong = run_job(url.replace("http://", "http://:not-the-token-000000@"), 1, tmp_path, env=env)
        out, err = wrong.communicate(timeout=300)
        assert wrong.returncode == 2 and "refused the token" in err and "ZEUS_SERVE_TOKEN" in err
        assert "not-the-token" not in out + err
    gone = run_job(url + "?retry_s=1", 1, tmp_path, env=_env())
    out, err = gone.communicate(timeout=300)
    assert gone.returncode == 1 and "zeus serve did not answer" in err


def _setup(job_name: str = "script") -> HistorySetup:
    from zeus_core import JobOptions

    job = JobOptions(name=job_name, eta_knob=0.5, beta_knob=2.0, target_metric=0.5, max_epochs=10)
    identity = {
        "job": {"eta_knob": 0.5, "beta_knob": 2.0, "target_metric": 0.5, "higher_is_better": True, "max_epochs": 10, "processes": 1},
        "batch_size": {"plugin": "fixed", "default": 32},
    }
    from zeus_plugins_baseline.policies import FixedBatchSize

    return HistorySetup.of_parts(job, identity, "fixed", FixedBatchSize.Options(default=32), max_power_w=300.0)


def test_a_script_drives_the_service_as_it_drives_local_trials(tmp_path, monkeypatch):
    """What a script-level optimizer (BatchSizeOptimizer) does: open the store by URL, ask it for its
    HistoryService, and loop begin_recurrence / next_try / record / history, as with local History."""
    setup = _setup()
    local = build_history(setup, open_store(str(tmp_path / "local.sqlite"), get_registry()), get_registry())
    assert isinstance(local, History)
    with Serve(str(tmp_path / "served"), token=TOKEN) as svc:
        monkeypatch.setenv("ZEUS_SERVE_TOKEN", TOKEN)
        store = open_store(svc.url, get_registry(), job="script")
        remote = store.history_service(setup)
        for trials in (local, remote):
            for _ in range(3):
                rec = trials.begin_recurrence()
                trial = trials.next_try(rec, 1)
                assert trial.batch_size == 32 and (math.isinf(trial.cost_bound) or trial.cost_bound > 0)
                record = TryRecord(rec, 1, trial.batch_size, None, 2, 10.0, 2000.0, 2500.0 + rec, True)
                trials.record(trial, record, recurrence_cost=record.cost)
        assert remote.history() == local.history() and len(remote.history()) == 3
        remote_runner, local_runner = dict(store.get("runner")), dict(local.store.get("runner"))
        # each history's start (the service's and this process's clocks, moments apart)
        assert abs(remote_runner.pop("first_began") - local_runner.pop("first_began")) < 60
        assert remote_runner == local_runner == {"next_recurrence": 4, "min_cost": 2501.0}
        store.close()


def test_a_batch_size_optimizer_with_a_service_url_keeps_its_history_there(tmp_path, monkeypatch):
    """BatchSizeOptimizer(store="http://...") asks the service for each trial, as zeus run does:
    the same choices as the same optimizer over a local store, and the history in the service."""
    from zeus_core import BatchSizeOptimizer

    def drive(store: str) -> list[tuple[int, int, int]]:
        bso = BatchSizeOptimizer(
            job="script-bso", policy="mab", batch_sizes=[32, 64, 128], default=64, max_power_w=300.0, target_metric=1.0, store=store
        )
        seen = []
        for _ in range(6):
            t = bso.next()
            epochs = {32: 6, 64: 4, 128: 5}[t.batch_size]
            bso.report(t, energy_j=epochs * 200.0 * 64 / t.batch_size, time_s=epochs * 64 / t.batch_size, reached=True)
            seen.append((t.recurrence, t.try_index, t.batch_size))
        bso.close()
        return seen

    local = drive(str(tmp_path / "local.sqlite"))
    with Serve(str(tmp_path / "served"), token=TOKEN) as svc:
        monkeypatch.setenv("ZEUS_SERVE_TOKEN", TOKEN)
        remote = drive(svc.url)
        r = httpx.get(f"{svc.url}/v1/jobs/script-bso/history", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
        assert r.status_code == 200
    assert remote == local and [rec for rec, _, _ in remote] == [1, 2, 3, 4, 5, 6]
    assert len(r.json()["tries"]) == 6


def test_the_history_check_catches_a_try_stored_twice():
    """check_history (used by the kill and restart tests) must fail on a doubled try that did not reach."""
    from zeus_core import TryRecord

    def rec(r: int, i: int, reached: bool) -> TryRecord:
        return TryRecord(
            recurrence=r, try_index=i, batch_size=32, power_limit=300.0, epochs=3, time_s=1.0, energy_j=2.0, cost=1.5, reached=reached
        )

    class Store:
        def __init__(self, tries):
            self._tries = tries

        def tries(self):
            return self._tries

        def get(self, key):
            return {
                "runner": {"next_recurrence": 2},
                "policy:batch_size": {"history": [[32, 1.5]] * len(self._tries)},
                "policy:power": {"choices": {"32": {}}},
            }[key]

    check_history(Store([rec(1, 1, False), rec(1, 2, True)]))
    with pytest.raises(AssertionError):
        check_history(Store([rec(1, 1, False), rec(1, 1, False), rec(1, 2, True)]))

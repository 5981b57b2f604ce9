"""The serve fault run, bounded: 3 ``zeus run`` clients of one job through ``zeus serve`` over a real
PostgreSQL server, the service SIGKILLed and restarted twice and the database down for longer than
the service's lease once, while they run. Every client exits 0 and every recurrence begun is
recorded exactly once (``benchmarks/serve_faults.py`` is the full run: 8 clients x 20, 6 kills).

Also, one by one and without timing luck, what made clients exit before: a remote transaction
whose lease ran out (or whose service restarted) while it was open is decided again.
"""

from __future__ import annotations

import time

import pytest
from serve_faults import fault_run
from serve_helpers import Serve

from zeus_core.backends import TransactionConflict, transact
from zeus_core.engine.registry import get_registry
from zeus_core.engine.stores.locations import open_store

TOKEN = "serve-faults-token-0123456789"


def test_clients_survive_service_kills_and_a_database_outage_longer_than_the_lease(own_pg_server, tmp_path):
    report = fault_run(own_pg_server, tmp_path, clients=3, recurrences=5, kills=2, outages=1, outage_s=2.5, lease_s=1.0)
    print("\n".join(report.lines()))
    assert len(report.faults) == 3, report.faults
    assert report.exits == [0, 0, 0], "\n---\n".join(report.errors)
    assert report.begun == report.recorded == 15 and report.abandoned == {} and report.open == {}
    assert report.doubled == [] and report.reached_twice == []
    assert "Traceback" not in report.service_log


@pytest.fixture
def served(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEUS_SERVE_TOKEN", TOKEN)
    with Serve(str(tmp_path / "served"), token=TOKEN, args=("--lease-s", "0.3")) as svc:
        yield svc


def _increment_with_a_rival(store, rival, key: str, attempts: list[int]):
    """A part's read-modify-write; in its first attempt, another client takes the state after this
    one's lease ran out and commits first."""

    def body(tx):
        attempts.append(1)
        value = tx.get(key, 0)
        if len(attempts) == 1:
            time.sleep(0.6)  # twice the lease, with no request

            def rival_body(rtx):
                rtx.set(key, rtx.get(key, 0) + 100)

            transact(rival, rival_body)
        tx.set(key, value + 1)
        return value + 1

    return transact(store, body)


def test_a_transaction_that_lost_its_lease_is_decided_again_on_what_was_committed(served):
    reg = get_registry()
    with open_store(served.url, reg, job="tx") as a, open_store(served.url, reg, job="tx") as b:
        attempts: list[int] = []
        got = _increment_with_a_rival(a, b, "workload:x", attempts)
        assert len(attempts) == 2 and got == 101  # decided again on the rival's 100, not on the 0 it first read
        assert a.get("workload:x") == 101


def test_a_transaction_open_when_the_service_restarted_is_decided_again(served):
    reg = get_registry()
    with open_store(served.url, reg, job="tx") as a:
        with pytest.raises(TransactionConflict, match="was not granted by this service"), a.transaction() as tx:
            tx.get("workload:x")
            served.kill()
            served.start()  # forgets every transaction it granted
            tx.set("workload:x", 1)
        calls: list[int] = []

        def body(tx):
            calls.append(1)
            if len(calls) == 1:
                tx.get("workload:x")
                served.kill()
                served.start()
            tx.set("workload:x", len(calls))

        transact(a, body)
        assert len(calls) == 2 and a.get("workload:x") == 2


def test_a_client_that_gives_up_on_a_gone_service_leaves_its_recurrence_to_the_next_run(tmp_path, monkeypatch):
    """?retry_s bounds the wait: the run exits 1 and cannot record its recurrence as abandoned (the service
    is gone); the job's next run on this machine finds its process gone and records it."""
    import os

    from cluster_helpers import run_job
    from serve_faults import _taken

    from zeus_core.engine.history import ledger

    env = {**os.environ, "ZEUS_SERVE_TOKEN": "serve-faults-token-0123456789"}
    svc = Serve(str(tmp_path / "served"), token="serve-faults-token-0123456789").start()
    try:
        job = run_job(svc.url + "?retry_s=2", 200, tmp_path, env=env)
        deadline = time.monotonic() + 120
        while _taken(svc.url) < 3:
            assert time.monotonic() < deadline and job.poll() is None
            time.sleep(0.05)
        svc.kill()
        out, err = job.communicate(timeout=120)
        assert job.returncode == 1 and "zeus serve did not answer for 2 s" in err, err[-2000:]
        svc.start()
        again = run_job(svc.url, 1, tmp_path, env=env)
        out2, err2 = again.communicate(timeout=300)
        assert again.returncode == 0, err2[-2000:]
    finally:
        svc.stop()
    with open_store(str(tmp_path / "served" / "zeus-cifar100.sqlite"), get_registry()) as store:
        account = ledger(store)
        tries = store.tries()
    unreached = set(range(1, account.begun + 1)) - {t.recurrence for t in tries if t.reached}
    assert account.open == {} and set(account.abandoned) == unreached
    assert all("ended without a result" in a["reason"] or a["reason"].startswith("StoreUnavailable") for a in account.abandoned.values())

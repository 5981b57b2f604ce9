"""The store: atomic commits, concurrent writers, a process killed mid-write."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3

import pytest

from zeus_core import TryRecord
from zeus_core import Store, StoreError


def _rec(rec: int, i: int = 1) -> TryRecord:
    return TryRecord(rec, i, 32, 200.0, 3, 10.0, 1000.0, 1500.0, True)


def _writer(path: str, n: int, who: int) -> None:
    store = Store(path)
    for k in range(n):
        with store.transaction() as tx:
            count = tx.get("counter", 0)
            tx.add_try(_rec(who * 1000 + k))
            tx.set("counter", count + 1)
    store.close()


def test_four_processes_writing_one_store_lose_nothing(tmp_path):
    path = str(tmp_path / "job.sqlite")
    Store(path).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, 60, who)) for who in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = Store(path)
    assert store.get("counter") == 240
    assert len(store.tries()) == 240
    assert len({r.recurrence for r in store.tries()}) == 240


def _open_fresh_at_once(path: str, go, n: int, who: int) -> None:
    go.wait(60)
    _writer(path, n, who)


def test_processes_creating_one_new_store_at_the_same_moment_all_succeed(tmp_path):
    # Two ranks journaling their first setting open the same *new* file together; switching
    # it to WAL then failed at once with "database is locked" in one of them.
    ctx = mp.get_context("spawn")
    for attempt in range(3):
        path = str(tmp_path / f"fresh{attempt}.sqlite")
        go = ctx.Barrier(6)  # every process ready before any opens the file
        procs = [ctx.Process(target=_open_fresh_at_once, args=(path, go, 5, who)) for who in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        assert [p.exitcode for p in procs] == [0] * 6
        with Store(path) as store:
            assert store.get("counter") == 30


def _die_mid_write(path: str) -> None:
    store = Store(path)
    with store.transaction() as tx:
        tx.add_try(_rec(99))
        tx.set("runner", {"next_recurrence": 100})
        os.kill(os.getpid(), signal.SIGKILL)


def test_process_killed_mid_write_leaves_last_commit_intact(tmp_path):
    path = str(tmp_path / "job.sqlite")
    with Store(path) as s, s.transaction() as tx:
        tx.add_try(_rec(1))
        tx.set("runner", {"next_recurrence": 2})
    p = mp.get_context("spawn").Process(target=_die_mid_write, args=(path,))
    p.start()
    p.join(60)
    assert p.exitcode == -signal.SIGKILL
    with Store(path) as s:
        assert [r.recurrence for r in s.tries()] == [1]
        assert s.get("runner") == {"next_recurrence": 2}
        with s.transaction() as tx:  # still writable: the lock died with the process
            tx.set("runner", {"next_recurrence": 3})
        assert s.get("runner") == {"next_recurrence": 3}


def test_exception_inside_transaction_rolls_back(tmp_path):
    with Store(tmp_path / "s.sqlite") as s:
        with pytest.raises(RuntimeError):
            with s.transaction() as tx:
                tx.set("x", 1)
                tx.add_try(_rec(1))
                raise RuntimeError("boom")
        assert s.get("x") is None and s.tries() == []


def test_nan_state_is_refused_not_stored(tmp_path):
    with Store(tmp_path / "s.sqlite") as s:
        with pytest.raises(ValueError):
            with s.transaction() as tx:
                tx.set("x", float("nan"))
        assert s.get("x") is None


def test_not_a_store_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_text("this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot use as a zeus store"):
        Store(bad)


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "s.sqlite"
    Store(path).close()
    c = sqlite3.connect(path)
    c.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    c.commit()
    c.close()
    with pytest.raises(StoreError, match="newer"):
        Store(path)


def test_a_store_locked_past_the_timeout_is_a_clear_error(tmp_path):
    path = tmp_path / "busy.sqlite"
    Store(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process mid-write, for longer than we wait
    try:
        with pytest.raises(StoreError, match=r"busy.sqlite: cannot use as a zeus store \(database is locked\)"):
            Store(path, timeout_s=0.3)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Store(path, timeout_s=0.3) as store:  # free again: opens
        assert store.get("nothing") is None

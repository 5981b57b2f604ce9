"""The store: atomic commits, concurrent writers, a process killed mid-write."""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import signal
import sqlite3
from pathlib import Path

import pytest

from zeus_core import TryRecord
from zeus_core.backends import StoreError
from zeus_core.catalog import install_command
from zeus_core.engine.stores.sqlite import APPLICATION_ID, SCHEMA_VERSION, Store


def _rec(rec: int, i: int = 1) -> TryRecord:
    return TryRecord(rec, i, 32, 200.0, 3, 10.0, 1000.0, 1500.0, True)


def _writer(path: str, n: int, who: int) -> None:
    store = Store(path)
    for k in range(n):
        with store.transaction() as tx:
            count = tx.get("counter", 0)
            tx.add_try(_rec(who * 1000 + k + 1))  # recurrences count from 1
            tx.set("counter", count + 1)
    store.close()


def test_four_processes_writing_one_store_lose_nothing(tmp_path):
    path = str(tmp_path / "job.sqlite")
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


def _sha(path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_a_store_is_created_at_its_first_write_not_when_opened(tmp_path):
    path = tmp_path / "sub" / "job.sqlite"
    with Store(path) as s:
        assert s.get("x") is None and s.tries() == [] and s.identity() is None
    assert not path.exists() and not path.parent.exists()
    with Store(path) as s, s.transaction() as tx:
        tx.set("x", 1)
    assert path.exists()


def test_not_a_store_file_is_refused_and_left_unchanged(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_text("this is not sqlite" * 100)
    before = _sha(bad)
    with pytest.raises(StoreError, match=r"bad.sqlite: is not a zeus store .*The file was not changed"):
        Store(bad)
    assert _sha(bad) == before


def test_a_foreign_sqlite_database_is_not_adopted(tmp_path):
    foreign = tmp_path / "foreign.sqlite"
    c = sqlite3.connect(foreign)
    c.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    c.execute("INSERT INTO users (name) VALUES ('ada')")
    c.commit()
    c.close()
    before = _sha(foreign)
    with pytest.raises(StoreError, match=r"is an SQLite database but not a zeus store \(it has tables users\)"):
        Store(foreign)
    assert _sha(foreign) == before
    c = sqlite3.connect(foreign)
    assert [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["users"]
    c.close()


def _write_one(path) -> None:
    with Store(path) as s, s.transaction() as tx:
        tx.set("x", 1)
        tx.add_try(_rec(1))


def test_a_store_is_marked_with_the_zeus_application_id_and_schema(tmp_path):
    path = tmp_path / "s.sqlite"
    _write_one(path)
    c = sqlite3.connect(path)
    assert c.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID == 0x7A657573
    assert c.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    c.close()


def test_newer_schema_is_refused_and_left_unchanged(tmp_path):
    path = tmp_path / "s.sqlite"
    _write_one(path)
    c = sqlite3.connect(path)
    c.execute("PRAGMA user_version = 99")
    c.commit()
    c.close()
    before = _sha(path)
    upgrade = re.escape(install_command("zeus-core", upgrade=True))
    with pytest.raises(StoreError, match=rf"newer zeus-core \(store schema 99; this one reads up to 2\).*{upgrade}"):
        Store(path)
    assert _sha(path) == before


def test_a_version_1_store_is_migrated_forward_keeping_its_data(tmp_path):
    # The layout zeus-core wrote before stores were marked: a `schema` row, no steady_cost column.
    path = tmp_path / "old.sqlite"
    c = sqlite3.connect(path)
    c.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE state (key TEXT PRIMARY KEY, value TEXT NOT NULL, version INTEGER NOT NULL DEFAULT 1);"
        "CREATE TABLE tries (id INTEGER PRIMARY KEY AUTOINCREMENT, recurrence INTEGER NOT NULL, try_index INTEGER NOT NULL,"
        " batch_size INTEGER NOT NULL, power_limit REAL, epochs INTEGER NOT NULL, time_s REAL NOT NULL, energy_j REAL NOT NULL,"
        " cost REAL NOT NULL, reached INTEGER NOT NULL, stopped TEXT, extra TEXT NOT NULL DEFAULT '{}', created REAL NOT NULL);"
        "CREATE TABLE journal (id INTEGER PRIMARY KEY AUTOINCREMENT, owner TEXT NOT NULL, key TEXT NOT NULL,"
        " original TEXT NOT NULL, pid INTEGER NOT NULL, created REAL NOT NULL);"
        "INSERT INTO meta VALUES ('schema', '1');"
        "INSERT INTO state (key, value) VALUES ('runner', '{\"next_recurrence\": 4, \"min_cost\": 10.5}');"
        "INSERT INTO tries (recurrence, try_index, batch_size, power_limit, epochs, time_s, energy_j, cost, reached, stopped,"
        " extra, created) VALUES (3, 1, 64, 250.0, 5, 1.0, 2.0, 3.0, 1, NULL, '{\"metric\": 0.9}', 0);"
    )
    c.commit()
    c.close()
    with Store(path) as s:
        assert s.info.version == 1
        assert s.get("runner") == {"next_recurrence": 4, "min_cost": 10.5}
        (r,) = s.tries()
        assert (r.recurrence, r.batch_size, r.extra, r.steady_cost) == (3, 64, {"metric": 0.9}, None)
    c = sqlite3.connect(path)
    assert c.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert c.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert "steady_cost" in [r[1] for r in c.execute("PRAGMA table_info(tries)")]
    c.close()


def test_a_damaged_store_is_refused_before_anything_is_written(tmp_path):
    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        for k in range(300):  # enough rows for the tries table to span many pages
            with s.transaction() as tx:
                tx.add_try(_rec(k))
    c = sqlite3.connect(path)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    root = c.execute("SELECT rootpage FROM sqlite_master WHERE name = 'tries'").fetchone()[0]
    page = c.execute("PRAGMA page_size").fetchone()[0]
    c.close()
    data = bytearray(path.read_bytes())
    data[(root - 1) * page : root * page] = b"\xff" * page  # one page of the tries table overwritten
    path.write_bytes(bytes(data))
    before = _sha(path)
    with pytest.raises(StoreError, match=r"is damaged \((PRAGMA integrity_check|SQLite): .*mv .*damaged.*--fresh.*zeus store import"):
        Store(path)
    assert _sha(path) == before


def test_a_store_path_that_is_a_folder_or_under_a_file_is_a_clear_error(tmp_path):
    with pytest.raises(StoreError, match=r"is a folder, not a store file; set job.store to a file path"):
        Store(tmp_path)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(StoreError, match=r"cannot create the store, .*afile is a file, not a folder"):
        Store(tmp_path / "afile" / "job.sqlite")


def test_a_store_locked_past_the_timeout_is_a_clear_error(tmp_path):
    path = tmp_path / "busy.sqlite"
    _write_one(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process mid-write, for longer than we wait
    try:
        with pytest.raises(StoreError, match=r"busy.sqlite: cannot use as a zeus store \(database is locked\)"):
            with Store(path, timeout_s=0.3) as s, s.transaction():
                pass
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Store(path, timeout_s=0.3) as store:  # free again: opens
        assert store.get("x") == 1

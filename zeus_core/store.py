"""State that must outlive a process: SQLite, one file per job, atomic commits.

Why SQLite: a single file, transactions that survive a killed process (a
half-written commit is rolled back on the next open), and safe concurrent
writers from several processes (``BEGIN IMMEDIATE`` plus a busy timeout, WAL
so that readers never block the writer).

The job store holds three things:

* ``state``: JSON values by key (policy state, the runner's counters);
* ``tries``: one row per try, the job's results;

and the machine-wide journal (:func:`journal`) holds device settings to restore.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from zeus_core.results import TryRecord

SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL, version INTEGER NOT NULL DEFAULT 1);
CREATE TABLE IF NOT EXISTS tries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    recurrence INTEGER NOT NULL,
    try_index INTEGER NOT NULL,
    batch_size INTEGER NOT NULL,
    power_limit REAL,
    epochs INTEGER NOT NULL,
    time_s REAL NOT NULL,
    energy_j REAL NOT NULL,
    cost REAL NOT NULL,
    reached INTEGER NOT NULL,
    stopped TEXT,
    extra TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    steady_cost REAL
);
CREATE TABLE IF NOT EXISTS journal (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    owner TEXT NOT NULL,
    key TEXT NOT NULL,
    original TEXT NOT NULL,
    pid INTEGER NOT NULL,
    created REAL NOT NULL
);
"""


class JournalEntry(NamedTuple):
    """A device setting changed by process ``pid`` at ``created`` (epoch seconds), to put back."""

    id: int
    owner: str
    key: str
    original: Any
    pid: int
    created: float


class StoreError(RuntimeError):
    """The store file cannot be used (not SQLite, newer schema, unwritable)."""


class Transaction:
    """Reads and writes inside one ``BEGIN IMMEDIATE`` transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._c = conn

    def get(self, key: str, default: Any = None) -> Any:
        row = self._c.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def set(self, key: str, value: Any) -> None:
        text = json.dumps(value, allow_nan=False)
        self._c.execute(
            "INSERT INTO state (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value, version = version + 1",
            (key, text),
        )

    def add_try(self, r: TryRecord) -> int:
        cur = self._c.execute(
            "INSERT INTO tries (recurrence, try_index, batch_size, power_limit, epochs, time_s, energy_j, cost,"
            " reached, stopped, extra, created, steady_cost) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                r.recurrence,
                r.try_index,
                int(r.batch_size),
                None if r.power_limit is None else float(r.power_limit),
                int(r.epochs),
                float(r.time_s),
                float(r.energy_j),
                float(r.cost),
                int(bool(r.reached)),
                r.stopped,
                json.dumps(r.extra, allow_nan=False),
                time.time(),
                None if r.steady_cost is None else float(r.steady_cost),
            ),
        )
        return int(cur.lastrowid)

    def add_journal(self, owner: str, key: str, original: Any) -> int:
        cur = self._c.execute(
            "INSERT INTO journal (owner, key, original, pid, created) VALUES (?,?,?,?,?)",
            (owner, key, json.dumps(original), os.getpid(), time.time()),
        )
        return int(cur.lastrowid)

    def remove_journal(self, entry_id: int) -> None:
        self._c.execute("DELETE FROM journal WHERE id = ?", (entry_id,))


def _is_busy(e: sqlite3.OperationalError) -> bool:
    text = str(e).lower()
    return "locked" in text or "busy" in text


class Store:
    """A SQLite store file. Safe to open from several processes at once."""

    def __init__(self, path: str | os.PathLike[str], timeout_s: float = 60.0) -> None:
        self.path = Path(path)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None)
                self._setup(timeout_s)
                return
            except sqlite3.OperationalError as e:
                # Switching a new file to WAL needs an exclusive lock, and SQLite answers
                # "database is locked" at once (no busy wait) when another process opens the
                # same new file at that moment, e.g. two ranks journaling their first setting.
                self._conn.close()
                if _is_busy(e) and time.monotonic() < deadline:
                    time.sleep(random.uniform(0.005, 0.05))
                    continue
                raise StoreError(f"{self.path}: cannot use as a zeus store ({e}); pass another `job.store` path") from e
            except (sqlite3.DatabaseError, OSError) as e:
                if getattr(self, "_conn", None) is not None:
                    self._conn.close()
                raise StoreError(f"{self.path}: cannot use as a zeus store ({e}); pass another `job.store` path") from e

    def _setup(self, timeout_s: float) -> None:
        self._conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
        if self._conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = NORMAL")
        with self.transaction():
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._conn.execute(statement)
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                self._conn.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: store schema {row[0]} is newer than this zeus-core understands "
                    f"({SCHEMA_VERSION}); upgrade zeus-core"
                )
            elif int(row[0]) < 2:
                self._conn.execute("ALTER TABLE tries ADD COLUMN steady_cost REAL")
                self._conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION),))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One atomic unit: everything inside commits together or not at all."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield Transaction(self._conn)
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        else:
            self._conn.execute("COMMIT")

    # -- reads outside a transaction (a consistent snapshot each) --

    def get(self, key: str, default: Any = None) -> Any:
        row = self._conn.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def tries(self) -> list[TryRecord]:
        rows = self._conn.execute(
            "SELECT recurrence, try_index, batch_size, power_limit, epochs, time_s, energy_j, cost, reached,"
            " stopped, extra, steady_cost FROM tries ORDER BY recurrence, try_index, id"
        ).fetchall()
        return [
            TryRecord(
                recurrence=r[0],
                try_index=r[1],
                batch_size=r[2],
                power_limit=r[3],
                epochs=r[4],
                time_s=r[5],
                energy_j=r[6],
                cost=r[7],
                reached=bool(r[8]),
                stopped=r[9],
                extra=json.loads(r[10]),
                steady_cost=r[11],
            )
            for r in rows
        ]

    def journal_entries(self) -> list[JournalEntry]:
        """Pending journal entries, oldest first."""
        rows = self._conn.execute("SELECT id, owner, key, original, pid, created FROM journal ORDER BY id").fetchall()
        return [JournalEntry(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5]) for r in rows]

    def clear(self) -> None:
        """Forget the job's state and results (``zeus run --fresh``)."""
        with self.transaction():
            self._conn.execute("DELETE FROM state")
            self._conn.execute("DELETE FROM tries")


def state_dir() -> Path:
    """Machine-wide zeus state folder: ``$ZEUS_STATE_DIR`` or ``~/.local/state/zeus``."""
    env = os.environ.get("ZEUS_STATE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "zeus"


def journal() -> Store:
    """The machine-wide journal of device settings to restore after a crash."""
    return Store(state_dir() / "journal.sqlite")

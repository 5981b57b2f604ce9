"""State that must outlive a process: SQLite, one file per job, atomic commits.

Why SQLite: a single file, transactions that survive a killed process (a
half-written commit is rolled back on the next open), and safe concurrent
writers from several processes (``BEGIN IMMEDIATE`` plus a busy timeout, WAL
so that readers never block the writer).

A job store holds:

* ``state``: JSON values by key (policy state, the runner's counters);
* ``tries``: one row per try, the job's results;
* ``meta``: the schema version and the job's *identity* (what it optimises,
  :mod:`zeus_core.identity`), so that a store never serves another setup;
* ``journal``: unused, kept in the layout because stores of every version have it
  (the device-settings journal is a file of its own: :mod:`zeus_core.journal`).

Trust on open. A store is marked as zeus's (SQLite ``application_id``) with
its schema version (``user_version``). Before anything is written, an
existing file is inspected read-only: a file that is not a zeus store, one
written by a newer zeus-core, or one whose pages or contents are damaged
(SQLite's ``integrity_check``, then every table and column of its schema, then
every row read and checked: :mod:`~zeus_core.engine.stores.checks`) is refused
with :class:`StoreError` naming the file and the fix, and is left byte-for-byte
as it was. Older zeus stores are migrated forward (:data:`MIGRATIONS`) in one
transaction.

A store is created at its first write, not when it is opened: a job that fails
before it commits anything leaves no empty file behind. An empty file is no
store yet, as no file is (:func:`is_empty`): a run makes it one at its first
write, and ``zeus store check`` says there is nothing to check.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from zeus_core import catalog
from zeus_core.backends import StoreError, StoreInfo, StoreWriteFailed
from zeus_core.engine.stores.checks import TRY_FIELDS, content_problems, parse_json
from zeus_core.files import connect_shared, is_busy
from zeus_core.results import TryRecord

#: ``PRAGMA application_id`` of every zeus store: "zeus" in ASCII.
APPLICATION_ID = 0x7A657573
#: The schema this zeus-core writes (``PRAGMA user_version``).
SCHEMA_VERSION = 2

_TABLES = """
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

#: The index that finds a recurrence's tries (each try is stored once: :meth:`Transaction.tries_of`).
_INDEX = "CREATE INDEX IF NOT EXISTS tries_by_recurrence ON tries (recurrence, try_index)"

#: Statements that take a store from version ``v`` to ``v + 1``. Version 1 is the
#: layout before stores were marked (a ``meta`` row ``schema = 1``, no ``steady_cost``).
MIGRATIONS: dict[int, list[str]] = {
    1: ["ALTER TABLE tries ADD COLUMN steady_cost REAL"],
}

#: Tables a version-1 store (unmarked) has; a file with them is recognised as zeus's.
_LEGACY_TABLES = {"meta", "state", "tries", "journal"}
#: The columns each table of a store of each version has (a missing one is damage).
_TRY_COLUMNS_V1 = {
    "id",
    "recurrence",
    "try_index",
    "batch_size",
    "power_limit",
    "epochs",
    "time_s",
    "energy_j",
    "cost",
    "reached",
    "stopped",
    "extra",
    "created",
}
_COLUMNS: dict[int, dict[str, set[str]]] = {
    1: {
        "meta": {"key", "value"},
        "state": {"key", "value", "version"},
        "tries": _TRY_COLUMNS_V1,
        "journal": {"id", "owner", "key", "original", "pid", "created"},
    },
}
_COLUMNS[2] = {**_COLUMNS[1], "tries": _TRY_COLUMNS_V1 | {"steady_cost"}}


class Transaction:
    """Reads and writes inside one ``BEGIN IMMEDIATE`` transaction. ``trusted`` turns SQLite's
    errors, and stored JSON no zeus wrote, into the store's :class:`StoreError` (values a caller
    gives that cannot be stored, such as NaN, stay a ``ValueError`` of the caller's)."""

    def __init__(self, conn: sqlite3.Connection, trusted: Callable[[], AbstractContextManager[None]]) -> None:
        self._c = conn
        self._trusted = trusted

    def _execute(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        with self._trusted():
            return self._c.execute(sql, params)

    def _value(self, sql: str, params: tuple = (), default: Any = None) -> Any:
        """The JSON of the first column of the first row (``default``: no row)."""
        with self._trusted():
            row = self._c.execute(sql, params).fetchone()
            return default if row is None else parse_json(row[0])

    def get(self, key: str, default: Any = None) -> Any:
        return self._value("SELECT value FROM state WHERE key = ?", (key,), default)

    def set(self, key: str, value: Any) -> None:
        text = json.dumps(value, allow_nan=False)
        self._execute(
            "INSERT INTO state (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value, version = version + 1",
            (key, text),
        )

    def identity(self) -> dict[str, Any] | None:
        return self._value("SELECT value FROM meta WHERE key = 'identity'")

    def set_identity(self, identity: dict[str, Any]) -> None:
        self._execute(
            "INSERT INTO meta (key, value) VALUES ('identity', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (json.dumps(identity, allow_nan=False, sort_keys=True),),
        )

    def add_try(self, r: TryRecord) -> int:
        row = (
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
        )
        cur = self._execute(
            "INSERT INTO tries (recurrence, try_index, batch_size, power_limit, epochs, time_s, energy_j, cost,"
            " reached, stopped, extra, created, steady_cost) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            row,
        )
        assert cur.lastrowid is not None  # an INSERT sets it
        return cur.lastrowid

    def tries_of(self, recurrence: int) -> list[tuple[int, bool]]:
        rows = self._execute("SELECT try_index, reached FROM tries WHERE recurrence = ? ORDER BY try_index", (int(recurrence),)).fetchall()
        return [(int(i), bool(r)) for i, r in rows]

    def clear(self) -> None:
        """Forget the job's state, results and identity (``zeus run --fresh``)."""
        self._execute("DELETE FROM state")
        self._execute("DELETE FROM tries")
        self._execute("DELETE FROM meta WHERE key = 'identity'")


def _refuse(path: Path, what: str, fix: str) -> StoreError:
    return StoreError(f"{path}: {what}. {fix}. The file was not changed")


def _damaged(path: Path, what: str) -> StoreError:
    return _refuse(
        path,
        f"is damaged ({what})",
        f"Move it aside (mv {path} {path}.damaged) and start over with `zeus run --fresh`, or rebuild it from a copy "
        "or from `zeus store export` JSON with `zeus store import`",
    )


#: SQLite's primary result codes of a file system that refused a write.
_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CANTOPEN, _SQLITE_FULL = 8, 10, 14, 13
#: Below this many free bytes on its file system, an I/O error writing a store is taken for a full disk
#: (SQLite says "disk I/O error" when a full disk refuses its WAL or shared-memory file).
_NEARLY_FULL = 1 << 20


def _free_bytes(folder: Path) -> int | None:
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _nearly_full(folder: Path, free: int | None) -> bool:
    """Whether ``free`` bytes is next to nothing on the file system of ``folder``: under 1 MiB and
    under a tenth of its size."""
    if free is None:
        return False
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return free < min(_NEARLY_FULL, st.f_blocks * st.f_frsize // 10)


def _read_only_fs(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _write_failure(path: Path, e: BaseException) -> StoreWriteFailed | None:
    """What a write that failed with ``e`` is when its file system refused it (full, read-only, an
    I/O error): the error naming the file and the fix, exit 1; None for anything else."""
    if isinstance(e, sqlite3.Error):
        code = (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF
        if code not in (_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CANTOPEN, _SQLITE_FULL):
            return None
        os_errno = None
    elif isinstance(e, OSError):
        os_errno, code = e.errno, 0
        if os_errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EACCES, errno.EPERM):
            return None
    else:
        return None
    folder = path.resolve().parent
    free = _free_bytes(folder)
    said = f"SQLite: {e}" if isinstance(e, sqlite3.Error) else (e.strerror or str(e))
    full = code == _SQLITE_FULL or os_errno in (errno.ENOSPC, errno.EDQUOT)
    if not full and (
        code == _SQLITE_READONLY
        or os_errno in (errno.EROFS, errno.EACCES, errno.EPERM)
        or _read_only_fs(folder)
        or (code == _SQLITE_CANTOPEN and not os.access(folder, os.W_OK))
    ):
        return StoreWriteFailed(
            f"{path}: cannot write it: it is on a read-only file system, or this user may not write it or its folder "
            f"({said}). Nothing was written. Run the job where its store can be written (zeus store check, zeus store "
            "export and zeus report read it where it is)",
            kind="read-only",
            detail=said,
        )
    if full or (code in (_SQLITE_IOERR, _SQLITE_CANTOPEN) and _nearly_full(folder, free)):
        where = f"; {free} bytes free on the file system of {folder}" if free is not None else ""
        return StoreWriteFailed(
            f"{path}: the disk is full ({said}{where}). The store is not damaged: nothing of the unfinished transaction "
            "was stored, and what was committed before is kept. Free space and run again: the next run continues",
            kind="full",
            detail=f"{said}{where}",
        )
    if code == _SQLITE_CANTOPEN:
        return None
    return StoreWriteFailed(
        f"{path}: the disk reported an I/O error ({said}). Nothing of the unfinished transaction was stored, and what "
        "was committed before is kept; check the disk (dmesg, SMART), then run again: the next run continues",
        kind="io",
        detail=said,
    )


def _read_only_connection(path: Path, timeout_s: float, in_place: bool) -> tuple[sqlite3.Connection, Path | None]:
    """A connection that reads the store at ``path`` and cannot write it, and the temporary folder
    to remove after it (or None).

    ``in_place``: an ordinary connection that may not write (``PRAGMA query_only``), where the
    store's folder can be written (so that SQLite tidies its ``-wal`` and ``-shm`` as after any
    run). Else, or where that fails (read-only media, a folder this user may not write):
    ``mode=ro``; then, without a ``-wal`` file holding commits, ``immutable`` (SQLite needs to
    make no file beside it); else a private copy of the file and its ``-wal``, read where SQLite
    may make its files."""
    uri = path.resolve().as_uri()
    wal = Path(f"{path}-wal")
    attempts: list[str] = []
    if (
        in_place
        and os.access(path, os.W_OK)
        and os.access(path.resolve().parent, os.W_OK | os.X_OK)
        and not _read_only_fs(path.resolve().parent)
    ):
        attempts.append("")
    if not in_place and not wal.exists():  # nothing else to read: the file alone (no -wal/-shm made beside it)
        attempts.append("?mode=ro&immutable=1")
    attempts.append("?mode=ro")
    if not wal.exists() or wal.stat().st_size == 0:
        attempts.append("?mode=ro&immutable=1")
    last: sqlite3.Error | None = None
    for query in dict.fromkeys(attempts):
        conn = None
        try:
            conn = sqlite3.connect(f"{uri}{query}", uri=True, timeout=timeout_s, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
            if not query:
                conn.execute("PRAGMA query_only = 1")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn, None
        except sqlite3.Error as e:
            if conn is not None:
                conn.close()
            code = (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF
            if code not in (_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CANTOPEN, _SQLITE_FULL):
                raise  # not the file system: what the file is (its caller says)
            last = e
    # Commits in a -wal file that SQLite cannot read in place: a private copy of both.
    tmp = Path(tempfile.mkdtemp(prefix="zeus-store-"))
    try:
        shutil.copyfile(path, tmp / path.name)
        shutil.copyfile(wal, tmp / wal.name)
        conn = sqlite3.connect(tmp / path.name, timeout=timeout_s, isolation_level=None)
        conn.execute("PRAGMA query_only = 1")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn, tmp
    except (OSError, sqlite3.Error) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        assert last is not None
        raise last from e


def is_empty(path: Path) -> bool:
    """An empty store file: no store yet, exactly as if there were no file (a job's first write
    makes it one; ``zeus store check`` says there is nothing to check). The one rule for an empty
    file, wherever a store is opened: zero bytes here, and SQLite's own empty database (no table,
    no zeus mark) in :func:`inspect_store`."""
    return not path.exists() or path.stat().st_size == 0


def inspect_store(path: str | os.PathLike[str], verify: bool = True, creatable: bool = True) -> StoreInfo:
    """What the store at ``path`` is, read-only: raises :class:`StoreError` (and changes
    nothing) for a folder, a file that is not a zeus store, a newer schema, or damage (when
    ``verify``: SQLite's ``PRAGMA integrity_check``, then every table and column the schema
    has, and every row read and checked as :mod:`~zeus_core.engine.stores.checks` says)."""
    path = Path(path)
    if path.is_dir():
        raise StoreError(f"{path} is a folder, not a store file; set job.store to a file path such as {path / 'job.sqlite'}")
    if is_empty(path):
        if creatable:  # a store to be written (not one only read): its file can be made
            _check_creatable(path)
        return StoreInfo(0, None, 0)
    # Without a WAL file beside it, the file alone is the database: open it immutable, so that
    # SQLite creates no -wal/-shm next to a file it may be about to refuse (on read-only media
    # with commits in the WAL file: a private copy).
    try:
        conn, tmp = _read_only_connection(path, 30.0, in_place=False)
    except sqlite3.DatabaseError as e:
        code = (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF
        if code in (_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CANTOPEN, _SQLITE_FULL):
            raise _refuse(path, f"cannot be opened ({e})", "Check its permissions, or pass another `job.store`") from e
        raise _refuse(path, f"is not a zeus store ({e})", "Point job.store at another file, or move this one aside") from e
    recognised = False
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if app_id == 0 and not tables:  # empty: new, or another process is creating it right now
            return StoreInfo(0, None, 0)
        if app_id != APPLICATION_ID:
            legacy = app_id == 0 and _LEGACY_TABLES <= tables
            if not legacy:
                raise _refuse(
                    path,
                    "is an SQLite database but not a zeus store" + (f" (it has tables {', '.join(sorted(tables))})" if tables else ""),
                    "Point job.store at another file (zeus never adopts a foreign database)",
                )
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            version = int(row[0]) if row else 1
        if version > SCHEMA_VERSION:
            raise _refuse(
                path,
                f"was written by a newer zeus-core (store schema {version}; this one reads up to {SCHEMA_VERSION})",
                f"Upgrade zeus-core ({catalog.install_command(catalog.CORE, upgrade=True)}), or use another job.store",
            )
        recognised = True
        if verify:
            problems = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(5)")]
            if problems != ["ok"]:
                raise _damaged(path, "PRAGMA integrity_check: " + "; ".join(problems[:3]))
            problems = _layout_problems(conn, int(version), tables)
            if not problems:
                identity_row = conn.execute("SELECT value FROM meta WHERE key = 'identity'").fetchone()
                problems = content_problems(
                    None if identity_row is None else identity_row[0],
                    conn.execute("SELECT key, value FROM state"),
                    conn.execute(
                        f"SELECT {', '.join(TRY_FIELDS)} FROM tries"
                        if int(version) >= 2
                        else f"SELECT {', '.join(TRY_FIELDS[:-1])}, NULL FROM tries"
                    ),
                )
            if problems:
                raise _damaged(path, "; ".join(problems))
        identity = None
        if "meta" in tables:
            row = conn.execute("SELECT value FROM meta WHERE key = 'identity'").fetchone()
            identity = None if row is None else json.loads(row[0])
        tries = conn.execute("SELECT COUNT(*) FROM tries").fetchone()[0] if "tries" in tables else 0
        return StoreInfo(int(version), identity, int(tries))
    except sqlite3.DatabaseError as e:  # "file is not a database", or damage SQLite trips over
        if recognised:
            raise _damaged(path, f"SQLite: {e}") from e
        raise _refuse(path, f"is not a zeus store ({e})", "Point job.store at another file, or move this one aside") from e
    except StoreError:
        raise
    except ValueError as e:  # the identity's JSON, read without verifying
        raise _damaged(path, f"its identity is not JSON ({e})") from e
    finally:
        conn.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _layout_problems(conn: sqlite3.Connection, version: int, tables: set[str]) -> list[str]:
    """Tables or columns the store's schema version has and the file lacks."""
    expected = _COLUMNS[min(max(version, 1), SCHEMA_VERSION)]
    missing = sorted(set(expected) - tables)
    if missing:
        return [f"its schema's table{'s' if len(missing) > 1 else ''} {', '.join(missing)} {'are' if len(missing) > 1 else 'is'} missing"]
    problems = []
    for table, columns in expected.items():
        have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        lacking = sorted(columns - have)
        if lacking:
            problems.append(f"table {table} lacks the column{'s' if len(lacking) > 1 else ''} {', '.join(lacking)}")
    return problems


def _check_creatable(path: Path) -> None:
    """The store file can be made: its nearest existing folder is a folder this process may write."""
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise StoreError(f"{path}: cannot create the store, {folder} is a file, not a folder; pass another `job.store` path")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StoreError(f"{path}: cannot create the store, {folder} is not writable by this user; pass another `job.store` path")


class Store:
    """A zeus store file. Safe to open from several processes at once.

    Opening checks an existing file (:func:`inspect_store`) without writing to it;
    the file is created, or migrated, at the first transaction. ``read_only``: this object only
    reads (``zeus store check|export``, ``zeus report``): it never writes, migrates or creates
    the file, and reads a store on read-only media.

    A write its file system refuses (full, read-only, an I/O error) is a
    :class:`~zeus_core.backends.StoreWriteFailed` naming the file and the fix
    (exit 1), not damage: the store keeps what was committed before.
    """

    def __init__(self, path: str | os.PathLike[str], timeout_s: float = 60.0, verify: bool = True, read_only: bool = False) -> None:
        self.path = Path(path)
        self.location = str(self.path)
        self.timeout_s = timeout_s
        self.read_only = read_only
        self.info = inspect_store(self.path, verify=verify, creatable=not read_only)
        self._conn: sqlite3.Connection | None = None
        self._tmp: Path | None = None  # a read-only copy's folder (read-only media with commits in the WAL)
        #: Whether this object created the file (and so may remove it while it is still empty).
        self.created = False

    # -- the connection, made at first need --

    def _connection(self, create: bool) -> sqlite3.Connection | None:
        if self._conn is not None:
            return self._conn
        if not create and self.info.version == 0 and not self.path.exists():
            return None
        if self.read_only:
            if create:
                raise StoreError(f"{self.path}: opened to be read only; nothing was written")
            if is_empty(self.path):
                return None
            try:
                self._conn, self._tmp = _read_only_connection(self.path, self.timeout_s, in_place=True)
            except sqlite3.DatabaseError as e:
                raise StoreError(f"{self.path}: cannot read it ({e}); check its permissions") from e
            return self._conn
        existed = self.path.exists()
        try:
            self._conn = connect_shared(self.path, self.timeout_s, self._setup)
        except (sqlite3.DatabaseError, OSError) as e:
            failure = _write_failure(self.path, e)
            if not existed:
                self._remove_stub()
            if failure is not None:
                raise failure from e
            raise StoreError(f"{self.path}: cannot use as a zeus store ({e}); pass another `job.store` path") from e
        self.created = not existed
        return self._conn

    def _remove_stub(self) -> None:
        """Remove the file (and SQLite's files beside it) that a failed first connection left, while
        it holds no store yet (a full disk leaves a first page, but no table)."""
        try:
            if self.path.exists() and inspect_store(self.path, verify=False).version != 0:
                return
        except StoreError:
            return  # not ours to remove
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            except OSError:
                pass

    def remove_if_created(self) -> None:
        """Close, and remove the file this object created (an import that could not finish): it
        holds nothing anyone committed but this object's own failed first writes."""
        created = self.created
        self.close()
        if created:
            for suffix in ("", "-wal", "-shm", "-journal"):
                try:
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
                except OSError:
                    pass

    def _setup(self, conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._initialise_or_migrate(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _initialise_or_migrate(self, conn: sqlite3.Connection) -> None:
        """Inside the opening transaction: a new file gets the schema, an older one migrations."""
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if app_id == APPLICATION_ID and version == SCHEMA_VERSION:
            # An index, not a schema change (a store without it reads the same): added where missing.
            conn.execute(_INDEX)
            return
        if app_id == APPLICATION_ID and version > SCHEMA_VERSION:  # another process upgraded it meanwhile
            raise _refuse(self.path, f"was written by a newer zeus-core (store schema {version})", "Upgrade zeus-core")
        if app_id not in (0, APPLICATION_ID) or (app_id == 0 and tables and not _LEGACY_TABLES <= tables):
            raise _refuse(self.path, "is not a zeus store", "Point job.store at another file")
        if not tables:
            for statement in _TABLES.split(";"):
                if statement.strip():
                    conn.execute(statement)
            version = SCHEMA_VERSION
        elif app_id == 0:  # an unmarked version-1 store
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            version = int(row[0]) if row else 1
        while version < SCHEMA_VERSION:
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
            version += 1
        conn.execute(_INDEX)
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('schema', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (str(SCHEMA_VERSION),),
        )
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # -- lifetime --

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _trusted(self) -> Iterator[None]:
        """SQLite's errors and JSON no zeus wrote, met after the store was opened (another process
        damaged it meanwhile), as the :class:`StoreError` naming the file that opening would raise."""
        try:
            yield
        except StoreError:
            raise
        except (sqlite3.DatabaseError, ValueError) as e:
            if isinstance(e, sqlite3.OperationalError) and is_busy(e):
                raise StoreError(f"{self.path}: another process held the store longer than {self.timeout_s:g} s ({e}); try again") from e
            failure = _write_failure(self.path, e)
            if failure is not None:  # the file system, not the store: never "damaged"
                raise failure from e
            raise _damaged(self.path, f"SQLite: {e}" if isinstance(e, sqlite3.DatabaseError) else str(e)) from e

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One atomic unit: everything inside commits together or not at all."""
        with self._trusted():
            conn = self._connection(create=True)
            assert conn is not None
            conn.execute("BEGIN IMMEDIATE")
        try:
            yield Transaction(conn, self._trusted)
        except BaseException:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.DatabaseError:
                pass  # SQLite rolls back what it could not commit when the connection closes
            raise
        else:
            with self._trusted():
                conn.execute("COMMIT")

    # -- reads outside a transaction (a consistent snapshot each; nothing before the first write) --

    def get(self, key: str, default: Any = None) -> Any:
        conn = self._connection(create=False)
        if conn is None:
            return default
        return Transaction(conn, self._trusted).get(key, default)

    def identity(self) -> dict[str, Any] | None:
        """The identity of the job this store learned (None for a new store)."""
        conn = self._connection(create=False)
        if conn is None:
            return self.info.identity
        return Transaction(conn, self._trusted).identity()

    def state_items(self) -> dict[str, Any]:
        """Every state value by key (for export)."""
        conn = self._connection(create=False)
        if conn is None:
            return {}
        with self._trusted():
            return {k: parse_json(v) for k, v in conn.execute("SELECT key, value FROM state ORDER BY key")}

    def tries(self) -> list[TryRecord]:
        with self._trusted():
            return self._tries()

    def _tries(self) -> list[TryRecord]:
        conn = self._connection(create=False)
        if conn is None:
            return []
        # A store of schema 1 read where it is not migrated (read only) has no steady_cost column.
        steady = "steady_cost" if any(r[1] == "steady_cost" for r in conn.execute("PRAGMA table_info(tries)")) else "NULL"
        rows = conn.execute(
            "SELECT recurrence, try_index, batch_size, power_limit, epochs, time_s, energy_j, cost, reached,"
            f" stopped, extra, {steady} FROM tries ORDER BY recurrence, try_index, id"
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
                extra=parse_json(r[10]),
                steady_cost=r[11],
            )
            for r in rows
        ]

    def clear(self) -> None:
        """Forget the job's state, results and identity (``zeus run --fresh``)."""
        if self._connection(create=False) is None:
            return
        with self.transaction() as tx:
            tx.clear()


def open_sqlite(location: str, timeout_s: float = 60.0, job: str | None = None, read_only: bool = False) -> Store:
    """The ``sqlite`` store backend: a path, or a ``sqlite:///path`` URL. A file holds one
    job, so ``job`` (the job's name, which names the default file) is not needed.
    ``read_only``: a store that is only read (:class:`Store`)."""
    path = location[len("sqlite://") :] if location.lower().startswith("sqlite://") else location
    return Store(path, timeout_s=timeout_s, read_only=read_only)

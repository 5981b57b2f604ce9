"""A job store in PostgreSQL: many jobs, many machines, one database.

``job.store = "postgresql://user@host:5432/db"`` keeps the job's state in the
database's schema ``zeus`` (``?schema=other`` for another), next to every other
job's, told apart by the job's name:

* ``meta``: ``application = zeus`` and the schema version;
* ``jobs``: one row per job, with the identity of the job it learned; the row
  is what a transaction locks (``SELECT ... FOR UPDATE``) first, so concurrent
  runners of one job are serialised as SQLite's ``BEGIN IMMEDIATE`` serialises
  them, and each of their statements (``READ COMMITTED``) sees the latest
  committed state; runners of other jobs never wait;
* ``state`` and ``tries``: the job's policy state and results, as in SQLite.

The same promises as the SQLite store (``zeus_core.engine.stores.sqlite``):

* opening writes nothing: it connects, and reads (in a read-only transaction)
  whether the schema is zeus's and which version, and the job's identity and
  results. A schema that is not zeus's, or one written by a newer zeus, is
  refused (:class:`~zeus_core.backends.StoreError`, naming the store with its password
  masked and the fix) and left as it is;
* the schema is created at the first write, and an older one migrated forward
  (:data:`MIGRATIONS`), in one transaction under an advisory lock, so that
  processes starting at once create it once;
* a transaction commits all or nothing. A server that cannot be reached, or a
  connection lost mid-transaction, is :class:`~zeus_core.backends.StoreUnavailable`
  (``zeus run`` exits 1; the transaction was rolled back by the server, and the
  job continues from what was committed once the server is back). A connection
  found dead when a transaction *starts* (the server restarted meanwhile) is
  opened again, for up to ``reconnect_s`` seconds, since nothing was sent yet.

Besides libpq's own URL parameters (``sslmode``, ``connect_timeout``, ...),
the URL takes ``schema`` and ``reconnect_s`` (default 10), which are zeus's.
Put the password in ``~/.pgpass`` or ``PGPASSWORD`` rather than in the URL; a
password in the URL is never shown (:func:`zeus_core.engine.mask_secrets`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlunsplit

import psycopg
from psycopg import sql

from zeus_core import TryRecord
from zeus_core.backends import StoreError, StoreInfo, StoreUnavailable, StoreWriteFailed
from zeus_core.engine import TRY_FIELDS, content_problems, mask_secrets, parse_url

APPLICATION = "zeus"
#: The schema this plugin writes.
SCHEMA_VERSION = 1
#: Statements that take a schema from version ``v`` to ``v + 1`` (``{schema}`` is the schema's
#: quoted name). Version 1 is the first; a later layout adds its statements here.
MIGRATIONS: dict[int, list[str]] = {}

_TABLES = [
    "CREATE TABLE {schema}.meta (key text PRIMARY KEY, value text NOT NULL)",
    "CREATE TABLE {schema}.jobs (job text PRIMARY KEY, identity text, created double precision NOT NULL)",
    "CREATE TABLE {schema}.state (job text NOT NULL REFERENCES {schema}.jobs (job) ON DELETE CASCADE, key text NOT NULL,"
    " value text NOT NULL, version bigint NOT NULL DEFAULT 1, PRIMARY KEY (job, key))",
    "CREATE TABLE {schema}.tries (id bigserial PRIMARY KEY,"
    " job text NOT NULL REFERENCES {schema}.jobs (job) ON DELETE CASCADE,"
    " recurrence bigint NOT NULL, try_index bigint NOT NULL, batch_size bigint NOT NULL, power_limit double precision,"
    " epochs bigint NOT NULL, time_s double precision NOT NULL, energy_j double precision NOT NULL,"
    " cost double precision NOT NULL, reached boolean NOT NULL, stopped text, extra text NOT NULL DEFAULT '{{}}',"
    " created double precision NOT NULL, steady_cost double precision)",
    "CREATE INDEX tries_by_job ON {schema}.tries (job, recurrence, try_index, id)",
]
#: The tables every version has (their absence in a zeus schema is damage).
_REQUIRED = {"meta", "jobs", "state", "tries"}
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
#: Our own URL parameters, taken out before the URL goes to libpq.
_OWN_PARAMS = ("schema", "reconnect_s")
#: What libpq says (no SQLSTATE comes with a failed connection) when the server *refused* a
#: connection: wrong password, unknown user or database, no pg_hba.conf entry. Not "unavailable".
_REFUSED_CONNECT = {
    "authentication failed": "28P01",
    "pg_hba.conf": "28000",
    'role "': "28000",
    'database "': "3D000",
    "permission denied": "42501",
    "invalid ": "08P01",
}
#: SQLSTATEs of a server whose disk refused a write (full; an I/O error): the store is fine, exit 1.
_DISK = {"53100": "the database server's disk is full", "58030": "the database server's disk reported an I/O error"}
#: SQLSTATEs of a server that is there but cannot take connections now.
_NOT_NOW = {"57P01", "57P02", "57P03", "08000", "08003", "08006", "08001", "08004"}

_TRY_COLUMNS = "recurrence, try_index, batch_size, power_limit, epochs, time_s, energy_j, cost, reached, stopped, extra, steady_cost"


def split_location(location: str) -> tuple[str, str, float]:
    """``(libpq URL, schema, reconnect_s)`` of a ``postgresql://`` location."""
    try:
        parts = parse_url(location)
    except ValueError as e:
        raise StoreError(f"job.store: {e}: expected a URL such as postgresql://zeus@db.example:5432/zeus") from None
    query = parse_qsl(parts.query, keep_blank_values=True)
    own = {k: v for k, v in query if k in _OWN_PARAMS}
    rest = [(k, v) for k, v in query if k not in _OWN_PARAMS]
    schema = own.get("schema", "zeus")
    if not _SCHEMA_NAME.match(schema):
        raise StoreError(
            f"job.store {mask_secrets(location)}: schema {schema!r} is not a plain PostgreSQL name "
            "(letters, digits and _, not starting with a digit)"
        )
    try:
        reconnect_s = float(own.get("reconnect_s", "10"))
        if not 0 <= reconnect_s <= 3600:
            raise ValueError
    except ValueError:
        raise StoreError(f"job.store {mask_secrets(location)}: reconnect_s must be a number of seconds in 0..3600") from None
    scheme = "postgresql" if parts.scheme.lower() in ("postgres", "postgresql") else parts.scheme
    return urlunsplit((scheme, parts.netloc, parts.path, urlencode(rest), parts.fragment)), schema, reconnect_s


class PgTransaction:
    """Reads and writes of one job inside one transaction (the job's row is locked)."""

    def __init__(self, store: PostgresStore, conn: psycopg.Connection) -> None:
        self._s = store
        self._c = conn
        self._job = store.job

    def _q(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(schema=sql.Identifier(self._s.schema))

    def _execute(self, text: str, params: tuple = ()) -> psycopg.Cursor:
        return self._s._execute(self._c, self._q(text), params)

    def get(self, key: str, default: Any = None) -> Any:
        row = self._execute("SELECT value FROM {schema}.state WHERE job = %s AND key = %s", (self._job, _key(key))).fetchone()
        return default if row is None else json.loads(row[0])

    def set(self, key: str, value: Any) -> None:
        text = json.dumps(value, allow_nan=False)
        self._execute(
            "INSERT INTO {schema}.state (job, key, value) VALUES (%s, %s, %s) ON CONFLICT (job, key) "
            "DO UPDATE SET value = excluded.value, version = {schema}.state.version + 1",
            (self._job, _key(key), text),
        )

    def identity(self) -> dict[str, Any] | None:
        row = self._execute("SELECT identity FROM {schema}.jobs WHERE job = %s", (self._job,)).fetchone()
        return None if row is None or row[0] is None else json.loads(row[0])

    def set_identity(self, identity: dict[str, Any]) -> None:
        self._execute(
            "UPDATE {schema}.jobs SET identity = %s WHERE job = %s", (json.dumps(identity, allow_nan=False, sort_keys=True), self._job)
        )

    def add_try(self, r: TryRecord) -> int:
        row = self._execute(
            "INSERT INTO {schema}.tries (job, recurrence, try_index, batch_size, power_limit, epochs, time_s, energy_j,"
            " cost, reached, stopped, extra, created, steady_cost) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
            " RETURNING id",
            (
                self._job,
                int(r.recurrence),
                int(r.try_index),
                int(r.batch_size),
                None if r.power_limit is None else float(r.power_limit),
                int(r.epochs),
                float(r.time_s),
                float(r.energy_j),
                float(r.cost),
                bool(r.reached),
                r.stopped,
                json.dumps(r.extra, allow_nan=False),
                time.time(),
                None if r.steady_cost is None else float(r.steady_cost),
            ),
        ).fetchone()
        assert row is not None  # INSERT ... RETURNING gives the row
        return int(row[0])

    def tries_of(self, recurrence: int) -> list[tuple[int, bool]]:
        rows = self._execute(
            "SELECT try_index, reached FROM {schema}.tries WHERE job = %s AND recurrence = %s ORDER BY try_index",
            (self._job, int(recurrence)),
        ).fetchall()
        return [(int(i), bool(r)) for i, r in rows]

    def clear(self) -> None:
        """Forget the job's state, results and identity (``zeus run --fresh``); other jobs keep theirs."""
        self._execute("DELETE FROM {schema}.state WHERE job = %s", (self._job,))
        self._execute("DELETE FROM {schema}.tries WHERE job = %s", (self._job,))
        self._execute("UPDATE {schema}.jobs SET identity = NULL WHERE job = %s", (self._job,))


def _key(key: str) -> str:
    if not isinstance(key, str) or "\x00" in key:
        raise ValueError(f"a state key is a string without NUL characters, got {key!r}")
    return key


def _record(r: tuple) -> TryRecord:
    return TryRecord(
        recurrence=int(r[0]),
        try_index=int(r[1]),
        batch_size=int(r[2]),
        power_limit=r[3],
        epochs=int(r[4]),
        time_s=r[5],
        energy_j=r[6],
        cost=r[7],
        reached=bool(r[8]),
        stopped=r[9],
        extra=json.loads(r[10]),
        steady_cost=r[11],
    )


class PostgresStore:
    """One job's store in a PostgreSQL database (see the module docstring)."""

    def __init__(self, location: str, job: str | None, timeout_s: float = 60.0) -> None:
        self.location = mask_secrets(location)
        if not job:
            raise StoreError(
                f"job.store {self.location}: a PostgreSQL store holds many jobs, and no job name was given "
                "(zeus run gives job.name; a script passes job=...)"
            )
        self.job = job
        self.timeout_s = timeout_s
        self._url, self.schema, self.reconnect_s = split_location(location)
        self._conn: psycopg.Connection | None = None
        self._ready = False  # the schema exists at this version (checked at the first write)
        self.info = self._inspect()

    # -- messages --

    def _where(self) -> str:
        return f"job.store {self.location} (schema {self.schema}, job {self.job!r})"

    def _refuse(self, what: str, fix: str) -> StoreError:
        return StoreError(f"{self._where()}: {what}. {fix}. Nothing was changed")

    def _failure(self, e: psycopg.Error, doing: str) -> StoreError:
        """A psycopg error as zeus's: unavailable (exit 1) when the server cannot be reached or went
        away, else a refusal that says what the server said."""
        text = mask_secrets(" ".join(str(e).split()))
        state = getattr(e, "sqlstate", None)
        if state in _DISK:
            return StoreWriteFailed(
                f"{self._where()}: {_DISK[state]} while {doing} ({text}). The store is not damaged: nothing of the "
                "unfinished transaction was stored, and what was committed before is kept. Free space on the server "
                "(or ask its administrator to), then run again: the next run continues",
                kind="full" if state == "53100" else "io",
                detail=text,
            )
        if state is None and isinstance(e, psycopg.OperationalError):
            state = next((code for words, code in _REFUSED_CONNECT.items() if words in text), None)
        if isinstance(e, psycopg.OperationalError) and (state is None or state in _NOT_NOW):
            return StoreUnavailable(
                f"{self._where()}: the database server cannot be reached while {doing} ({text}). Nothing of an "
                "unfinished transaction was stored; start the server (or check host and port), then run the job "
                "again: it continues from what was committed"
            )
        if state in ("28P01", "28000"):
            fix = "Check the user and password (~/.pgpass or PGPASSWORD rather than the URL)"
        elif state == "3D000":
            fix = "Create the database (createdb), or name an existing one in job.store"
        elif state == "55P03":
            fix = f"Another runner of the job held it longer than {self.timeout_s:g} s; try again"
        elif state == "42501":
            fix = (
                f"Let this user create the schema (GRANT CREATE ON DATABASE ...), or have an administrator create "
                f"schema {self.schema} for it"
            )
        else:
            fix = "Check job.store and the server's log"
        return StoreError(f"{self._where()}: the database refused {doing}: {text}. {fix}")

    # -- connections --

    def _connect(self) -> psycopg.Connection:
        kwargs: dict[str, Any] = {"autocommit": True, "application_name": "zeus"}
        if "connect_timeout" not in self._url:
            kwargs["connect_timeout"] = 5
        if "client_encoding" not in self._url:
            kwargs["client_encoding"] = "UTF8"  # text comes back as str even from a SQL_ASCII database
        try:
            return psycopg.connect(self._url, **kwargs)
        except psycopg.Error as e:
            raise self._failure(e, "connecting") from None

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop()
            self._conn = self._connect()
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except psycopg.Error:
                pass
            self._conn = None

    def _execute(self, conn: psycopg.Connection, query: Any, params: tuple = ()) -> psycopg.Cursor:
        try:
            return conn.execute(query, params)
        except psycopg.Error as e:
            raise self._failure(e, "running a statement") from None

    def _q(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(schema=sql.Identifier(self.schema))

    # -- what the store is (read-only) --

    def _inspect(self) -> StoreInfo:
        conn = self._connection()
        try:
            with conn.transaction():
                conn.execute("SET TRANSACTION READ ONLY")
                version = self._version(conn)
                if version == 0:
                    return StoreInfo(0, None, 0)
                row = conn.execute(self._q("SELECT identity FROM {schema}.jobs WHERE job = %s"), (self.job,)).fetchone()
                problems = self._content_problems(conn, None if row is None else row[0])
                if problems:
                    raise self._refuse(
                        f"the job's rows are damaged ({'; '.join(problems)})",
                        "Restore the schema from a backup, or start the job over with `zeus run --fresh` (or give it another job.name)",
                    )
                identity = None if row is None or row[0] is None else json.loads(row[0])
                counted = conn.execute(self._q("SELECT count(*) FROM {schema}.tries WHERE job = %s"), (self.job,)).fetchone()
                assert counted is not None  # count(*) gives a row
                return StoreInfo(version, identity, int(counted[0]))
        except StoreError:
            raise
        except psycopg.Error as e:
            raise self._failure(e, "reading what the store is") from None

    def _content_problems(self, conn: psycopg.Connection, identity: Any) -> list[str]:
        """The job's identity, state and tries as the core's checks want them (every row read)."""
        columns = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = 'tries'", (self.schema,)
            )
        }
        lacking = sorted(set(TRY_FIELDS) - columns)
        if lacking:
            return [f"table tries lacks the columns {', '.join(lacking)}"]
        state = conn.execute(self._q("SELECT key, value FROM {schema}.state WHERE job = %s"), (self.job,))
        tries = conn.execute(self._q(f"SELECT {', '.join(TRY_FIELDS)} FROM {{schema}}.tries WHERE job = %s"), (self.job,))
        return content_problems(identity, state.fetchall(), tries.fetchall())

    def _version(self, conn: psycopg.Connection) -> int:
        """The schema's version (0: no schema, or an empty one, yet); refuses one that is not zeus's or is newer."""
        tables = {r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (self.schema,))}
        if not tables:
            return 0
        if "meta" not in tables:
            raise self._refuse(
                f"schema {self.schema} holds tables that are not a zeus store ({', '.join(sorted(tables)[:8])})",
                "Point job.store at another database, or another schema with ?schema=NAME (zeus never adopts tables it did not create)",
            )
        meta: dict[str, str] = dict(conn.execute(self._q("SELECT key, value FROM {schema}.meta")).fetchall())
        if meta.get("application") != APPLICATION:
            raise self._refuse(
                f"schema {self.schema} has a meta table that is not zeus's",
                "Point job.store at another database, or another schema with ?schema=NAME",
            )
        try:
            version = int(meta.get("schema_version", ""))
        except ValueError:
            raise self._refuse(
                f"schema {self.schema} has no readable schema_version", "Restore it from a backup, or use another schema"
            ) from None
        if version > SCHEMA_VERSION:
            raise self._refuse(
                f"was written by a newer zeus-plugins-postgres (schema {version}; this one reads up to {SCHEMA_VERSION})",
                "Upgrade zeus-plugins-postgres on this machine (pip install -U zeus-plugins-postgres)",
            )
        missing = _REQUIRED - tables
        if missing:
            raise self._refuse(
                f"schema {self.schema} lacks the tables {', '.join(sorted(missing))} (damaged)",
                "Restore it from a backup, or use another schema",
            )
        return version

    def _ensure_schema(self, conn: psycopg.Connection) -> None:
        """Create the schema, or migrate it forward, once, whoever else starts at the same moment."""
        if self._ready:
            return
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"zeus-schema:{self.schema}",))
            version = self._version(conn)
            if version == 0:
                conn.execute(self._q("CREATE SCHEMA IF NOT EXISTS {schema}"))
                for statement in _TABLES:
                    conn.execute(self._q(statement))
                conn.execute(
                    self._q("INSERT INTO {schema}.meta (key, value) VALUES ('application', %s), ('schema_version', %s)"),
                    (APPLICATION, str(SCHEMA_VERSION)),
                )
            else:
                while version < SCHEMA_VERSION:
                    for statement in MIGRATIONS[version]:
                        conn.execute(self._q(statement))
                    version += 1
                    conn.execute(self._q("UPDATE {schema}.meta SET value = %s WHERE key = 'schema_version'"), (str(version),))
        self._ready = True

    # -- transactions --

    def _begin(self) -> psycopg.Connection:
        """A connection inside a transaction holding the job's row lock. A dead connection found
        here is replaced (nothing was sent on it yet), while the server is back within reconnect_s."""
        deadline = time.monotonic() + self.reconnect_s
        while True:
            conn = None
            try:
                conn = self._connection()
                self._ensure_schema(conn)
                # One round trip (no parameters: one simple query), then the job's row lock.
                conn.execute(f"BEGIN; SET LOCAL lock_timeout = '{int(self.timeout_s * 1000)}ms'")
                lock = self._q("SELECT 1 FROM {schema}.jobs WHERE job = %s FOR UPDATE")
                if conn.execute(lock, (self.job,)).fetchone() is None:
                    conn.execute(
                        self._q("INSERT INTO {schema}.jobs (job, created) VALUES (%s, %s) ON CONFLICT DO NOTHING"), (self.job, time.time())
                    )
                    conn.execute(lock, (self.job,))
                return conn
            except StoreUnavailable:
                if time.monotonic() >= deadline:
                    raise
            except psycopg.OperationalError as e:
                if time.monotonic() >= deadline or (getattr(e, "sqlstate", None) not in (None, *_NOT_NOW)):
                    self._rollback(conn)
                    raise self._failure(e, "starting a transaction") from None
            except psycopg.Error as e:
                self._rollback(conn)
                raise self._failure(e, "starting a transaction") from None
            except BaseException:
                self._rollback(conn)
                raise
            self._drop()
            self._ready = False
            time.sleep(0.2)

    def _rollback(self, conn: psycopg.Connection | None) -> None:
        if conn is None:
            return
        try:
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.execute("ROLLBACK")
        except psycopg.Error:
            self._drop()  # the server rolls back what it had when the connection goes

    @contextmanager
    def transaction(self) -> Iterator[PgTransaction]:
        """One atomic unit of this job, serialised with every other runner of the job."""
        conn = self._begin()
        try:
            yield PgTransaction(self, conn)
        except BaseException:
            self._rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except psycopg.Error as e:
            self._drop()
            if isinstance(e, psycopg.OperationalError) and getattr(e, "sqlstate", None) not in _DISK:
                raise StoreUnavailable(
                    f"{self._where()}: the database server cannot be reached: the connection was lost while committing, "
                    f"so the last transaction may or may not be stored, whole ({mask_secrets(' '.join(str(e).split()))}). Run the "
                    "job again when the server is back: it continues from what was committed"
                ) from None
            raise self._failure(e, "committing") from None

    # -- reads outside a transaction (one statement each: a consistent snapshot) --

    def _read(self, text: str, params: tuple) -> list[tuple]:
        if not self._ready and self.info.version == 0:
            # Nothing was there when opened; another runner may have written meanwhile.
            conn = self._connection()
            try:
                if self._version(conn) == 0:
                    return []
            except psycopg.Error as e:
                raise self._failure(e, "reading") from None
        conn = self._connection()
        return self._execute(conn, self._q(text), params).fetchall()

    def get(self, key: str, default: Any = None) -> Any:
        rows = self._read("SELECT value FROM {schema}.state WHERE job = %s AND key = %s", (self.job, _key(key)))
        return default if not rows else json.loads(rows[0][0])

    def identity(self) -> dict[str, Any] | None:
        rows = self._read("SELECT identity FROM {schema}.jobs WHERE job = %s", (self.job,))
        return None if not rows or rows[0][0] is None else json.loads(rows[0][0])

    def state_items(self) -> dict[str, Any]:
        rows = self._read("SELECT key, value FROM {schema}.state WHERE job = %s ORDER BY key", (self.job,))
        return {k: json.loads(v) for k, v in rows}

    def tries(self) -> list[TryRecord]:
        rows = self._read(f"SELECT {_TRY_COLUMNS} FROM {{schema}}.tries WHERE job = %s ORDER BY recurrence, try_index, id", (self.job,))
        return [_record(r) for r in rows]

    def clear(self) -> None:
        """Forget this job's state, results and identity (``zeus run --fresh``)."""
        if not self._ready and self.info.version == 0 and not self._read("SELECT 1 FROM {schema}.jobs WHERE job = %s", (self.job,)):
            return
        with self.transaction() as tx:
            tx.clear()

    # -- lifetime --

    def close(self) -> None:
        self._drop()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

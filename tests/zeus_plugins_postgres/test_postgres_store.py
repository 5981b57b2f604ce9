"""The PostgreSQL store keeps every promise of the SQLite one, on a real server over loopback.

Trust on open (nothing written, foreign and newer schemas refused unchanged,
the password never shown), creation at the first write, forward migrations,
all-or-nothing transactions, jobs kept apart in one database, and concurrent
runners of one job serialised (16 processes x 25 recurrences lose nothing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from cluster_helpers import CIFAR, check_history, run_job
from pg_server import PASSWORD

from zeus_core import TryRecord
from zeus_core.backends import StoreError
from zeus_core.engine.history import ledger
from zeus_core.engine.registry import get_registry
from zeus_core.engine.stores.locations import open_store


def _rec(rec: int, i: int = 1, bs: int = 32) -> TryRecord:
    return TryRecord(rec, i, bs, 200.0, 3, 10.0, 1000.0, 1500.0, True, extra={"note": "x"})


def _db(url: str) -> str:
    return url.rsplit("/", 1)[1].split("?")[0]


def _tables(pg, url: str, schema: str = "zeus") -> list[str]:
    rows = pg.sql(_db(url), "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1", (schema,))
    return [r[0] for r in rows]


def test_opening_writes_nothing_and_the_first_write_creates_the_schema(pg_server, pg_url):
    store = open_store(pg_url, get_registry(), job="a")
    assert store.info.version == 0 and store.get("x") is None and store.tries() == [] and store.identity() is None
    assert _tables(pg_server, pg_url) == []  # opened and read: nothing created
    with store.transaction() as tx:
        tx.set_identity({"job": {"eta_knob": 0.5}})
        tx.add_try(_rec(1))
        tx.set("runner", {"next_recurrence": 2})
    assert _tables(pg_server, pg_url) == ["jobs", "meta", "state", "tries"]
    again = open_store(pg_url, get_registry(), job="a")
    assert again.info.version == 1 and again.info.tries == 1 and again.info.identity == {"job": {"eta_knob": 0.5}}
    assert again.tries() == [_rec(1)] and again.get("runner") == {"next_recurrence": 2}
    store.close()
    again.close()


def test_jobs_share_one_database_and_stay_apart(pg_url):
    a, b = open_store(pg_url, get_registry(), job="a"), open_store(pg_url, get_registry(), job="b")
    with a.transaction() as tx:
        tx.set("k", 1)
        tx.add_try(_rec(1))
        tx.set_identity({"job": {"name": "a"}})
    with b.transaction() as tx:
        tx.set("k", 2)
        tx.add_try(_rec(1, bs=64))
        tx.add_try(_rec(2, bs=64))
    assert (a.get("k"), b.get("k")) == (1, 2)
    assert [t.batch_size for t in b.tries()] == [64, 64] and len(a.tries()) == 1
    assert a.identity() == {"job": {"name": "a"}} and b.identity() is None
    b.clear()
    assert b.tries() == [] and b.state_items() == {} and a.state_items() == {"k": 1} and len(a.tries()) == 1
    a.close()
    b.close()


def test_a_transaction_commits_all_or_nothing(pg_url):
    store = open_store(pg_url, get_registry(), job="a")
    with store.transaction() as tx:
        tx.set("counter", 1)
    with pytest.raises(RuntimeError, match="boom"):
        with store.transaction() as tx:
            tx.set("counter", 2)
            tx.add_try(_rec(1))
            raise RuntimeError("boom")
    with pytest.raises(ValueError):
        with store.transaction() as tx:
            tx.add_try(_rec(2))
            tx.set("bad", float("nan"))  # refused before it reaches the database, like SQLite's store
    assert store.get("counter") == 1 and store.tries() == []
    store.close()


def test_a_foreign_or_newer_schema_is_refused_unchanged_and_the_password_never_shown(pg_server, pg_url):
    db = _db(pg_url)
    pg_server.sql(db, "CREATE SCHEMA app; CREATE TABLE app.users (id int); INSERT INTO app.users VALUES (7)")
    with pytest.raises(StoreError) as e:
        open_store(pg_url + "?schema=app", get_registry(), job="a")
    text = str(e.value)
    assert "not a zeus store (users)" in text and "another schema with ?schema=NAME" in text and "Nothing was changed" in text
    assert PASSWORD not in text and "zeus:***@" in text
    assert pg_server.sql(db, "SELECT id FROM app.users") == [(7,)] and _tables(pg_server, pg_url, "app") == ["users"]

    with open_store(pg_url, get_registry(), job="a") as s, s.transaction() as tx:
        tx.set("k", 1)
    pg_server.sql(db, "UPDATE zeus.meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError) as e:
        open_store(pg_url, get_registry(), job="a")
    assert "newer zeus-plugins-postgres (schema 99" in str(e.value) and "pip install -U zeus-plugins-postgres" in str(e.value)
    assert PASSWORD not in str(e.value)
    assert pg_server.sql(db, "SELECT value FROM zeus.meta WHERE key = 'schema_version'") == [("99",)]


def test_a_wrong_password_or_a_missing_database_is_bad_input_and_a_down_server_is_unavailable(pg_server, pg_url):
    from zeus_core.backends import StoreUnavailable

    with pytest.raises(StoreError) as e:
        open_store(pg_url.replace(PASSWORD, "not-the-password"), get_registry(), job="a")
    assert not isinstance(e.value, StoreUnavailable) and "Check the user and password" in str(e.value)
    assert "not-the-password" not in str(e.value)
    with pytest.raises(StoreError) as e:
        open_store(pg_server.url("no_such_db"), get_registry(), job="a")
    assert not isinstance(e.value, StoreUnavailable) and "createdb" in str(e.value)
    from pg_server import free_port

    down = pg_url.replace(f":{pg_server.port}/", f":{free_port()}/")
    with pytest.raises(StoreUnavailable) as e:
        open_store(down, get_registry(), job="a")
    assert "cannot be reached" in str(e.value) and PASSWORD not in str(e.value)


def test_an_older_schema_is_migrated_forward_at_the_first_write(pg_server, pg_url, monkeypatch):
    from zeus_plugins_postgres import store as pgstore

    with open_store(pg_url, get_registry(), job="a") as s, s.transaction() as tx:
        tx.add_try(_rec(1))
        tx.set("k", {"v": 1})
    # A zeus-plugins-postgres whose layout is version 2: one more column.
    monkeypatch.setattr(pgstore, "SCHEMA_VERSION", 2)
    monkeypatch.setattr(pgstore, "MIGRATIONS", {1: ["ALTER TABLE {schema}.tries ADD COLUMN note text"]})
    db = _db(pg_url)
    column = "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'zeus' AND table_name = 'tries' AND column_name = 'note'"
    s = open_store(pg_url, get_registry(), job="a")
    assert s.info.version == 1 and pg_server.sql(db, column) == [(0,)]  # opening migrates nothing
    with s.transaction() as tx:
        tx.set("k", {"v": 2})
    assert pg_server.sql(db, column) == [(1,)]
    assert pg_server.sql(db, "SELECT value FROM zeus.meta WHERE key = 'schema_version'") == [("2",)]
    assert s.tries() == [_rec(1)] and s.get("k") == {"v": 2}
    s.close()
    monkeypatch.setattr(pgstore, "SCHEMA_VERSION", 1)  # an older plugin meets the migrated schema: refused
    with pytest.raises(StoreError, match="newer zeus-plugins-postgres"):
        open_store(pg_url, get_registry(), job="a")


def test_16_processes_x_25_recurrences_of_one_job_lose_nothing(pg_url, tmp_path):
    procs = [run_job(pg_url, 25, tmp_path) for _ in range(16)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
        assert PASSWORD not in out + err
    with open_store(pg_url, get_registry(), job="zeus-cifar100") as store:
        tries = check_history(store)
        assert store.get("runner")["next_recurrence"] == 401
    assert sorted({t.recurrence for t in tries}) == list(range(1, 401))


def test_dry_run_and_messages_never_show_the_password(pg_url, tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "zeus_core.cli", "run", str(CIFAR), "--dry-run", "--set", f'job.store="{pg_url}"'],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert r.returncode == 0, r.stderr
    assert PASSWORD not in r.stdout + r.stderr and "zeus:***@" in r.stdout
    plugins = subprocess.run([sys.executable, "-m", "zeus_core.cli", "plugins", "--json"], capture_output=True, text=True)
    postgres = next(p for p in json.loads(plugins.stdout) if p["name"] == "postgres")
    assert postgres["provides"] == {"store": ["postgres", "postgresql"]}


def _wait_for(predicate, timeout: float = 120, what: str = "") -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_the_server_stopped_mid_job_is_a_clear_exit_1_and_the_job_continues_when_it_is_back(own_pg_server, tmp_path):
    pg = own_pg_server
    url = pg.url(pg.create_database(), reconnect_s="1")
    db = _db(url)

    def committed() -> int:
        try:
            return pg.sql(db, "SELECT count(*) FROM zeus.tries")[0][0]
        except Exception:  # noqa: BLE001 - the schema is not there yet
            return 0

    job = run_job(url, 400, tmp_path)
    _wait_for(lambda: committed() >= 5 or job.poll() is not None, what="five tries")
    pg.stop("fast")
    out, err = job.communicate(timeout=120)
    err_first = out + err
    assert job.returncode == 1, err[-3000:]
    assert "run failed" in err and "cannot be reached" in err and "continues from what was committed" in err
    assert PASSWORD not in out + err and "zeus:***@" in err

    pg.start()
    pg.wait_until_up()
    with open_store(url, get_registry(), job="zeus-cifar100") as store:
        before = check_history(store, unfinished=1)  # nothing half-written: every stored try was observed
        taken = store.get("runner")["next_recurrence"] - 1
    again = run_job(url, 3, tmp_path)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err[-3000:]
    with open_store(url, get_registry(), job="zeus-cifar100") as store:
        after = check_history(store, unfinished=1)
        assert store.get("runner")["next_recurrence"] == taken + 4
        account = ledger(store)
    assert after[: len(before)] == before and {t.recurrence for t in after[len(before) :]} == {taken + 1, taken + 2, taken + 3}
    # The recurrence the outage stopped could not be recorded as abandoned then (the database was down); the
    # job's next run on this machine found its runner gone and recorded it.
    unreached = set(range(1, taken + 1)) - {t.recurrence for t in after if t.reached}
    assert account.open == {} and set(account.abandoned) == unreached
    assert all(a["reason"].endswith("ended without a result: killed, or its machine restarted") for a in account.abandoned.values())
    assert not unreached or f"recurrence {taken} is left open" in " ".join(err_first.split())


def test_text_comes_back_as_text_from_a_sql_ascii_database(pg_server):
    name = f"ascii{os.getpid()}"
    pg_server.sql("postgres", f"CREATE DATABASE {name} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    with open_store(pg_server.url(name), get_registry(), job="a") as s:
        with s.transaction() as tx:
            tx.add_try(TryRecord(1, 1, 32, None, 1, 1.0, 1.0, 1.0, False, stopped="early-stop", extra={"k": "é"}))
            tx.set_identity({"job": {"name": "a"}})
        (t,) = s.tries()
        assert t.stopped == "early-stop" and t.extra == {"k": "é"} and s.identity() == {"job": {"name": "a"}}


def test_store_commands_check_export_and_import_a_job_of_a_shared_database(pg_server, tmp_path):
    url = pg_server.url(pg_server.create_database())
    with open_store(url, get_registry(), job="a") as s, s.transaction() as tx:
        tx.set_identity({"job": {"eta_knob": 0.5}})
        tx.add_try(_rec(1))
        tx.set("runner", {"next_recurrence": 2, "min_cost": 1500.0})

    def zeus(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "zeus_core.cli", "store", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "COLUMNS": "400"},
        )

    r = zeus("check", url, "--job", "a")
    assert r.returncode == 0 and "1 tries" in r.stdout and "migrated" not in r.stdout and PASSWORD not in r.stdout
    r = zeus("check", url)
    assert r.returncode == 2 and "no job name was given" in r.stderr and PASSWORD not in r.stderr
    r = zeus("export", url, "--job", "a", "-o", str(tmp_path / "a.json"))
    assert r.returncode == 0, r.stderr
    assert zeus("import", str(tmp_path / "a.json"), url, "--job", "b").returncode == 0  # a copy, as another job
    assert zeus("import", str(tmp_path / "a.json"), str(tmp_path / "a.sqlite")).returncode == 0  # and as a SQLite file
    r = zeus("import", str(tmp_path / "a.json"), url, "--job", "a")
    assert r.returncode == 2 and "already holds a job" in r.stderr
    for where, job in ((url, "b"), (str(tmp_path / "a.sqlite"), None)):
        with open_store(where, get_registry(), job=job) as s:
            assert s.tries() == [_rec(1)] and s.identity() == {"job": {"eta_knob": 0.5}}
            assert s.get("runner") == {"next_recurrence": 2, "min_cost": 1500.0}


@pytest.mark.parametrize(
    "url, why",
    [
        ("postgresql://zeus:hunter2@[::1/zeus", "Invalid IPv6 URL"),
        ("postgresql://zeus:hunter2@db:port/zeus", "Port could not be cast"),
        ("postgresql://zeus:hunter2@db:99999/zeus", "Port out of range"),
    ],
)
def test_a_malformed_url_is_bad_input_naming_the_field_before_anything_runs(tmp_path, url, why):
    job = run_job(url, 1, tmp_path, "--output", str(tmp_path / "out"))
    out, err = job.communicate(timeout=120)
    assert job.returncode == 2, err
    assert "$.job.store" in err and why in err and "not a valid URL" in err and "Traceback" not in err
    assert "hunter2" not in out + err
    assert not (tmp_path / "out").exists()

"""A store from before stores recorded the job's identity (zeus-core 0.x: the unmarked layout, no
identity row) that holds a history: ``zeus store check`` says what it holds, and a run that continues
it warns that it cannot be checked that the history is of this setup (this GPU)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from concurrent_runners import zeus
from zeus_test_helpers import TOY_JOB, write_job

from zeus_core.engine.stores.sqlite import Store

#: The layout zeus-core wrote before stores were marked or recorded an identity.
_V1 = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE state (key TEXT PRIMARY KEY, value TEXT NOT NULL, version INTEGER NOT NULL DEFAULT 1);"
    "CREATE TABLE tries (id INTEGER PRIMARY KEY AUTOINCREMENT, recurrence INTEGER NOT NULL, try_index INTEGER NOT NULL,"
    " batch_size INTEGER NOT NULL, power_limit REAL, epochs INTEGER NOT NULL, time_s REAL NOT NULL, energy_j REAL NOT NULL,"
    " cost REAL NOT NULL, reached INTEGER NOT NULL, stopped TEXT, extra TEXT NOT NULL DEFAULT '{}', created REAL NOT NULL);"
    "CREATE TABLE journal (id INTEGER PRIMARY KEY AUTOINCREMENT, owner TEXT NOT NULL, key TEXT NOT NULL,"
    " original TEXT NOT NULL, pid INTEGER NOT NULL, created REAL NOT NULL);"
    "INSERT INTO meta VALUES ('schema', '1');"
)


@pytest.fixture
def old_store(tmp_path) -> Path:
    """20 tries of 20 recurrences, each reached, and the runner's counter: no identity."""
    path = tmp_path / ".zeus" / "toyjob.sqlite"
    path.parent.mkdir()
    c = sqlite3.connect(path)
    c.executescript(_V1)
    c.execute("INSERT INTO state (key, value) VALUES ('runner', '{\"next_recurrence\": 21, \"min_cost\": 1e12}')")
    c.executemany(
        "INSERT INTO tries (recurrence, try_index, batch_size, power_limit, epochs, time_s, energy_j, cost,"
        " reached, stopped, extra, created) VALUES (?, 1, 32, 200.0, 6, 10.0, 20.0, 1e12, 1, NULL, '{}', 0)",
        [(r,) for r in range(1, 21)],
    )
    c.commit()
    c.close()
    return path


def test_store_check_says_what_a_store_without_identity_holds(site, tmp_path, old_store):
    r = zeus(site, tmp_path, "store", "check", str(old_store))
    out = " ".join(r.stdout.split())
    assert r.returncode == 0, r.stderr
    assert "20 tries" in out and "recurrences: 20 begun, 0 abandoned, 0 open" in out
    assert "no recurrence has run" not in out
    assert "from before stores recorded the job's identity" in out and "cannot be checked" in out


def test_continuing_a_store_without_identity_warns_that_it_cannot_be_checked(site, tmp_path, old_store):
    job = write_job(tmp_path / "job.toml", TOY_JOB)
    r = zeus(site, tmp_path, "run", str(job), "--set", "job.recurrences=1")
    err = " ".join(r.stderr.split())
    assert r.returncode == 0, err
    assert f"{Path('.zeus') / 'toyjob.sqlite'} holds a history (20 recurrences) from a zeus-core that did not record" in err
    assert "cannot be checked that it is of this setup ([device] toy:" in err and "--fresh" in err
    with Store(old_store) as s:
        assert s.identity() is not None and len(s.tries()) == 21  # it records this run's identity from now on
    r = zeus(site, tmp_path, "run", str(job), "--set", "job.recurrences=1")
    assert r.returncode == 0 and "did not record the job's identity" not in r.stderr  # said once: it has one now

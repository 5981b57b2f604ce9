"""A job's SQLite store on a disk that fills up, and on read-only media (real tmpfs mounts:
tests/_support/filesystems.py).

A full disk mid-run is said as a full disk naming the file, exit 1, never "damaged" (the store is
fine, and the next run continues once space is freed); ``zeus store check``, ``zeus store export``
and ``zeus report`` read a store on read-only media, writing nothing; ``zeus store import`` into a
full disk says so and leaves no stub file.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from concurrent_runners import finish, killed_at_end, start_run, wait_until, zeus
from filesystems import fill, free_space, read_only, small_fs
from zeus_test_helpers import TOY_JOB, write_job

from zeus_core.engine.stores.sqlite import Store


@pytest.fixture
def job(tmp_path) -> Path:
    return write_job(tmp_path / "job.toml", TOY_JOB)


def _tries(path: Path) -> int:
    if not path.exists():
        return 0
    with Store(path) as s:
        return len(s.tries())


def _listing(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in folder.iterdir()}


def test_the_store_s_disk_filling_up_mid_run_is_a_full_disk_and_the_next_run_continues(site, job, tmp_path):
    with small_fs("1m") as root:
        store = root / "toy.sqlite"
        at = ("--set", f'job.store="{store}"')
        with killed_at_end([]) as procs:
            procs.append(start_run(site, job, tmp_path, *at, "--set", "job.recurrences=400", "--set", "workload.sleep_s=0.02"))
            wait_until(lambda: _tries(store) >= 3, procs, "three tries stored")
            fill(root)
            code, _, err = finish(procs[0])
        assert code == 1, err
        assert f"{store}: the disk is full" in err and "Free space and run again: the next run continues" in err
        assert "is damaged" not in err and "--fresh" not in err and "Traceback" not in err
        free_space(root)
        r = zeus(site, tmp_path, "store", "check", str(store))
        assert r.returncode == 0, r.stderr
        with Store(store) as s:
            before = max(t.recurrence for t in s.tries())
        code, _, err = finish(start_run(site, job, tmp_path, *at, "--set", "job.recurrences=1", "--set", "workload.sleep_s=0.02"))
        assert code == 0, err
        with Store(store) as s:
            assert max(t.recurrence for t in s.tries()) > before


@pytest.mark.parametrize("wal", [False, True], ids=["closed-store", "commits-in-its-wal"])
def test_store_check_export_and_report_read_a_store_on_read_only_media(site, job, tmp_path, wal):
    made = tmp_path / "made"
    made.mkdir()
    at = ("--set", f'job.store="{made / "toy.sqlite"}"')
    assert zeus(site, tmp_path, "run", str(job), *at, "--set", "job.recurrences=2").returncode == 0
    held = None
    if wal:  # a connection held open keeps the next run's commits in the WAL file (no checkpoint at its end)
        held = sqlite3.connect(made / "toy.sqlite")
        held.execute("PRAGMA wal_autocheckpoint = 0")
        held.execute("SELECT count(*) FROM tries").fetchone()
        assert zeus(site, tmp_path, "run", str(job), *at, "--set", "job.recurrences=1").returncode == 0
        assert (made / "toy.sqlite-wal").stat().st_size > 0
    with small_fs("4m") as root:
        for name in ("toy.sqlite", "toy.sqlite-wal"):  # the media: the store file and its WAL, no -shm
            if (made / name).exists():
                shutil.copyfile(made / name, root / name)
        if held is not None:
            held.close()
        store = root / "toy.sqlite"
        tries = 3 if wal else 2
        with read_only(root):
            before = _listing(root)
            r = zeus(site, tmp_path, "store", "check", str(store))
            assert r.returncode == 0 and f"{tries} tries" in r.stdout and "recurrences: " in r.stdout, r.stderr
            r = zeus(site, tmp_path, "store", "export", str(store), "-o", str(tmp_path / "e.json"))
            assert r.returncode == 0, r.stderr
            assert len(json.loads((tmp_path / "e.json").read_text())["tries"]) == tries
            r = zeus(site, tmp_path, "report", str(job), "--set", f'job.store="{store}"', "--output", str(tmp_path / "o"))
            assert r.returncode == 0, r.stderr
            assert json.loads((tmp_path / "o" / "summary.json").read_text())["tries"] == tries
            r = zeus(site, tmp_path, "run", str(job), "--set", f'job.store="{store}"', "--set", "job.recurrences=1")
            assert r.returncode == 1 and f"{store}: cannot write it: it is on a read-only file system" in r.stderr
            assert "is damaged" not in r.stderr and "Traceback" not in r.stderr
            assert _listing(root) == before


@pytest.mark.parametrize("leave", [0, 250_000], ids=["no-room-for-a-file", "room-for-the-schema-not-the-tries"])
def test_import_into_a_full_disk_says_so_and_leaves_no_stub(site, tmp_path, leave):
    tries = [
        {
            "recurrence": r,
            "try_index": 1,
            "batch_size": 32,
            "power_limit": 200.0,
            "epochs": 6,
            "time_s": 1.0,
            "energy_j": 2.0,
            "cost": 3.0,
            "reached": True,
            "stopped": None,
            "extra": {"note": "x" * 50},
            "steady_cost": None,
        }
        for r in range(1, 3001)
    ]  # about 400 kB in a store
    export = tmp_path / "e.json"
    export.write_text(
        json.dumps(
            {
                "format": "zeus-store",
                "version": 1,
                "identity": None,
                "state": {"runner": {"next_recurrence": 3001, "min_cost": 3.0}},
                "tries": tries,
            }
        )
    )
    with small_fs("1m") as root:
        fill(root, leave=leave)
        before = _listing(root)
        r = zeus(site, tmp_path, "store", "import", str(export), str(root / "new.sqlite"))
        assert r.returncode == 1, (r.stdout, r.stderr)
        err = " ".join(r.stderr.split())
        assert f"{root / 'new.sqlite'}: cannot import into it: the disk is full" in err, err
        assert "no file is left behind: free space on it and import again" in err
        assert "is damaged" not in err and "not a zeus store" not in err and "Traceback" not in err
        assert _listing(root) == before  # no stub, no -wal or -shm
        assert not os.path.exists(root / "new.sqlite")


def test_an_empty_store_file_on_read_only_media_is_no_store_yet_not_an_unwritable_folder(site, tmp_path):
    with small_fs("64k") as root:
        (root / "empty.sqlite").write_bytes(b"")
        with read_only(root):
            r = zeus(site, tmp_path, "store", "check", str(root / "empty.sqlite"))
    assert r.returncode == 2 and "an empty file, which is no store yet" in " ".join(r.stderr.split()), r.stderr

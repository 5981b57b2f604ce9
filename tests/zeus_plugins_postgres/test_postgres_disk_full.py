"""The PostgreSQL server's disk filling up mid-run (the job's tables in a tablespace on a small real
tmpfs): a full disk, said as such, exit 1, never "refused" or damaged; the next run continues once
space is freed."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest
from concurrent_runners import finish, killed_at_end, start_run, wait_until, zeus
from filesystems import fill, free_space, small_fs
from zeus_test_helpers import TOY_JOB, write_job

from zeus_core.engine.registry import get_registry
from zeus_core.engine.stores.locations import open_store


@pytest.fixture
def job(tmp_path) -> Path:
    return write_job(tmp_path / "job.toml", TOY_JOB)


def _tries(url: str) -> int:
    with open_store(url, get_registry(), job="toyjob") as s:
        return len(s.tries())


def test_the_server_s_disk_filling_up_mid_run_is_a_full_disk_and_the_next_run_continues(site, job, tmp_path, own_pg_server):
    pg = own_pg_server
    with small_fs("4m") as root:
        space = root / "ts"
        space.mkdir()
        if pg.user is not None:
            os.chown(space, pwd.getpwnam(pg.user).pw_uid, pwd.getpwnam(pg.user).pw_gid)
        db = pg.create_database()
        pg.sql("postgres", f"CREATE TABLESPACE small LOCATION '{space}'")
        pg.sql("postgres", f'ALTER DATABASE "{db}" SET default_tablespace = small')  # the job's tables go there
        url = pg.url(db)
        at = ("--set", f'job.store="{url}"')
        with killed_at_end([]) as procs:
            procs.append(start_run(site, job, tmp_path, *at, "--set", "job.recurrences=5000", "--set", "workload.sleep_s=0.01"))
            wait_until(lambda: _tries(url) >= 3, procs, "three tries stored")
            fill(root)
            code, _, err = finish(procs[0], timeout=300)
        assert code == 1, err
        assert "the database server's disk is full" in err and "the next run continues" in err, err
        assert "is damaged" not in err and "refused" not in err and "Traceback" not in err
        free_space(root)
        before = _tries(url)
        r = zeus(site, tmp_path, "store", "check", url, "--job", "toyjob")
        assert r.returncode == 0, r.stderr
        code, _, err = finish(start_run(site, job, tmp_path, *at, "--set", "job.recurrences=1", "--set", "workload.sleep_s=0.01"))
        assert code == 0, err
        assert _tries(url) > before
        pg.sql("postgres", f'DROP DATABASE "{db}"')
        pg.sql("postgres", "DROP TABLESPACE small")

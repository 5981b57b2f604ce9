"""``zeus run --fresh`` through ``zeus serve`` while another runner of the job is in the middle of a
recurrence: refused as a local store refuses it (naming the runner, exit 2, nothing changed), and
with ``--wait`` asked again until the runner has ended its recurrences. Real processes: a ``zeus
serve`` on loopback and ``zeus run`` clients of the toy job (its recurrences last seconds)."""

from __future__ import annotations

import os
import re

import httpx
from concurrent_runners import finish, killed_at_end, start_run, wait_until
from serve_helpers import Serve
from zeus_test_helpers import TOY_JOB, write_job

TOKEN = "serve-fresh-token-0123456789"
#: Recurrences of 3 s each (6 epochs of 0.5 s): long enough to act while one is open, even on a loaded machine.
SLOW = ("--set", "workload.sleep_s=0.5")


def _began(url: str) -> int:
    """How many recurrences the service has begun of the toy job (0 before its first)."""
    try:
        r = httpx.get(f"{url}/v1/jobs/toyjob", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    except httpx.HTTPError:
        return 0
    return r.json()["next_recurrence"] - 1 if r.status_code == 200 else 0


def _job(tmp_path, url: str):
    return write_job(tmp_path / "job.toml", TOY_JOB.replace('name = "toyjob"', f'name = "toyjob"\nstore = "{url}"'))


def test_fresh_through_the_service_is_refused_while_a_runner_holds_a_recurrence_and_waits_with_wait(site, tmp_path, monkeypatch):
    monkeypatch.setenv("ZEUS_SERVE_TOKEN", TOKEN)
    with Serve(str(tmp_path / "served"), token=TOKEN) as svc, killed_at_end([]) as procs:
        job = _job(tmp_path, svc.url)
        a = start_run(site, job, tmp_path, "--set", "job.recurrences=8", *SLOW)
        procs.append(a)
        wait_until(lambda: _began(svc.url) >= 1, procs, "runner A began a recurrence")

        b = start_run(site, job, tmp_path, "--fresh", "--set", "job.recurrences=1")
        procs.append(b)
        code, _, err = finish(b)
        assert code == 2, err
        assert "--fresh would throw away the job's history while other runners of the job are in the middle of it" in err
        assert f"(pid {a.pid} on " in err and "Nothing was changed" in err and "--wait" in err
        assert _began(svc.url) >= 1  # A's history is still there

        c = start_run(site, job, tmp_path, "--fresh", "--wait", "--set", "job.recurrences=1")
        procs.append(c)
        code_c, _, err_c = finish(c)
        code_a, _, err_a = finish(a)
    assert code_c == 0, err_c
    assert re.search(
        rf"--fresh --wait: waiting for the job's other runners to end their recurrences \(recurrence \d+ \(pid {a.pid} ", err_c
    ), err_c
    # A ended its run, or (C started over between two of its recurrences) stopped naming the clear
    assert code_a == 0 or (code_a == 1 and "history was cleared under this run" in err_a), err_a
    with Serve(str(tmp_path / "served"), token=TOKEN) as again:
        assert _began(again.url) == 1  # the history C started over holds C's one recurrence
    assert not os.path.exists(tmp_path / ".zeus")  # nothing went to a local store

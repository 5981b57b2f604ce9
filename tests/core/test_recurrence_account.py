"""Every recurrence number a run takes ends accounted for: a try that reached the target, or an
"abandoned" record with the reason, which summary.json, `zeus report` and `zeus store check` show.

A run that fails or is interrupted records its recurrence as abandoned itself; one that is
killed (SIGKILL) cannot, and the job's next run on the machine finds its process gone and
records it then.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from zeus_test_helpers import TOY_JOB, ended, run_cli, signals_ignored, start, toy_registry, write_job

from zeus_core import TryRecord
from zeus_core.engine.history import History, TryPlan, ledger
from zeus_core.engine.owner import is_gone, this_process
from zeus_core.engine.stores.locations import open_store
from zeus_core.engine.stores.sqlite import Store
from zeus_core.engine.validation import load_job

STORE = Path(".zeus") / "toyjob.sqlite"


@pytest.fixture
def reg(toy_plugin):
    return toy_registry(toy_plugin)


@pytest.fixture
def job(tmp_path) -> Path:
    return write_job(tmp_path / "job.toml", TOY_JOB)


def test_a_failed_try_leaves_its_recurrence_abandoned_with_the_reason_everywhere(reg, job, tmp_path):
    assert run_cli(reg, "run", str(job), "--set", "job.recurrences=2").exit_code == 0
    r = run_cli(reg, "run", str(job), "--fresh", "--set", "workload.fail_at_try=2", "--output", str(tmp_path / "o"))
    assert r.exit_code == 1 and "toy training crashed" in r.output
    with Store(STORE) as s:
        account = ledger(s)
        assert account.begun == 2 and account.open == {}
        assert list(account.abandoned) == [2]
        reason = account.abandoned[2]["reason"]
    assert reason.startswith("RunFailed: recurrence 2, try 1 (batch size 32) failed in the workload: RuntimeError: toy training crashed")
    # zeus report (of the same setup) says what happened to 2
    r = run_cli(reg, "report", str(job), "--set", "workload.fail_at_try=2", "--output", str(tmp_path / "o"))
    assert r.exit_code == 0 and "1 recurrence abandoned: 2 (RunFailed: recurrence 2, try 1" in " ".join(r.output.split())
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["begun"] == 2 and summary["recurrences"] == 1 and summary["open"] == []
    assert summary["abandoned"] == [{"recurrence": 2, "reason": reason}]
    r = run_cli(reg, "store", "check", str(STORE))
    assert r.exit_code == 0 and "recurrences: 2 begun, 1 abandoned, 0 open" in r.output and "abandoned 2: RunFailed" in r.output


def test_a_recurrence_that_never_reaches_the_target_is_abandoned_after_max_tries(reg, job):
    r = run_cli(reg, "run", str(job), "--set", "batch_size.default=256", "--set", "job.max_tries=2")
    assert r.exit_code == 1 and "did not reach the target metric in 2 tries" in r.output
    with Store(STORE) as s:
        account = ledger(s)
        assert [t.try_index for t in s.tries()] == [1, 2]
    assert account.open == {} and account.abandoned[1]["reason"] == "no try reached the target in job.max_tries = 2 tries"


def test_a_try_that_reaches_the_target_closes_a_recurrence_taken_for_abandoned(reg, job, tmp_path):
    """A runner taken for gone that comes back: its row wins, the recurrence is not counted twice."""
    spec = load_job(job, reg)
    with open_store(str(tmp_path / "s.sqlite"), reg) as store:
        h = History(spec.job, store, None, identity=spec.identity(), max_power_w=300.0)
        rec = h.begin_recurrence()
        assert h.abandon(rec, "taken for gone") is True and h.abandon(rec, "twice") is False
        plan = TryPlan(rec, 1, 32, float("inf"), h.policy_context(rec, 1, float("inf")))
        h.record(plan, TryRecord(rec, 1, 32, None, 3, 1.0, 2.0, 3.0, True), recurrence_cost=3.0)
        account = ledger(store)
    assert account.begun == 1 and account.open == {} and account.abandoned == {}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("started_ignoring", [False, True], ids=["as-from-a-terminal", "runner-ignores-the-signal"])
def test_a_signal_records_the_recurrence_it_stopped_as_abandoned(site, job, tmp_path, sig, started_ignoring):
    """Whatever the test runner was started with (``started_ignoring``: in a shell's background, it ignores
    SIGINT), the runner under test gets the signal at its default action, as from a terminal."""
    env = dict(os.environ, PYTHONPATH=str(site))
    with (
        signals_ignored(*([sig] if started_ignoring else [])),
        ended(
            start(
                [
                    sys.executable,
                    "-m",
                    "zeus_core.cli",
                    "run",
                    str(job),
                    "--set",
                    "job.recurrences=50",
                    "--set",
                    "workload.sleep_s=10",
                    "--output",
                    str(tmp_path / "o"),
                ],
                env=env,
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        ) as proc,
    ):
        _wait_for_open(tmp_path / STORE, proc)  # recurrence 1 sleeps 10 s in its first epoch: the signal lands in it
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    with Store(tmp_path / STORE) as s:
        account = ledger(s)
        reached = {t.recurrence for t in s.tries() if t.reached}
    assert account.open == {} and {n: a["reason"] for n, a in account.abandoned.items()} == {account.begun: f"interrupted by {sig.name}"}
    assert reached == set(range(1, account.begun))
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["abandoned"] == [{"recurrence": account.begun, "reason": f"interrupted by {sig.name}"}]


def _wait_for_open(path: Path, proc: subprocess.Popen, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        if path.exists():
            with Store(path) as s:
                account = ledger(s)
            if account.open:
                return next(iter(account.open))
        time.sleep(0.05)
    raise AssertionError("no recurrence was begun in time")


def test_a_killed_runner_s_recurrence_is_recorded_abandoned_by_the_next_run(site, reg, job, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(site))
    proc = start(
        [sys.executable, "-m", "zeus_core.cli", "run", str(job), "--set", "job.recurrences=5", "--set", "workload.sleep_s=60"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        rec = _wait_for_open(tmp_path / STORE, proc)  # recurrence 1, asleep in its first epoch for a minute
    finally:
        proc.kill()
        proc.communicate()
    with Store(tmp_path / STORE) as s:
        owner = ledger(s).open[rec]["owner"]
    assert owner["pid"] == proc.pid and is_gone(owner) and not is_gone(this_process())
    with Store(tmp_path / STORE) as s:  # the job's next runner on this machine takes its first number
        spec = load_job(job, reg, ["workload.sleep_s=60"])
        assert History(spec.job, s, None, identity=s.identity(), max_power_w=300.0).begin_recurrence() == 2
        account = ledger(s)
    assert account.begun == 2 and list(account.open) == [2]
    assert account.abandoned[1]["reason"] == (
        f"its runner (pid {proc.pid} on {owner['host']}) ended without a result: killed, or its machine restarted"
    )


def test_an_owner_is_gone_when_its_pid_is_reused_or_the_machine_restarted():
    me = this_process()
    assert not is_gone(me)
    assert is_gone({**me, "start": me["start"] + 1})  # the same pid, another process
    assert is_gone({**me, "boot": "another-boot"})
    assert not is_gone({**me, "host": "another-host"})  # not for this host to tell
    assert not is_gone({"host": me["host"], "pid": "x"}) and not is_gone(None)


def test_a_script_that_closes_its_optimizer_mid_recurrence_abandons_it(reg, tmp_path):
    from zeus_core import BatchSizeOptimizer

    with BatchSizeOptimizer(
        job="script", policy="fixed", batch_sizes=[32], default=32, max_power_w=300.0, store=str(tmp_path / "s.sqlite"), registry=reg
    ) as bso:
        t = bso.next()
        bso.report(t, energy_j=10.0, time_s=1.0, reached=True)
        bso.next()  # the script stops here (an exception, a break)
    with Store(tmp_path / "s.sqlite") as s:
        account = ledger(s)
    assert account.begun == 2 and account.open == {}
    assert account.abandoned[2]["reason"] == "the script closed its BatchSizeOptimizer before a try reached the target"

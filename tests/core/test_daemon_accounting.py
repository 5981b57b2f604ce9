"""The node daemon's energy accounting (zeus_core.daemon.accounting) on scripted GPU readings.

The readings are what a GPU service's ``read_processes`` answers; the accountant's own thread
reads every hour here, so only the test's reads count. The real daemon, driver and Slurm hooks
are tests/core/test_slurm_shared_gpu.py's.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from zeus_core.daemon.accounting import Accountant, scheduler_of


class Script:
    """A GPU whose counter and processes the test sets between reads."""

    def __init__(self) -> None:
        self.energy_mj = 1_000_000
        self.processes: list[dict] = []
        self.idle_w: float | None = None

    def read(self, index: int, since: float) -> dict:
        activity = {"processes": self.processes, "scope": "process", "idle_w": self.idle_w, "idle_source": "configured", "note": ""}
        return {"energy_mj": self.energy_mj, "activity": activity}


def proc(pid: int, sm: float) -> dict:
    return {"pid": pid, "sm": sm, "instance": "", "user": "u", "command": "c"}


def test_energy_between_reads_is_charged_by_sm_share_and_a_read_without_samples_keeps_the_last_shares():
    gpu = Script()
    acc = Accountant([0], gpu.read, interval_s=3600)
    try:
        gpu.processes = [proc(11, 60), proc(12, 20)]
        gpu.energy_mj += 400_000
        acc.tick()
        gpu.processes = [proc(11, 0), proc(12, 0)]  # read again sooner than the driver samples: no sample
        gpu.energy_mj += 100_000
        totals = acc.totals([0])["0"]
    finally:
        acc.close()
    by_pid = {p["pid"]: p["energy_j"] for p in totals["processes"]}
    assert by_pid == {11: pytest.approx(375.0), 12: pytest.approx(125.0)}  # 3:1 both times, not 1:1 the second
    assert totals["total_j"] == pytest.approx(500.0) and totals["unattributed_j"] == 0.0
    assert totals["bases"] == ["sm"] and totals["estimate"] is True


def test_energy_with_no_process_is_unattributed_and_a_counter_that_goes_back_charges_nothing():
    gpu = Script()
    gpu.idle_w = 50.0
    acc = Accountant([0], gpu.read, interval_s=3600)
    try:
        gpu.energy_mj += 30_000
        acc.tick()
        gpu.energy_mj -= 500_000  # a driver reload restarts the counter
        acc.tick()
        gpu.energy_mj += 10_000
        totals = acc.totals([0])["0"]
    finally:
        acc.close()
    assert totals["total_j"] == pytest.approx(40.0) and totals["unattributed_j"] == pytest.approx(40.0)
    assert totals["processes"] == [] and totals["bases"] == ["none"]


def test_a_processs_scheduler_context_comes_from_its_environment():
    env = {
        "PATH": os.environ.get("PATH", ""),
        "SLURM_JOB_ID": "77",
        "POD_NAME": "trainer-0",
        "POD_NAMESPACE": "ml",
        "WORLD_SIZE": "2",
        "RANK": "1",
    }
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(30)"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        ctx = scheduler_of(child.pid)
    finally:
        child.kill()
        child.communicate()
    assert (ctx["slurm_job_id"], ctx["k8s_pod"], ctx["k8s_namespace"], ctx["torch_rank"]) == ("77", "trainer-0", "ml", "1")
    assert scheduler_of(child.pid) == {}  # gone: nothing to say

"""Two Slurm jobs on one GPU, each charged its own share by the node daemon's energy accounting.

A real ``zeus daemon`` process serves two simulated GPUs; each job is a real process started with
the ``SLURM_JOB_ID`` Slurm gives its tasks, listed on the simulated GPU with its SM utilisation.
The prolog and the epilog run as processes with the environment slurmd gives them; the daemon's
``/gpu/get_attributed_energy`` route is asked over its real Unix socket.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from http_nodes import HttpNode

from zeus_core.cli.slurm import FIELDS, charge
from zeus_core.daemon.nodeclient import Endpoint, NodeClient, NodeError
from zeus_plugins_nvml import fake_pynvml

ZEUS = [sys.executable, "-m", "zeus_core.cli"]


@pytest.fixture
def node(monkeypatch):
    """A daemon on two GPUs (idle 60 W; GPU 1 busy at 320 W), the simulated driver installed here too."""
    daemon = HttpNode(gpus=2)
    gpus = [fake_pynvml.FakeGpu(demand_w=w, idle_w=60.0) for w in (100.0, 320.0)]
    fake_pynvml.create(daemon.driver, gpus, privileged=True)
    fake_pynvml.install(daemon.driver, monkeypatch)
    try:
        yield daemon.start()
    finally:
        daemon.remove()


@pytest.fixture
def task():
    """``task(job)``: a real process of Slurm job ``job`` (its environment says so), killed at the end."""
    started = []

    def start(job: str) -> int:
        env = {**os.environ, "SLURM_JOB_ID": job, "POD_NAME": f"pod-{job}", "POD_NAMESPACE": "research"}
        code = "import time; print('ready', flush=True); time.sleep(60)"
        p = subprocess.Popen([sys.executable, "-c", code, f"task-of-{job}"], env=env, stdout=subprocess.PIPE, text=True)
        started.append(p)
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        return p.pid

    yield start
    for p in started:
        p.kill()
        p.communicate()


def hook(node: HttpNode, job: str, which: str, gpus: str) -> None:
    env = {
        "SLURM_JOB_ID": job,
        "SLURM_JOB_UID": str(os.getuid()),
        "SLURM_JOB_USER": f"user{job}",
        "SLURM_JOB_GPUS": gpus,
        "SLURM_JOB_EXIT_CODE2": "0:0",
        "ZEUSD_SOCK_PATH": str(node.socket),
        "ZEUS_SLURM_STATE": str(node.root / "state"),
        "ZEUS_SLURM_RECORD": str(node.root / "jobs.jsonl"),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    r = subprocess.run([*ZEUS, "slurm", which], env=env, capture_output=True, text=True, timeout=60, cwd="/")
    assert r.returncode == 0 and r.stderr == "", r.stderr


def attributed(node: HttpNode, **params: str) -> dict:
    client = NodeClient(Endpoint(socket_path=str(node.socket)))
    try:
        return client.get("/gpu/get_attributed_energy", **params)
    finally:
        client.close()


def counter_j(node: HttpNode) -> float:
    client = NodeClient(Endpoint(socket_path=str(node.socket)))
    try:
        return client.get("/gpu/get_cumulative_energy", gpu_ids="1")["1"]["energy_mj"] / 1000
    finally:
        client.close()


def test_two_jobs_sharing_a_gpu_are_each_charged_their_share_and_a_lone_job_its_gpu(node, task):
    before = counter_j(node)
    for job, gpus in (("301", "1"), ("302", "1"), ("303", "0")):
        hook(node, job, "prolog", gpus)
    # then the jobs' tasks start
    a, b, c = task("301"), task("302"), task("303")
    fake_pynvml.set_processes(1, [{"pid": a, "sm": 60}, {"pid": b, "sm": 20}])  # jobs 301 and 302 share GPU 1, 3:1
    fake_pynvml.set_processes(0, [{"pid": c, "sm": 30}])  # job 303 alone on GPU 0
    # the accountant's readings, a second apart (later on a loaded machine): until they charged the
    # processes at least the least the jobs' records must show below (about two seconds of GPU 1)
    deadline = time.monotonic() + 60
    while (got := attributed(node, gpu_ids="1")["1"])["processes_j"] <= 0.5 * 320.0 * 2.0:
        assert time.monotonic() < deadline, got
        time.sleep(0.2)
    # before the tasks: nobody to charge ("none", unattributed); then shares by SM utilisation
    assert got["estimate"] is True and got["bases"] == ["none", "sm"] and got["scopes"] == ["process"]
    assert got["unattributed_j"] > 0 and got["processes_j"] > 0
    by_pid = {p["pid"]: p for p in got["processes"]}
    assert (by_pid[a]["slurm_job_id"], by_pid[b]["slurm_job_id"]) == ("301", "302")
    assert "task-of-301" in by_pid[a]["command"] and by_pid[a]["user"]
    assert by_pid[b]["scheduler"]["slurm_job_id"] == "302" and by_pid[b]["scheduler"]["k8s_pod"] == "pod-302"
    assert got["total_j"] == pytest.approx(got["idle_j"] + got["active_j"])
    assert got["jobs"]["301"] == pytest.approx(3 * got["jobs"]["302"], rel=1e-6)
    # the jobs' processes end; their samples were charged as they ran
    fake_pynvml.set_processes(1, [])
    fake_pynvml.set_processes(0, [])
    for job, gpus in (("301", "1"), ("302", "1"), ("303", "0")):
        hook(node, job, "epilog", gpus)
    drawn = counter_j(node) - before  # GPU 1's energy from before the first prolog to after the last epilog
    recs = {r["job_id"]: r for r in map(json.loads, (node.root / "jobs.jsonl").read_text().splitlines())}
    assert all(list(r) == list(FIELDS) for r in recs.values())
    j1, j2, j3 = recs["301"], recs["302"], recs["303"]
    assert (j1["charge"], j2["charge"], j3["charge"]) == ("estimate", "estimate", "measured")
    assert j1["charged_energy_j"] == pytest.approx(3 * j2["charged_energy_j"], rel=1e-6)
    # the two shares are at most what GPU 1 drew around the jobs, and far more than nothing
    assert 0.5 * 320.0 * 2.0 < j1["charged_energy_j"] + j2["charged_energy_j"] <= drawn
    assert j1["charged_energy_j"] < j1["energy_j"] and j2["charged_energy_j"] < j2["energy_j"]
    assert j3["charged_energy_j"] == j3["energy_j"] and j3["gpu_charged_energy_j"] == j3["gpu_energy_j"]
    report = subprocess.run([*ZEUS, "slurm", "report", str(node.root / "jobs.jsonl"), "--json"], capture_output=True, text=True, timeout=60)
    totals = json.loads(report.stdout)["energy_j_by_user"]
    assert totals["user301"] == pytest.approx(j1["charged_energy_j"]) and totals["user303"] == pytest.approx(j3["energy_j"])


def test_the_route_refuses_a_gpu_it_does_not_serve(node):
    with pytest.raises(NodeError) as e:
        attributed(node, gpu_ids="7")
    assert e.value.status == 400


def test_charge_without_accounting_or_with_unidentified_processes_is_the_measured_energy():
    assert charge("9", {"0": 100.0}, None, None) == ({"0": 100.0}, "measured")
    end = {0: {"processes_j": 80.0, "jobs": {"8": 80.0}}}
    assert charge("9", {"0": 100.0}, {"0": {"processes_j": 0.0}}, end) == ({"0": 100.0}, "measured-whole-gpu")
    assert charge("8", {"0": 100.0}, {"0": {"processes_j": 0.0}}, end) == ({"0": 100.0}, "measured")  # alone
    end = {0: {"processes_j": 100.0, "jobs": {"8": 70.0, "9": 30.0}}}  # 8 was charged 10 J before its start
    assert charge("8", {"0": 95.0}, {"0": {"processes_j": 10.0, "job_j": 10.0}}, end) == ({"0": 60.0}, "estimate")

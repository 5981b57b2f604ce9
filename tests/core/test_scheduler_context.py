"""The scheduler's context (zeus_core.scheduler): read from the environment as Slurm, Kubernetes and
torchrun set it, recorded with every try (recurrences.csv columns after the others, summary.json) and
every window of a monitor's log; nothing at all outside a scheduler (tests/conftest.py clears the
scheduler's variables for every test)."""

from __future__ import annotations

import csv
import json
import os
import pwd
from pathlib import Path

import pytest
from zeus_test_helpers import TOY_JOB, run_cli, toy_registry, write_job

from zeus_core import Monitor
from zeus_core.results import ENERGY_COLUMNS, TRY_COLUMNS
from zeus_core.scheduler import ALL_COLUMNS, context

SLURM = {
    "SLURM_JOB_ID": "4242",
    "SLURM_STEP_ID": "0",
    "SLURM_JOB_USER": "alice",
    "SLURM_JOB_NAME": "train",
    "SLURM_CLUSTER_NAME": "hpc1",
}


def test_outside_any_scheduler_there_is_no_context(tmp_path):
    assert context({}, service_account=tmp_path) == {}
    assert context({"HOSTNAME": "box", "SLURM_JOB_ID": " ", "POD_NAME": ""}, service_account=tmp_path) == {}


def test_slurm_context_and_the_users_name_from_its_uid(tmp_path):
    assert context(SLURM, service_account=tmp_path) == {
        "slurm_job_id": "4242",
        "slurm_step_id": "0",
        "slurm_user": "alice",
        "slurm_job_name": "train",
        "slurm_cluster": "hpc1",
    }
    # a prolog's environment names the uid only; an unnamed uid stays a number
    assert context({"SLURM_JOB_ID": "7", "SLURM_JOB_UID": "0"}, service_account=tmp_path)["slurm_user"] == pwd.getpwuid(0).pw_name
    assert context({"SLURM_JOB_ID": "7", "SLURM_JOB_UID": "4000000000"}, service_account=tmp_path)["slurm_user"] == "4000000000"
    got = context({"SLURM_JOB_ID": "7"}, service_account=tmp_path)
    assert got["slurm_user"] == pwd.getpwuid(os.getuid()).pw_name and got["slurm_step_id"] == ""


def test_kubernetes_from_the_downward_api_or_the_pod_itself(tmp_path):
    env = {"POD_NAME": "train-7f9c", "POD_NAMESPACE": "research", "CONTAINER_NAME": "trainer"}
    assert context(env, service_account=tmp_path) == {"k8s_pod": "train-7f9c", "k8s_namespace": "research", "k8s_container": "trainer"}
    # without the downward API: the pod's hostname is its name, the service account names the namespace
    (tmp_path / "namespace").write_text("batch\n")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "train-abc12"}
    assert context(env, service_account=tmp_path) == {"k8s_pod": "train-abc12", "k8s_namespace": "batch", "k8s_container": ""}
    assert context(env, service_account=tmp_path / "absent")["k8s_namespace"] == ""
    # a hostname, a container's name or a rank alone is no pod and no torchrun (other tools set them)
    assert context({"HOSTNAME": "laptop", "CONTAINER_NAME": "dev-box", "RANK": "0", "LOCAL_RANK": "0"}, service_account=tmp_path) == {}


def test_torchrun_ranks_with_slurm(tmp_path):
    env = {**SLURM, "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "r1"}
    got = context(env, service_account=tmp_path)
    assert list(got) == [c for c in ALL_COLUMNS if c.startswith(("slurm_", "torch_"))]
    assert (got["torch_rank"], got["torch_local_rank"], got["torch_world_size"], got["torch_run_id"]) == ("3", "1", "4", "r1")


def test_every_try_carries_its_slurm_job(toy_plugin, tmp_path, monkeypatch):
    reg = toy_registry(toy_plugin)
    job = write_job(tmp_path / "job.toml", TOY_JOB)
    assert run_cli(reg, "run", str(job), "--output", "plain").exit_code == 0
    plain = (Path("plain") / "recurrences.csv").read_text()
    # outside a scheduler: the file as before, then how the energy was measured and its bound (issue 37)
    assert plain.splitlines()[0] == ",".join([*TRY_COLUMNS, *ENERGY_COLUMNS])
    assert "scheduler" not in json.loads((Path("plain") / "summary.json").read_text())

    for var, value in SLURM.items():
        monkeypatch.setenv(var, value)
    r = run_cli(reg, "run", str(job), "--set", "job.recurrences=2", "--output", "out")
    assert r.exit_code == 0, r.output
    with open("out/recurrences.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [
        *TRY_COLUMNS,
        "slurm_job_id",
        "slurm_step_id",
        "slurm_user",
        "slurm_job_name",
        "slurm_cluster",
        *ENERGY_COLUMNS,
    ]
    # the first run's three tries ran outside Slurm (empty cells), this run's two in job 4242
    assert [r["slurm_job_id"] for r in rows] == ["", "", "", "4242", "4242"]
    assert {(r["slurm_user"], r["slurm_job_name"], r["slurm_cluster"]) for r in rows[3:]} == {("alice", "train", "hpc1")}
    summary = json.loads(Path("out/summary.json").read_text())
    assert summary["scheduler"] == [
        {"slurm_job_id": "4242", "slurm_step_id": "0", "slurm_user": "alice", "slurm_job_name": "train", "slurm_cluster": "hpc1"}
    ]


def test_every_window_of_the_log_carries_the_pod(toy_plugin, tmp_path, monkeypatch):
    plain, podded = tmp_path / "plain.csv", tmp_path / "pod.csv"
    with Monitor(_devices(toy_plugin), log_file=plain) as mon:
        assert mon.scheduler == {}
        mon.begin_window("w")
        mon.end_window("w")
    assert plain.read_text().splitlines()[0].endswith(",sources")
    monkeypatch.setenv("POD_NAME", "train-7f9c")
    monkeypatch.setenv("POD_NAMESPACE", "research")
    monkeypatch.delenv("CONTAINER_NAME", raising=False)  # (set by some container tools outside any pod)
    with Monitor(_devices(toy_plugin), log_file=podded) as mon:
        for name in ("a", "b"):
            mon.begin_window(name)
            mon.end_window(name)
    with open(podded) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[-4:] == ["sources", "k8s_pod", "k8s_namespace", "k8s_container"]
    assert [(r["window_name"], r["k8s_pod"], r["k8s_namespace"], r["k8s_container"]) for r in rows] == [
        ("a", "train-7f9c", "research", ""),
        ("b", "train-7f9c", "research", ""),
    ]
    # the same log outside the pod is another file, not a silently mixed one
    monkeypatch.delenv("POD_NAME")
    monkeypatch.delenv("POD_NAMESPACE")
    with pytest.raises(ValueError, match="existing window log has columns"):
        Monitor(_devices(toy_plugin), log_file=podded)


def _devices(toy_plugin):
    return toy_plugin.ToyDevice(toy_plugin.ToyDeviceOptions(), None)

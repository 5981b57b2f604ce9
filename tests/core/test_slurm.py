"""``zeus slurm prolog|epilog|report``: each Slurm job charged the energy of its GPUs by the node daemon.

Every test talks to a real ``zeus daemon`` process serving two simulated GPUs that draw 80 W and
320 W (so a job charged the wrong GPU is caught). The first tests run the prolog and the epilog as
processes with the environment Slurm gives them; the last starts a real Slurm on loopback in a
temporary folder (``munged`` with its own key, ``slurmctld``, ``slurmd`` with two GPU GRES on
links to /dev/null) and runs jobs through it: ``sbatch`` and ``srun``, one failing, one
cancelled mid-run with ``scancel``. Slurm needs root and its Debian packages (``slurmctld``,
``slurmd``, ``slurm-client``, ``munge``): without them that test skips, or fails where
``ZEUS_REQUIRE_SERVERS=1`` (CI installs them).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cluster_helpers import server_missing
from http_nodes import HttpNode

from zeus_core.cli.slurm import FIELDS, append_record, job_state
from zeus_core.daemon.nodeclient import Endpoint, NodeClient
from zeus_plugins_nvml import fake_pynvml

REPO = Path(__file__).resolve().parents[2]
ZEUS = [sys.executable, "-m", "zeus_core.cli"]
#: what each simulated GPU draws, W
DRAW_W = {0: 80.0, 1: 320.0}


def energy_j(node: HttpNode) -> dict[int, float]:
    """Each GPU's energy counter (J), asked of the node's daemon as the hooks ask it."""
    client = NodeClient(Endpoint(socket_path=str(node.socket)))
    try:
        got = client.get("/gpu/get_cumulative_energy")
    finally:
        client.close()
    return {int(k): v["energy_mj"] / 1000 for k, v in got.items()}


@pytest.fixture
def node():
    """A ``zeus daemon`` process (under /tmp: a Unix socket's path is short) on two GPUs drawing :data:`DRAW_W`."""
    daemon = HttpNode(gpus=2)
    fake_pynvml.create(daemon.driver, [fake_pynvml.FakeGpu(demand_w=DRAW_W[i]) for i in (0, 1)], privileged=True)
    try:
        yield daemon.start()
    finally:
        daemon.remove()


def slurm_env(node: HttpNode, job: str, **extra: str) -> dict[str, str]:
    """The environment slurmd gives a Prolog/Epilog (no PATH, no HOME), with the daemon and the files named."""
    env = {
        "SLURM_JOB_ID": job,
        "SLURM_JOB_UID": str(os.getuid()),
        "SLURM_JOB_USER": "alice",
        "SLURM_JOB_GID": str(os.getgid()),
        "SLURM_JOB_PARTITION": "gpu",
        "SLURM_CLUSTER_NAME": "hpc1",
        "SLURMD_NODENAME": "node7",
        "ZEUSD_SOCK_PATH": str(node.socket),
        "ZEUS_SLURM_STATE": str(node.root / "state"),
        "ZEUS_SLURM_RECORD": str(node.root / "jobs.jsonl"),
    }
    env.update(extra)
    return env


def hook(env: dict[str, str], which: str) -> subprocess.CompletedProcess:
    return subprocess.run([*ZEUS, "slurm", which], env=env, capture_output=True, text=True, timeout=60, cwd="/")


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# --------------------------------------------------------------------------- the hooks, as slurmd runs them


def test_a_job_is_charged_the_energy_of_its_own_gpu(node):
    before = energy_j(node)
    env = slurm_env(node, "101", SLURM_JOB_GPUS="1", SLURM_SCRIPT_CONTEXT="prolog_slurmd")
    r = hook(env, "prolog")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert json.loads((node.root / "state" / "101.json").read_text())["gpus"] == [1]
    time.sleep(1.0)
    r = hook({**env, "SLURM_SCRIPT_CONTEXT": "epilog_slurmd", "SLURM_JOB_EXIT_CODE2": "0:0"}, "epilog")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    after = energy_j(node)
    (rec,) = records(node.root / "jobs.jsonl")
    assert list(rec) == list(FIELDS)
    assert (rec["job_id"], rec["user"], rec["cluster"], rec["partition"], rec["node"]) == ("101", "alice", "hpc1", "gpu", "node7")
    assert (rec["state"], rec["exit_code"], rec["gpus"], rec["error"]) == ("completed", "0:0", [1], None)
    assert set(rec["gpu_energy_j"]) == {"1"} and rec["energy_j"] == rec["gpu_energy_j"]["1"]
    # within what GPU 1 drew over the whole test, and at GPU 1's draw (320 W), not GPU 0's (80 W)
    assert 0 < rec["energy_j"] <= after[1] - before[1]
    assert rec["duration_s"] >= 1.0
    assert DRAW_W[1] / 2 < rec["energy_j"] / rec["duration_s"] < DRAW_W[1] * 2
    assert not (node.root / "state" / "101.json").exists()  # the job's readings are gone with it


def test_without_a_gpu_list_the_job_has_every_gpu_and_a_cancelled_job_says_so(node):
    env = slurm_env(node, "102", CUDA_VISIBLE_DEVICES="")
    assert hook(env, "prolog").returncode == 0
    time.sleep(0.5)
    assert hook({**env, "SLURM_JOB_EXIT_CODE2": "0:15"}, "epilog").returncode == 0
    (rec,) = records(node.root / "jobs.jsonl")
    assert rec["gpus"] == [0, 1] and set(rec["gpu_energy_j"]) == {"0", "1"}
    assert rec["gpu_energy_j"]["1"] > 2 * rec["gpu_energy_j"]["0"] > 0  # 320 W against 80 W
    assert (rec["state"], rec["exit_code"]) == ("cancelled", "0:15")


def test_a_daemon_that_is_gone_is_recorded_not_fatal(node):
    env = slurm_env(node, "103", SLURM_JOB_GPUS="0", ZEUSD_SOCK_PATH=str(node.root / "nobody-here.sock"))
    r = hook(env, "prolog")
    assert r.returncode == 0 and "job 103" in r.stderr  # slurmd would drain the node on a non-zero exit
    r = hook({**env, "ZEUSD_SOCK_PATH": str(node.socket), "SLURM_JOB_EXIT_CODE2": "3:0"}, "epilog")
    assert r.returncode == 0
    (rec,) = records(node.root / "jobs.jsonl")
    assert rec["energy_j"] is None and rec["gpu_energy_j"] is None and rec["state"] == "failed"
    assert "at the job's start" in rec["error"] and "nobody-here.sock" in rec["error"]
    # an epilog without its prolog's readings still records the job
    r = hook(slurm_env(node, "104", SLURM_JOB_GPUS="0"), "epilog")
    assert r.returncode == 0 and "no readings from the job's start" in r.stderr
    assert records(node.root / "jobs.jsonl")[1]["job_id"] == "104"


def test_outside_slurm_and_bad_gpu_lists_are_refused(node):
    env = slurm_env(node, "105")
    del env["SLURM_JOB_ID"]
    r = hook(env, "prolog")
    assert r.returncode != 0 and "SLURM_JOB_ID is not set" in r.stderr
    r = hook(slurm_env(node, "105", SLURM_JOB_GPUS="GPU-1234"), "prolog")
    assert r.returncode == 0 and "SLURM_JOB_GPUS='GPU-1234'" in r.stderr
    assert "SLURM_JOB_GPUS" in json.loads((node.root / "state" / "105.json").read_text())["error"]


def test_state_from_how_the_job_ended():
    assert job_state({"SLURM_JOB_EXIT_CODE2": "0:0"}, {}) == ("completed", "0:0")
    assert job_state({}, {"ExitCode": "2:0"}) == ("failed", "2:0")
    assert job_state({"SLURM_JOB_EXIT_CODE2": "0:0"}, {"ExitCode": "0:9", "TimeLimit": "00:01:00", "RunTime": "00:00:12"})[0] == "cancelled"
    assert job_state({}, {"ExitCode": "0:15", "TimeLimit": "00:01:00", "RunTime": "00:01:00"})[0] == "timeout"
    assert job_state({}, {"ExitCode": "0:15", "TimeLimit": "UNLIMITED", "RunTime": "1-00:00:00"})[0] == "cancelled"
    assert job_state({}, {"ExitCode": "0:11"})[0] == "signaled"
    assert job_state({}, {}) == ("ended", "")


def test_records_appended_at_once_stay_whole(tmp_path):
    """Epilogs of jobs ending together: every line whole, none lost (lines longer than a pipe's atomic write)."""
    path = tmp_path / "jobs.jsonl"
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from zeus_core.cli.slurm import append_record
        for i in range(100):
            append_record(Path({str(path)!r}), {{"job_id": f"{{sys.argv[1]}}.{{i}}", "pad": "x" * 20000}})
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(w)]) for w in range(6)]
    assert [p.wait(120) for p in procs] == [0] * 6
    got = records(path)
    assert sorted(r["job_id"] for r in got) == sorted(f"{w}.{i}" for w in range(6) for i in range(100))
    append_record(path, {"job_id": "last"})
    assert records(path)[-1] == {"job_id": "last"}


def test_report_tabulates_and_names_a_bad_line(tmp_path):
    path = tmp_path / "jobs.jsonl"
    for job, user, joules, state in (("1", "alice", 1500.0, "completed"), ("2", "bob", 250.0, "cancelled"), ("3", "alice", None, "failed")):
        append_record(
            path, {"job_id": job, "user": user, "name": f"j{job}", "state": state, "gpus": [0], "duration_s": 2.0, "energy_j": joules}
        )
    r = subprocess.run([*ZEUS, "slurm", "report", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["job", "user", "name", "state", "node", "start", "time_s", "gpus", "energy_kJ"]
    assert lines[1].split()[:4] == ["1", "alice", "j1", "completed"] and lines[1].split()[-1] == "1.500"
    assert lines[3].split()[-1] == "-"
    assert "total alice: 1.500 kJ" in r.stdout and "total bob: 0.250 kJ" in r.stdout and "(see their error field): 3" not in r.stdout
    r = subprocess.run([*ZEUS, "slurm", "report", str(path), "--user", "bob", "--json"], capture_output=True, text=True, timeout=60)
    assert json.loads(r.stdout)["energy_j_by_user"] == {"bob": 250.0}
    with path.open("a") as f:
        f.write('{"job_id": "4", "energy_j": 1\n')  # half a line
    r = subprocess.run([*ZEUS, "slurm", "report", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and f"{path}:4: not a JSON line" in r.stderr


# --------------------------------------------------------------------------- a real Slurm


SLURM_PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "scancel", "scontrol", "sinfo")


def _program(name: str) -> str | None:
    """Where ``name`` is: on PATH, or in /usr/sbin (daemons, off a user's PATH)."""
    return shutil.which(name) or (str(Path("/usr/sbin", name)) if Path("/usr/sbin", name).is_file() else None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Slurm:
    """munged, slurmctld and slurmd on loopback in ``root``, with two GPU GRES (files linked to /dev/null)."""

    def __init__(self, root: Path, prolog: Path, epilog: Path) -> None:
        self.root = root
        self.host = socket.gethostname().split(".")[0]
        self.procs: list[subprocess.Popen] = []
        for sub in ("state", "spool", "log", "dev"):
            (root / sub).mkdir()
        for i in range(2):  # slurmd wants a character device behind each GRES file (never opened): /dev/null's
            (root / "dev" / f"nvidia{i}").symlink_to("/dev/null")
        (root / "munge.key").write_bytes(os.urandom(1024))
        (root / "munge.key").chmod(0o600)
        ctld_port, d_port = _free_port(), _free_port()
        self.conf = root / "slurm.conf"
        self.conf.write_text(
            textwrap.dedent(f"""
            ClusterName=zeustest
            SlurmctldHost={self.host}(127.0.0.1)
            SlurmUser=root
            SlurmdUser=root
            SlurmctldPort={ctld_port}
            SlurmdPort={d_port}
            AuthType=auth/munge
            AuthInfo=socket={root}/munge.sock
            CryptoType=crypto/munge
            StateSaveLocation={root}/state
            SlurmdSpoolDir={root}/spool
            SlurmctldPidFile={root}/slurmctld.pid
            SlurmdPidFile={root}/slurmd.pid
            ProctrackType=proctrack/linuxproc
            TaskPlugin=task/none
            SelectType=select/cons_tres
            SelectTypeParameters=CR_CPU
            GresTypes=gpu
            SchedulerType=sched/builtin
            MpiDefault=none
            ReturnToService=2
            JobCompType=jobcomp/none
            AccountingStorageType=accounting_storage/none
            JobAcctGatherType=jobacct_gather/none
            SlurmctldLogFile={root}/log/slurmctld.log
            SlurmdLogFile={root}/log/slurmd.log
            PrologFlags=Alloc
            Prolog={prolog}
            Epilog={epilog}
            NodeName={self.host} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} RealMemory=1000 Gres=gpu:2 State=UNKNOWN
            PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
            """)
        )
        (root / "gres.conf").write_text(f"NodeName={self.host} Name=gpu File={root}/dev/nvidia[0-1]\n")
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_CONF": str(self.conf), "LC_ALL": "C"}

    def start(self) -> None:
        root = self.root
        sock = f"--socket={root}/munge.sock"
        self._start(
            "munged",
            "munged",
            "-F",
            "-f",
            sock,
            f"--key-file={root}/munge.key",
            f"--log-file={root}/log/munged.log",
            f"--pid-file={root}/munged.pid",
            f"--seed-file={root}/munged.seed",
        )
        self._wait(lambda: (root / "munge.sock").exists(), "munged's socket")
        self._start("slurmctld", "slurmctld", "-D", "-i", "-f", str(self.conf))
        self._start("slurmd", "slurmd", "-D", "-f", str(self.conf))
        self._wait(lambda: self.run("sinfo", "-h", "-o", "%T", check=False).stdout.strip() == "idle", "the node idle in sinfo")

    def _start(self, name: str, *cmd: str) -> None:
        out = open(self.root / "log" / f"{name}.out", "wb")  # noqa: SIM115 - the child holds it
        self.procs.append(
            subprocess.Popen([_program(cmd[0]) or cmd[0], *cmd[1:]], env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=self.root)
        )
        out.close()

    def logs(self) -> str:
        return "\n".join(f"== {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted((self.root / "log").iterdir()))

    def _wait(self, ok, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not ok():
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                pytest.fail(f"Slurm: no {what} within {timeout} s:\n{self.logs()}")
            time.sleep(0.2)

    def run(self, *cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        r = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self.root)
        if check and r.returncode != 0:
            pytest.fail(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr}\n{self.logs()}")
        return r

    def job_state(self, job: str) -> str:
        out = self.run("scontrol", "-o", "show", "job", job, check=False).stdout
        return next((t.partition("=")[2] for t in out.split() if t.startswith("JobState=")), "")

    def stop(self) -> None:
        if self.procs and all(p.poll() is None for p in self.procs):
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.run("scancel", "--user=root", check=False, timeout=20)
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(30)


@pytest.fixture
def slurm(node):
    """A real Slurm whose Prolog and Epilog are contrib/slurm/zeus-slurm.sh, set to ``node``'s daemon."""
    missing = [p for p in SLURM_PROGRAMS if _program(p) is None]
    if missing or os.geteuid() != 0:
        server_missing(
            f"a real Slurm needs root and {', '.join(SLURM_PROGRAMS)} (Debian: slurmctld slurmd slurm-client munge); missing: {missing or 'root'}"
        )
    root = node.root / "slurm"
    root.mkdir()
    defaults = root / "zeus-slurm.defaults"
    defaults.write_text(
        f'ZEUS="{sys.executable} -m zeus_core.cli"\nZEUSD_SOCK_PATH={node.socket}\n'
        f"ZEUS_SLURM_RECORD={node.root / 'jobs.jsonl'}\nZEUS_SLURM_STATE={node.root / 'state'}\n"
    )
    hook = root / "zeus-slurm"  # slurm.conf names a program without arguments or environment: the one place to name the defaults
    hook.write_text(f"#!/bin/sh\nZEUS_SLURM_DEFAULTS={defaults} exec {REPO / 'contrib' / 'slurm' / 'zeus-slurm.sh'}\n")
    hook.chmod(0o755)
    cluster = Slurm(root, hook, hook)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def test_a_real_slurm_charges_each_job(node, slurm):
    def sbatch(*args: str) -> str:
        return slurm.run("sbatch", "--parsable", "-n1", "--gres=gpu:1", "-o", "/dev/null", *args).stdout.strip().split(";")[0]

    train = sbatch("-J", "train", "--wrap", "sleep 2")
    broken = sbatch("-J", "broken", "--wrap", "sleep 2; exit 3")
    long = sbatch("-J", "long", "--wrap", f"touch {node.root}/long.started; sleep 300")
    # srun: a job of one step, run in the foreground once a GPU is free
    step = slurm.run(
        "srun", "-J", "interactive", "-n1", "--gres=gpu:1", "sh", "-c", "sleep 2; echo $SLURM_JOB_ID", timeout=180
    ).stdout.strip()
    slurm._wait(lambda: (node.root / "long.started").exists(), f"job {long}'s script running", 120)  # cancelled mid-run, not before
    time.sleep(1.5)
    slurm.run("scancel", long)
    path = node.root / "jobs.jsonl"
    slurm._wait(lambda: path.exists() and len(path.read_text().splitlines()) == 4, "four records", 120)
    got = {r["job_id"]: r for r in records(path)}
    assert set(got) == {train, broken, long, step}
    expect = {train: ("train", "completed"), broken: ("broken", "failed"), long: ("long", "cancelled"), step: ("interactive", "completed")}
    for job, (name, state) in expect.items():
        rec = got[job]
        assert (rec["name"], rec["state"], rec["error"]) == (name, state, None), rec
        assert (rec["user"], rec["cluster"], rec["partition"], rec["node"]) == ("root", "zeustest", "debug", slurm.host), rec
        assert len(rec["gpus"]) == 1 and rec["gpus"][0] in (0, 1), rec
        # what the job's own GPU drew while it held it: its draw (80 W or 320 W) over its time, give or take
        gpu = rec["gpus"][0]
        assert rec["energy_j"] == rec["gpu_energy_j"][str(gpu)] > 0, rec
        assert DRAW_W[gpu] / 2 < rec["energy_j"] / rec["duration_s"] < DRAW_W[gpu] * 2, rec
    assert got[broken]["exit_code"] == "3:0" and got[long]["exit_code"].startswith("0:")
    a, b = got[train], got[broken]
    if a["start"] < b["end"] and b["start"] < a["end"]:  # held at the same time: Slurm gave them different GPUs
        assert {a["gpus"][0], b["gpus"][0]} == {0, 1}, (a, b)
    assert got[long]["duration_s"] >= 1.5
    assert list((node.root / "state").iterdir()) == []  # every job's start readings gone with it
    r = subprocess.run([*ZEUS, "slurm", "report", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "total root:" in r.stdout and all(job in r.stdout for job in got)

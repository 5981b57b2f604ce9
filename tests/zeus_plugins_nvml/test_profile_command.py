"""``zeus profile`` end to end in a subprocess on the simulated NVIDIA driver (issue 37 item 3): a
callable and a command line over a grid, the table with its intervals, the power limit put back
(also on Ctrl-C), and bad input refused with a clear error and a non-zero exit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from zeus_plugins_nvml import fake_pynvml

WORK = """
import os, time
from pathlib import Path

def step(n=1):
    end = time.perf_counter() + 0.02 * n
    while time.perf_counter() < end:
        pass

def hang():
    Path("started").write_text("x")
    time.sleep(60)

def boom():
    raise RuntimeError("the workload failed")
"""


@pytest.fixture
def gpu(tmp_path):
    """A simulated A100 (400 W limit, demand 250 W) and a module of workloads in ``tmp_path``."""
    state = fake_pynvml.create(tmp_path / "nvml.json", [fake_pynvml.FakeGpu(demand_w=250.0)], privileged=True)
    (tmp_path / "work_mod.py").write_text(textwrap.dedent(WORK))
    return state


def _env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEUS_", "CUDA_"))}
    env["ZEUS_FAKE_NVML"] = str(state)
    env["ZEUS_STATE_DIR"] = str(state.parent / "zeus-state")
    return env


def zeus(state: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zeus_core", "profile", *args],
        capture_output=True,
        text=True,
        env=_env(state),
        cwd=state.parent,
        timeout=timeout,
    )


def _limit(state: Path) -> float:
    return fake_pynvml.read_state(state)["gpus"][0]["limit_w"]


def test_a_callable_over_a_power_limit_grid_prints_intervals_and_puts_the_limit_back(gpu):
    out = gpu.parent / "out.json"
    r = zeus(gpu, "-p", "power_limit=150,200,300", "-p", "n=1,2", "--trials", "3", "--json", str(out), "work_mod:step")
    assert r.returncode == 0, r.stderr
    assert "zeus profile: 3 trial(s) per point, 95% intervals" in r.stdout and "±" in r.stdout
    points = json.loads(out.read_text())["points"]
    assert [(p["params"]["power_limit"], p["params"]["n"]) for p in points] == [(150, 1), (150, 2), (200, 1), (200, 2), (300, 1), (300, 2)]
    for p in points:
        assert p["power_w"] == pytest.approx(min(250.0, p["params"]["power_limit"]), rel=0.05)  # the limit was held
        # a run is the step's 20 ms x n and what a loaded machine adds, less than one more run of it
        assert 0.02 * p["params"]["n"] * 0.999 <= p["time_s"]["mean"] < 0.02 * p["params"]["n"] * 1.9
        assert p["energy_j"]["low"] <= p["energy_j"]["mean"] <= p["energy_j"]["high"] and len(p["trials"]) == 3
        assert all(t["settled"] and t["cooled"] for t in p["trials"])  # constant temperature: settled at once
    assert _limit(gpu) == 400.0  # back where it was


def test_a_command_gets_each_point_as_format_fields_and_environment(gpu):
    script = "import os,sys; open('seen.txt','a').write(sys.argv[1] + ' ' + os.environ['ZEUS_PARAM_BATCH'] + chr(10))"
    r = zeus(gpu, "-p", "batch=8,16", "--trials", "2", "--no-warmup", "--no-cooldown", "--", sys.executable, "-c", script, "{batch}")
    assert r.returncode == 0, r.stderr
    seen = (gpu.parent / "seen.txt").read_text().split("\n")[:-1]
    assert sorted(seen) == ["16 16", "16 16", "8 8", "8 8"]  # each point twice, argument and variable alike
    assert "batch" in r.stdout and "energy (J)" in r.stdout


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["-p", "power_limit=abc", "work_mod:step"], 2, "power limits are positive numbers of watts"),
        (["-p", "1x=2", "work_mod:step"], 2, "expected NAME=V1,V2,... with NAME a Python identifier"),
        (["-p", "n=1", "-p", "n=2", "work_mod:step"], 2, "--param n given twice"),
        (["-p", "power_limit=50,200", "work_mod:step"], 2, "50 W outside the device's range 100-400 W"),
        (["no_such_module:step"], 2, "cannot import module 'no_such_module'"),
        (["work_mod:nothing"], 2, "module 'work_mod' has no 'nothing'"),
        (["-p", "size=3", "work_mod:step"], 2, "does not take the parameters size"),
        (["-d", "no-such-device", "work_mod:step"], 2, "no device named no-such-device"),
        (["--trials", "0", "work_mod:step"], 2, "--trials"),
        ([], 2, "Missing argument"),
        (["--no-warmup", "work_mod:boom"], 1, "the workload failed"),
        (["--no-warmup", "--", sys.executable, "-c", "raise SystemExit(3)"], 1, "the command exited with status 3"),
        (["--", "/no/such/program"], 2, "cannot run '/no/such/program'"),
        (
            ["--set", "nvml.gpus=[0]", "--set", "cpu-estimate.tdp_w=90", "work_mod:step"],
            2,
            "--set names 2 devices (cpu-estimate, nvml): say which",
        ),
    ],
)
def test_bad_input_is_refused_with_what_to_fix(gpu, args, status, message):
    r = zeus(gpu, *args)
    assert r.returncode == status, (r.stdout, r.stderr)
    assert message in r.stderr
    assert _limit(gpu) == 400.0  # nothing left changed


def test_ctrl_c_puts_the_power_limit_back(gpu):
    proc = subprocess.Popen(
        [sys.executable, "-m", "zeus_core", "profile", "-p", "power_limit=200", "--no-warmup", "--no-cooldown", "work_mod:hang"],
        env=_env(gpu),
        cwd=gpu.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # whatever this test inherited: Ctrl-C as in a terminal
    )
    try:
        deadline = time.monotonic() + 60
        while not (gpu.parent / "started").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        assert _limit(gpu) == 200.0
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert _limit(gpu) == 400.0


def test_a_window_lasts_as_long_as_the_error_bound_asked_needs(gpu):
    out = gpu.parent / "out.json"
    r = zeus(gpu, "-p", "power_limit=300", "--trials", "2", "--no-warmup", "--no-cooldown", "--json", str(out), "work_mod:step")
    assert r.returncode == 0, r.stderr
    assert [t["runs"] for t in json.loads(out.read_text())["points"][0]["trials"]] == [1, 1]
    # the counter's bound (its update period at the board's maximum power) is far over half of a 20 ms run's 5 J
    r = zeus(
        gpu,
        "-p",
        "power_limit=300",
        "--trials",
        "2",
        "--no-warmup",
        "--no-cooldown",
        "--target-error",
        "0.5",
        "--json",
        str(out),
        "work_mod:step",
    )
    assert r.returncode == 0, r.stderr
    assert all(t["runs"] > 1 for t in json.loads(out.read_text())["points"][0]["trials"])


def test_without_device_it_measures_the_one_gpu_plugin_that_opens_and_asks_when_several_do(gpu, tmp_path):
    # As ZeusMonitor chooses: here NVIDIA's GPUs open and AMD's do not (no driver), so nvml measures.
    def watts(r: subprocess.CompletedProcess) -> float:  # the trial's line: "trial 1: 6.016 J in 0.02005 s"
        import re

        joules, seconds = re.search(r"trial 1: ([\d.]+) J in ([\d.]+) s", r.stderr).groups()  # type: ignore[union-attr]
        return float(joules) / float(seconds)

    r = zeus(gpu, "--trials", "1", "--no-warmup", "--no-cooldown", "work_mod:step")
    assert r.returncode == 0, r.stderr
    assert watts(r) == pytest.approx(250.0, rel=0.1)  # the NVIDIA GPU's draw
    # With an AMD driver too, both open: the command asks which, and $ZEUS_GPU_DEVICE answers.
    from zeus_plugins_amdsmi import fake_amdsmi

    amd = fake_amdsmi.create(tmp_path / "amd.json", [fake_amdsmi.FakeAmdGpu(demand_w=300.0)], privileged=True)
    env = {**_env(gpu), "ZEUS_FAKE_AMDSMI": str(amd)}
    run = [sys.executable, "-m", "zeus_core", "profile", "--trials", "1", "--no-warmup", "--no-cooldown", "work_mod:step"]
    r = subprocess.run(run, capture_output=True, text=True, env=env, cwd=gpu.parent, timeout=120)
    assert r.returncode == 2 and "GPUs of 2 device plugins open on this machine" in r.stderr and "ZEUS_GPU_DEVICE" in r.stderr, r.stderr
    r = subprocess.run(run, capture_output=True, text=True, env={**env, "ZEUS_GPU_DEVICE": "nvidia"}, cwd=gpu.parent, timeout=120)
    assert r.returncode == 2 and "ZEUS_GPU_DEVICE='nvidia' names no installed device plugin" in r.stderr, r.stderr
    r = subprocess.run(run, capture_output=True, text=True, env={**env, "ZEUS_GPU_DEVICE": "amdsmi"}, cwd=gpu.parent, timeout=120)
    assert r.returncode == 0, r.stderr
    assert watts(r) == pytest.approx(300.0, rel=0.1)  # the AMD GPU's draw

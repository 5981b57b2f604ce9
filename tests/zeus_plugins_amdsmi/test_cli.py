"""The amdsmi device through zeus's entry points: `zeus monitor -d amdsmi`, `ZeusMonitor(device="amdsmi")`,
and `zeus run` with the jit power policy profiling and holding power caps on simulated AMD GPUs."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
from zeus_test_helpers import timed_window

from zeus_core import ZeusMonitor
from zeus_plugins_amdsmi import fake_amdsmi
from zeus_plugins_amdsmi.fake_amdsmi import FakeAmdGpu

SUPPORT = Path(__file__).resolve().parents[1] / "_support"
QUIET = "torch,perseus,hetero,trace,mab,postgres,serve,prometheus,hf,lightning"


def zeus(*args: str, env_extra: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200", **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "zeus_core", *args], capture_output=True, text=True, env=env, timeout=timeout)


def test_zeus_monitor_shows_accumulator_and_polled_gpus(fake_amd, tmp_path):
    fake_amd([FakeAmdGpu(demand_w=420.0), FakeAmdGpu(demand_w=230.0, counter_mode="frozen")])
    out = tmp_path / "amd.csv"
    r = zeus(
        "monitor",
        "-d",
        "amdsmi",
        "--set",
        "amdsmi.counter_check_s=0.05",
        "--set",
        "amdsmi.poll_interval_s=0.02",
        "--interval",
        "0.25",
        "--duration",
        "0.8",
        "--csv",
        str(out),
        env_extra={"ZEUS_DISABLED_PLUGINS": QUIET},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {line.split("│")[2].strip(): line for line in r.stdout.splitlines() if line.count("│") > 5 and "gpu" in line}
    assert "counter" in rows["gpu0"] and "polling" in rows["gpu1"] and "local" in rows["gpu0"]
    table = list(csv.DictReader(out.open()))
    # today's columns, and beside each GPU's the temperature and amdsmi's power domains, named
    gpu = ["power_w", "energy_j", "energy_error_j", "temperature_c", "power_instant_w", "power_average_w"]
    assert list(table[0]) == ["time", "elapsed_s", *(f"gpu{i}_{c}" for i in (0, 1) for c in gpu)]
    assert float(table[-1]["gpu0_temperature_c"]) == 62.0  # the hotspot sensor, in °C as amdsmi gives it
    assert float(table[-1]["gpu1_power_instant_w"]) == float(table[-1]["gpu1_power_average_w"]) == 230.0
    last = table[-1]
    t = float(last["elapsed_s"])
    assert float(last["gpu0_energy_j"]) == pytest.approx(420.0 * t, rel=0.03)  # 15.3 uJ counts, in joules
    assert float(last["gpu1_energy_j"]) == pytest.approx(230.0 * t, rel=0.05)  # polled whole watts, integrated
    assert float(table[1]["gpu0_power_w"]) == pytest.approx(420.0, rel=0.03)
    # the bounds (zeus_plugins_amdsmi.sensors): the accumulator's, 750 W over its update period as the check at open
    # inferred it (a few reading steps of 10 ms); polled instant power's, the polls and the table's renewal at both edges
    assert 750.0 * 0.01 < float(last["gpu0_energy_error_j"]) < 750.0 * 0.1
    assert 2 * 750.0 * (0.02 + 0.02) <= float(last["gpu1_energy_error_j"]) < 2 * 750.0 * (0.02 + 0.1)


def test_zeus_monitor_without_the_driver_exits_2_with_the_fix(tmp_path):
    r = zeus(
        "monitor",
        "-d",
        "amdsmi",
        "--duration",
        "0.2",
        env_extra={"ZEUS_FAKE_AMDSMI": str(tmp_path / "none.json"), "ZEUS_DISABLED_PLUGINS": QUIET},
    )
    assert r.returncode == 2
    assert "amdsmi: the simulated AMD driver" in " ".join(r.stderr.split()) and "fake_amdsmi" in r.stderr


def test_zeus_monitor_windows_on_amd_gpus(fake_amd):
    fake_amd([FakeAmdGpu(demand_w=380.0), FakeAmdGpu(demand_w=180.0)], privileged=True)
    with ZeusMonitor(device="amdsmi", options={"counter_check_s": 0.05}, sync_execution_with="none") as mon:
        assert mon.gpu_indices == [0, 1]
        m, elapsed = timed_window(lambda: mon.begin_window("step"), lambda: mon.end_window("step"), 0.3)
    # between the window's shortest and longest length: the times around the calls, not the monitor's own clock
    # reading, which a loaded machine can part from the energy reading by milliseconds
    assert m.time == elapsed.drawn(1.0) and m.gpu_energy[0] == elapsed.drawn(380.0, rel=0.03)
    assert m.gpu_energy[1] == elapsed.drawn(180.0, rel=0.03)
    assert m.total_energy == pytest.approx(m.gpu_energy[0] + m.gpu_energy[1])
    # gpu_indices picks the plugin that measures GPUs and can open here: amdsmi, with HIP's numbering.
    with ZeusMonitor(gpu_indices=[1], cpu_indices=[], sync_execution_with="none") as mon:
        assert mon.gpu_indices == [1]
        m, elapsed = timed_window(lambda: mon.begin_window("one"), lambda: mon.end_window("one"), 0.1)
    assert list(m.gpu_energy) == [1] and m.gpu_energy[1] == elapsed.drawn(180.0, rel=0.05)


JOB = """
[job]
name = "amd-jit"
recurrences = 1
target_metric = 0.5
store = "amd.sqlite"

[workload]
plugin = "torch"
entry = "inloop_helpers:train_to_target"
python_path = ["{support}"]
batch_sizes = [32]
default_batch_size = 32
threads = 1

[device]
plugin = "amdsmi"
gpus = [0]
counter_check_s = 0.05

[batch_size]
plugin = "fixed"
default = 32

[power]
plugin = "jit"
warmup_iters = 1
measure_iters = 2
"""


def test_zeus_run_profiles_and_holds_power_caps_with_jit_and_puts_them_back(fake_amd, tmp_path):
    """300..400 W in 25 W steps: jit tries every cap highest first (400 W is where the GPU is, so
    not set), holds the one it found cheapest and reports that one, and the cap is back at 400 W when
    zeus run ends. Which cap is cheapest depends on the measured step times (real CPU time, a few
    percent apart), so the test checks that the cap held is the cap reported, not which one it is;
    the jit's choice on given measurements is tested in tests/core."""
    fake_amd([FakeAmdGpu(min_cap_w=300.0, max_cap_w=400.0, default_cap_w=400.0, demand_w=600.0)], privileged=True)
    job = tmp_path / "job.toml"
    job.write_text(JOB.format(support=SUPPORT))
    out = tmp_path / "out"
    r = zeus(
        "run",
        str(job),
        "--output",
        str(out),
        env_extra={"ZEUS_DISABLED_PLUGINS": "perseus,hetero,trace", "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    gpu = fake_amdsmi.read_state()["gpus"][0]
    assert gpu["cap_w"] == 400.0  # put back
    history = gpu["cap_history_w"]
    assert history[:4] == [375.0, 350.0, 325.0, 300.0]  # profiled, highest first
    rows = list(csv.DictReader((out / "recurrences.csv").open()))
    assert len(rows) == 1
    held = float(rows[0]["power_limit"])
    assert held in {300.0, 325.0, 350.0, 375.0, 400.0}
    # After profiling: the cap reported is the cap held (not set again when profiling ended at it), then restored.
    assert history[-1] == 400.0 and set(history[4:-1]) <= {held}
    assert held in (300.0, 400.0) or held in history[4:-1]


def test_the_readme_example_runs_as_written(tmp_path):
    from readme_examples import run_try_it

    p, _ = run_try_it(Path(__file__).resolve().parents[2] / "plugins/zeus_plugins_amdsmi/README.md", tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = list(csv.DictReader((tmp_path / "amd.csv").open()))
    assert float(rows[-1]["gpu0_energy_j"]) == pytest.approx(500.0 * float(rows[-1]["elapsed_s"]), rel=0.03)
    assert "counter" in p.stdout and "gpu1" in p.stdout


def test_a_machine_with_nvidia_and_amd_gpus_is_told_to_choose(fake_amd, tmp_path, monkeypatch):
    """Both simulated drivers answer: ZeusMonitor does not pick one by name order, it says how to choose."""
    from zeus_core.engine.assembly import DeviceOpenError
    from zeus_plugins_nvml import fake_pynvml

    fake_amd(1)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    fake_pynvml.install(fake_pynvml.create(tmp_path / "nvml.json", 2), monkeypatch)
    monkeypatch.delenv("ZEUS_GPU_DEVICE", raising=False)
    with pytest.raises(DeviceOpenError, match=r"GPUs of 2 device plugins open on this machine: amdsmi \(gpu0\); nvml \(gpu0, gpu1\)"):
        ZeusMonitor(cpu_indices=[], sync_execution_with="none")
    monkeypatch.setenv("ZEUS_GPU_DEVICE", "nvml")
    with ZeusMonitor(cpu_indices=[], sync_execution_with="none") as mon:
        assert [name for name, _, _ in mon.groups] == ["nvml"] and mon.gpu_indices == [0, 1]
    monkeypatch.setenv("ZEUS_GPU_DEVICE", "amdsmi")
    with ZeusMonitor(cpu_indices=[], sync_execution_with="none") as mon:
        assert [name for name, _, _ in mon.groups] == ["amdsmi"] and mon.gpu_indices == [0]

"""benchmarks/downstream_mlenergy.py: the ML.ENERGY benchmark's measurement calls, as written there, run
on zeus-compat over the simulated driver, and what they report matches what the GPUs drew."""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "downstream_mlenergy.py"


def _module():
    spec = importlib.util.spec_from_file_location("downstream_mlenergy", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmarks_calls_run_unchanged_and_report_what_the_gpus_drew(tmp_path):
    out = tmp_path / "result.json"
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--gpus", "2", "--steady-s", "1.5", "--ramp-s", "0.5", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "8 of 8 checks passed" in r.stdout
    result = json.loads(out.read_text())
    steady = result["steady_state_measurement"]
    assert set(steady) >= {"time", "gpu_energy"} and steady["time"] >= 1.5
    assert set(result["timeline"]["power"]) >= {"device_instant"}
    assert "GPU" in result["show_env"]


def test_the_checks_catch_an_energy_that_is_not_what_was_drawn(tmp_path):
    module = _module()
    args = argparse.Namespace(gpus=2, steady_s=1.0, ramp_s=0.5)
    good = {
        "steady_state_energy": module.STEADY_W * 2 * 1.0,
        "steady_state_measurement": {"time": 1.0, "gpu_energy": {"0": module.STEADY_W, "1": module.STEADY_W}},
        "entire_benchmark_measurement": {
            "time": 2.0,
            "gpu_energy": {0: module.STEADY_W + module.RAMP_W, 1: module.STEADY_W + module.RAMP_W},
        },
        "timeline": {
            "steady_state_start_time": 10.0,
            "steady_state_end_time": 11.0,
            "power": {"device_instant": {0: [(9.0, module.RAMP_W), (10.0, module.STEADY_W)], 1: [(10.0, module.STEADY_W)]}},
            "temperature": {0: [], 1: []},
        },
        "temperature_now": {0: 45, 1: 45},
        "show_env": "GPU 0: A100",
    }
    assert all(ok for *_, ok in module.checks(good, args))
    bad = copy.deepcopy(good)
    bad["steady_state_energy"] *= 0.5  # a monitor that lost half the energy
    failed = [name for name, _, _, ok in module.checks(bad, args) if not ok]
    assert failed == ["steady-state energy (J), all GPUs"]

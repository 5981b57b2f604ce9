"""The JIT power profiler on a GPU whose power depends on its temperature (issue 37 item 3):
measured from cold, back to back, it picks the wrong limit; thermally stable, the right one; and
where temperature is constant, thermally stable profiling changes nothing. Also
``benchmarks/thermal_jit.py`` run as a user runs it, with tiny arguments."""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "thermal_jit.py"


def _script():
    spec = importlib.util.spec_from_file_location("thermal_jit", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: A GPU that heats a lot (2.5 W of leakage per degree, 0.15 degrees per watt, time constant 0.5 s),
#: profiled at 400 W and 200 W: at their steady temperatures 200 W costs 6 % less per step, but 400 W,
#: measured first from cold, looks 12 % cheaper than 200 W measured after it (the driver's model).
HOT_GPU = {"demand_w": 400.0, "thermal_c_per_w": 0.15, "leakage_w_per_c": 2.5, "thermal_tau_s": 0.5}


def _args(**kw) -> argparse.Namespace:
    base = {"step_w": 100.0, "warmup_iters": 5, "measure_iters": 50, "settle_readings": 100, "step_ms": 4.0}
    return argparse.Namespace(**(base | kw))


def test_back_to_back_from_cold_the_jit_picks_wrong_and_thermally_stable_it_picks_right(tmp_path, monkeypatch):
    bench = _script()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    costs = {lim: bench.steady_cost(lim, HOT_GPU, 400.0, 0.004) for lim in (400.0, 200.0)}
    assert costs[400.0] > 1.05 * costs[200.0]
    args = _args(step_w=200.0, measure_iters=100)  # windows of 0.4 s: a late step at an edge is 1 % of one
    today, limits = bench.run_jit(HOT_GPU, False, args, tmp_path / "a.json", min_limit_w=200.0)
    assert limits == [400.0, 200.0]
    assert today == 400.0  # measured colder than it runs
    stable, _ = bench.run_jit(HOT_GPU, True, args, tmp_path / "b.json", min_limit_w=200.0)
    assert stable == 200.0


def test_each_run_is_on_virtual_time_so_its_figures_do_not_move_with_the_machines_load(tmp_path, monkeypatch):
    bench = _script()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cool = {"demand_w": 300.0, "thermal_c_per_w": 0.0, "leakage_w_per_c": 0.0, "thermal_tau_s": 1.0}  # power is the draw: no heating
    args = _args(step_w=100.0, measure_iters=20)
    got = bench.jit_run(cool, False, args, tmp_path / "a.json", min_limit_w=200.0)
    assert len(got["profile"]) == len(got["limits"]) >= 2
    for limit, (seconds, _joules) in got["profile"].items():
        # the time per step is the model's to rounding (the speed follows the draw's cube root), however busy this machine
        assert seconds == pytest.approx(args.step_ms / 1000 / (min(300.0, float(limit)) / 300.0) ** (1 / 3), rel=1e-9)
    assert bench.jit_run(cool, False, args, tmp_path / "b.json", min_limit_w=200.0) == got  # the same run, the same figures


def test_where_temperature_is_constant_thermally_stable_adds_no_iteration_and_chooses_the_same(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    bench = _script()
    flat = {"demand_w": 250.0, "thermal_c_per_w": 0.0, "leakage_w_per_c": 0.0, "thermal_tau_s": 0.0}  # no temperature quirk
    args = _args(step_w=25.0, warmup_iters=2, measure_iters=8, settle_readings=5)
    today, stable = (bench.jit_run(flat, s, args, tmp_path / f"n{s}.json") for s in (False, True))
    # the same windows, figure for figure (on virtual time: nothing rests on this machine's timing), and the same pick
    assert stable == today
    assert stable["steps"] == 13 * 10 + 1  # 13 limits x (2 + 8) steps, and the one where it chose: no step added


def test_the_benchmark_runs_as_a_user_runs_it(tmp_path):
    out = tmp_path / "out.json"
    got = subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            str(SCRIPT),
            "--seeds",
            "1",
            "--tau-s",
            "0.1",
            "--measure-iters",
            "10",
            "--settle-readings",
            "20",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert got.returncode == 0, got.stderr
    assert "wrong picks out of 1: today " in got.stdout and "ratio of wrong picks (today / thermally stable): " in got.stdout
    import json

    data = json.loads(out.read_text())
    assert len(data["rows"]) == 1 and {"today", "stable"} <= set(data["rows"][0])


def test_the_benchmark_refuses_bad_arguments(tmp_path):
    got = subprocess.run([sys.executable, str(SCRIPT), "--seeds", "0"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert got.returncode == 2 and "--seeds must be at least 1" in got.stderr

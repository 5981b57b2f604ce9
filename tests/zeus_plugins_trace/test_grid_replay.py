"""Emissions and energy cost in the trace replays (the fast simulator, `zeus sweep`, the Alibaba replay): each
try charged over its own simulated time by the core's integration rule, exact with a constant, the columns
appended after unchanged ones, and a replay that runs past its series refused (exit 2) naming the time."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from grid_helpers import grid_registry

from zeus_core import JobOptions
from zeus_core.cli import main as zcli
from zeus_core.engine.signals import open_grid
from zeus_core.grid import BeyondSignal, GridMeter, replay_columns
from zeus_core.job import GridOptions
from zeus_plugins_mab.options import MabOptions
from zeus_plugins_mab.policy import MabPolicy
from zeus_plugins_trace.device import TraceDevice, TraceDeviceOptions
from zeus_plugins_trace.options import TraceWorkloadOptions
from zeus_plugins_trace.simulate import simulate
from zeus_plugins_trace.sweep import sweep_cmd
from zeus_plugins_trace.tracesets import load_workload_trace

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "zeus_nsdi23"
ALIBABA = REPO / "examples" / "alibaba" / "job.toml"
T0 = 1590969600.0  # 2020-06-01T00:00:00Z


@pytest.fixture(scope="module")
def reg():
    return grid_registry()


def series(folder: Path, values: list[float], step_s: float = 3600.0) -> Path:
    """A CSV in the documented general layout: ISO times with their offset, one value per step from T0."""
    from datetime import UTC, datetime

    path = folder / "grid.csv"
    lines = ["time,carbon_intensity"]
    lines += [f"{datetime.fromtimestamp(T0 + i * step_s, UTC).isoformat()},{v}" for i, v in enumerate(values)]
    path.write_text("\n".join(lines) + "\n")
    return path


def grid_of(reg, folder: Path, **options):
    return open_grid(GridOptions(**options), reg, folder)


def table(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_a_try_from_a_dirty_into_a_clean_hour_pays_each_part_at_its_own_intensity(reg, tmp_path):
    # 600 g/kWh for the first hour, 100 for the next three
    grid = grid_of(reg, tmp_path, carbon_intensity=str(series(tmp_path, [600, 100, 100, 100])), start="2020-06-01T00:00:00Z")
    joules = 7.2e6
    # try 0: half an hour dirty, an hour and a half clean; try 1: all clean; try 2: an instant (never ran), in the dirty hour
    starts, ends = [T0 + 1800, T0 + 3600, T0 + 600], [T0 + 1800 + 7200, T0 + 3 * 3600, T0 + 600]
    cols = replay_columns(grid, starts, ends, [joules, joules, 0.0], [joules, joules, 0.0])
    mean = (1800 * 600 + 5400 * 100) / 7200  # 225 g/kWh: the hours as they were drawn, not the average of 600 and 100
    assert cols["carbon_intensity_g_per_kwh"][0] == pytest.approx(mean, rel=1e-12)
    assert cols["carbon_g"][0] == pytest.approx(joules * mean / 3.6e6, rel=1e-12)
    assert cols["carbon_g"][1] == joules * 100 / 3.6e6 and cols["carbon_intensity_g_per_kwh"][1] == 100.0
    assert cols["carbon_g"][2] == 0.0 and cols["carbon_intensity_g_per_kwh"][2] == 600.0
    # one rule: zeus run's meter charges the same interval the same
    meter = GridMeter(grid)
    meter.add(starts[0], ends[0], joules)
    assert meter.figures(joules)["carbon_g"] == pytest.approx(cols["carbon_g"][0], rel=1e-12)
    # a try of two intervals (a profiling epoch at another power): energy-weighted over both
    two = replay_columns(grid, [T0, T0 + 3600], [T0 + 3600, T0 + 7200], [3e6, 1e6], [4e6], owners=[0, 0])
    assert two["carbon_g"][0] == pytest.approx((3e6 * 600 + 1e6 * 100) / 3.6e6, rel=1e-12)


def test_the_simulator_charges_every_try_as_zeus_run_does_on_the_trace_device(reg, tmp_path, shared_data):
    """Try by try on a year of German grid data: the runner (epoch by epoch, the JIT's profiling windows, the
    simulated clock) and the simulator (profiling epoch, then the rest, try after try) agree."""
    de = shared_data / "carbon_intensity" / "de_2020.csv"
    out = tmp_path / "out"
    res = CliRunner().invoke(
        zcli.cli,
        [
            "run",
            str(EXAMPLES / "squad.toml"),
            "--set",
            "job.recurrences=12",
            "--set",
            "job.seed=3",
            "--set",
            "device.gpu=p100",
            "--set",
            f'job.store="{tmp_path / "s.sqlite"}"',
            "--set",
            f'grid.carbon_intensity="{de}"',
            "--set",
            'grid.timezone="UTC"',
            "--set",
            'grid.start="2020-05-01T00:00:00Z"',
            "--output",
            str(out),
        ],
        obj={"registry": reg},
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    wt = load_workload_trace(TraceWorkloadOptions(dataset="squad", model="bert_base_uncased", optimizer="adamw"), "p100", 84.0, EXAMPLES)
    job = JobOptions(name="x", recurrences=12, seed=3, eta_knob=0.5, beta_knob=2.0, target_metric=84.0, max_epochs=6)
    device = TraceDevice(TraceDeviceOptions(gpu="p100"))
    device.attach(wt)
    grid = grid_of(reg, tmp_path, carbon_intensity=str(de), timezone="UTC", start="2020-05-01T00:00:00Z")
    sim = simulate(wt, MabPolicy(MabOptions(default=32), 3, device.predict_epoch), job, default_batch_size=32, grid=grid)
    with open(out / "recurrences.csv") as f:
        got = list(csv.DictReader(f))
    assert len(got) == len(sim.records) and any(r.steady_cost is not None for r in sim.records)
    intensities = set()
    for a, b in zip(got, sim.records):
        assert float(a["carbon_g"]) == pytest.approx(b.grid["carbon_g"], rel=1e-9)
        assert float(a["carbon_intensity_g_per_kwh"]) == pytest.approx(b.grid["carbon_intensity_g_per_kwh"], rel=1e-9)
        intensities.add(round(b.grid["carbon_intensity_g_per_kwh"]))
    assert len(intensities) > 5  # the tries met different hours of the grid


def test_a_constant_grid_gives_the_exact_formula_in_every_replay_and_leaves_the_other_columns_alone(tmp_path):
    grid = ["--set", "grid.carbon_intensity=437.5", "--set", "grid.price=0.25", "--set", 'grid.currency="EUR"']
    single = ["--set", "job.recurrences=8", "--axis", "device.gpu=v100,a40"]
    plain, charged = tmp_path / "plain.csv", tmp_path / "charged.csv"
    for out, more in ((plain, []), (charged, grid)):
        res = CliRunner().invoke(sweep_cmd, [str(EXAMPLES / "cifar100.toml"), *single, *more, "--output", str(out), "--workers", "1"])
        assert res.exit_code == 0, res.output
    before, after = plain.read_text().splitlines(), charged.read_text().splitlines()
    assert after[0] == before[0] + ",carbon_g,cost_eur"
    for a, b, row in zip(before[1:], after[1:], table(charged.read_text())):
        assert b.startswith(a + ",")  # every existing column as it was
        assert float(row["carbon_g"]) == float(row["energy_j"]) * 437.5 / 3.6e6
        assert float(row["cost_eur"]) == float(row["energy_j"]) * 0.25 / 3.6e6


def test_the_alibaba_replay_charges_each_try_over_its_time_in_the_cluster(reg, tmp_path):
    args = ["run", str(ALIBABA), "--set", "profiler.synthetic_groups=3", "--set", 'profiler.inflight=["improved"]']
    runs = {}
    for name, more in (("plain", []), ("constant", ["--set", "grid.carbon_intensity=300"])):
        out = tmp_path / name
        res = CliRunner().invoke(
            zcli.cli,
            [*args, *more, "--set", f'job.store="{tmp_path / name}.sqlite"', "--output", str(out)],
            obj={"registry": reg},
            catch_exceptions=False,
        )
        assert res.exit_code == 0, res.output
        runs[name] = out
    plain, const = runs["plain"], runs["constant"]
    for name in ("tries.csv", "group_results.csv"):
        before, after = (plain / name).read_text().splitlines(), (const / name).read_text().splitlines()
        assert len(before) == len(after)
        assert all(b.startswith(a + ",") for a, b in zip(before, after))  # appended columns only
    tries = table((const / "tries.csv").read_text())
    assert list(tries[0])[-2:] == ["carbon_g", "carbon_intensity_g_per_kwh"]
    for t in tries:
        assert float(t["carbon_g"]) == float(t["energy_j"]) * 300 / 3.6e6
    for g in table((const / "group_results.csv").read_text()):
        for who in ("", "default_", "oracle_"):
            assert float(g[f"{who}carbon_g"]) == float(g[f"{who}energy_j"]) * 300 / 3.6e6
    summary = json.loads((const / "summary.json").read_text())["profiler"]
    rule = summary["rules"]["improved"]
    assert rule["carbon_g"] == rule["energy_j"] * 300 / 3.6e6  # exact, as zeus run totals a job
    assert summary["default"]["carbon_g"] == summary["default"]["energy_j"] * 300 / 3.6e6
    assert "carbon_g" not in json.dumps(json.loads((plain / "summary.json").read_text()))

    # a series with a dirty and a clean stretch: the tries in the dirty one pay more per joule
    days = [900.0] * 24 * 3 + [50.0] * 24 * 400
    csv_path = series(tmp_path, days)
    out = tmp_path / "stepped"
    res = CliRunner().invoke(
        zcli.cli,
        [
            *args,
            "--set",
            f'grid.carbon_intensity="{csv_path}"',
            "--set",
            'grid.start="2020-06-01T00:00:00Z"',
            "--set",
            f'job.store="{tmp_path / "stepped.sqlite"}"',
            "--output",
            str(out),
        ],
        obj={"registry": reg},
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    tries = table((out / "tries.csv").read_text())
    t_first = min(float(t["start_time_s"]) for t in tries)
    for t in tries:
        start, end = float(t["start_time_s"]) - t_first, float(t["end_time_s"]) - t_first
        dirty = min(max(3 * 86400 - start, 0.0), end - start) / (end - start)
        assert float(t["carbon_intensity_g_per_kwh"]) == pytest.approx(900 * dirty + 50 * (1 - dirty), rel=1e-9)


def test_a_replay_longer_than_its_series_is_refused_naming_the_time_and_the_try(reg, tmp_path):
    csv_path = series(tmp_path, [300.0] * 48)  # two days from 2020-06-01
    grid = ["--set", f'grid.carbon_intensity="{csv_path}"', "--set", 'grid.start="2020-06-01T00:00:00Z"']
    out = tmp_path / "t.csv"
    res = CliRunner().invoke(
        sweep_cmd, [str(EXAMPLES / "imagenet.toml"), "--set", "job.recurrences=5", *grid, "--output", str(out), "--workers", "1"]
    )
    assert res.exit_code == 2, res.output
    assert "has no value for 2020-06-03T00:00:00Z" in res.output and re.search(r"when recurrence \d+, try \d+ runs", res.output)
    assert "set [grid] start earlier" in res.output and not out.exists()

    out = tmp_path / "alibaba"
    res = CliRunner().invoke(
        zcli.cli,
        [
            "run",
            str(ALIBABA),
            "--set",
            "profiler.synthetic_groups=3",
            *grid,
            "--set",
            f'job.store="{tmp_path / "a.sqlite"}"',
            "--output",
            str(out),
        ],
        obj={"registry": reg},
    )
    assert res.exit_code == 2, res.output
    assert "has no value for 2020-06-03T00:00:00Z" in res.output and re.search(r"group \w+, job \d+, try \d+ runs", res.output)
    assert not out.exists() or not any(out.iterdir())  # nothing written


def test_the_replay_error_is_bad_input():
    assert issubclass(BeyondSignal, ValueError)
    from zeus_core.errors import EXIT_BAD_INPUT

    assert BeyondSignal.exit_code == EXIT_BAD_INPUT

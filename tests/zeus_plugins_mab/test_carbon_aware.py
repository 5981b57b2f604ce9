"""The carbon-aware power policy: the schedule it computes from a profile, and the policy under `zeus run` on the
trace device: fewer grams than the carbon-blind JIT in no more time on a grid that swings, the JIT's own limit on a
flat one, no second profile, and the fast replay of the benchmark agreeing with `zeus run`."""

from __future__ import annotations

import csv
import json
import math
import warnings
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from grid_helpers import TRACES, grid_registry, trace_job

from zeus_core.cli import main as zcli
from zeus_core.engine.signals import open_grid
from zeus_core.grid import Step
from zeus_core.job import GridOptions
from zeus_plugins_grid.series import GridWarning
from zeus_plugins_mab.carbon_plan import Hull, Steering, budget_of
from zeus_plugins_mab.carbon_replay import carbon_aware, hold, replay
from zeus_plugins_trace.traces import load_traces, select

T0 = datetime(2020, 6, 1, tzinfo=UTC).timestamp()
HOUR = 3600.0
#: (time, energy) of an epoch of half an hour at 300 W: a gently bent profile (15 % less energy for 14 % more time)
PROFILE = {
    p: (1800.0 * t, 1800.0 * e)
    for p, (t, e) in {300.0: (1.00, 300.0), 275.0: (1.02, 285.0), 250.0: (1.05, 272.0), 225.0: (1.09, 262.0), 200.0: (1.14, 255.0)}.items()
}


class Swing:
    """An intensity that alternates every hour between dirty and clean (a step function of Unix time)."""

    source = "swing"

    def __init__(self, dirty: float = 600.0, clean: float = 150.0) -> None:
        self.dirty, self.clean = dirty, clean

    def value(self, t: float) -> float:
        return self.dirty if int(math.floor(t / HOUR)) % 2 == 0 else self.clean

    def steps(self, start: float, end: float) -> list[Step]:
        out, t = [], start
        while True:
            stop = min(end, (math.floor(t / HOUR) + 1) * HOUR)
            out.append(Step(t, stop, self.value(t)))
            if stop >= end:
                return out
            t = stop


def test_the_hull_drops_dominated_limits_and_the_multiplier_orders_the_periods():
    hull = Hull.of({**PROFILE, 180.0: (1800 * 1.30, 1800 * 270.0)})  # slower and costlier than 200 W: never runs
    assert hull.limits == (300.0, 275.0, 250.0, 225.0, 200.0)
    assert np.all(np.diff(hull.gains) < 0)  # convex: each step slower saves fewer joules per second
    lam = 150.0 * hull.gains[1]
    assert hull.choose(lam, 600.0) > hull.choose(lam, 150.0)  # slower while dirty


def test_the_schedule_spends_the_jit_s_time_where_the_grid_is_dirty_and_emits_less():
    signal = Swing()
    jit = 250.0
    budget = budget_of(PROFILE, jit, "cost", 1.0)
    blind = replay(signal, T0, PROFILE, 200.0, hold(jit))
    aware = replay(signal, T0, PROFILE, 200.0, carbon_aware(signal, PROFILE, budget, 24 * HOUR, 6 * HOUR), keep_trace=True)
    assert aware.time_s <= blind.time_s * (1 + 1e-9)
    assert aware.carbon_g < 0.97 * blind.carbon_g
    by_value: dict[float, set[float]] = {}
    for t, limit, _ in aware.trace:
        by_value.setdefault(signal.value(t), set()).add(limit)
    assert max(by_value[150.0]) > jit > min(by_value[600.0])
    # Chase's setting: within 2.5 % of the time at the highest limit
    chase = replay(
        signal, T0, PROFILE, 200.0, carbon_aware(signal, PROFILE, budget_of(PROFILE, jit, "max-slowdown", 1.025), 24 * HOUR, 6 * HOUR)
    )
    fastest = replay(signal, T0, PROFILE, 200.0, hold(300.0))
    assert chase.time_s <= 1.025 * fastest.time_s * (1 + 1e-6) and chase.carbon_g < fastest.carbon_g


def test_on_a_flat_grid_it_holds_the_jit_s_limit():
    steering = Steering(Hull.of(PROFILE), budget_of(PROFILE, 250.0, "cost", 1.0))
    assert Hull.of(PROFILE).limits[steering.choose([300.0] * 48, [HOUR] * 48, 300.0, HOUR)] == 250.0


def test_the_debt_is_never_behind_the_budget_at_a_period_s_end():
    steering = Steering(Hull.of(PROFILE), budget_of(PROFILE, 250.0, "cost", 1.0), horizon_s=6 * HOUR)
    k = steering.choose([150.0, 600.0] * 12, [HOUR] * 24, 600.0, HOUR)  # first period, nothing saved yet: no slower
    assert steering.hull.time[k] <= steering.budget
    assert steering.debt == 0.0


# --------------------------------------------------------------------------- under zeus run


@pytest.fixture(scope="module")
def reg():
    return grid_registry()


def run(reg, tmp_path: Path, power: str, csv_values, name: str, recurrences: int = 3) -> dict:
    folder = tmp_path / name
    folder.mkdir()
    lines = ["Time,Carbon Intensity"] + [  # three days of history before the job starts
        f"{datetime.fromtimestamp(T0 + h * HOUR, UTC):%Y-%m-%d %H:%M:%S},{csv_values(h)}" for h in range(-72, 24 * 60)
    ]
    (folder / "ci.csv").write_text("\n".join(lines) + "\n")
    trace_job(
        folder,
        'carbon_intensity = "ci.csv"\ntimezone = "UTC"\nstart = "2020-06-01T00:00:00Z"',
        f'plugin = "{power}"',
        recurrences,
        gpu="v100",
        name="carbon",
    )
    res = CliRunner().invoke(
        zcli.cli, ["run", str(folder / "job.toml"), "--output", str(folder / "out")], obj={"registry": reg}, catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    return json.loads((folder / "out" / "summary.json").read_text())


def swing(h: int) -> float:
    return 900.0 if (h // 3) % 2 == 0 else 100.0  # three dirty hours, three clean ones


def rows(tmp_path: Path, name: str) -> list[dict]:
    with open(tmp_path / name / "out" / "recurrences.csv") as f:
        return list(csv.DictReader(f))


def test_under_zeus_run_it_emits_less_than_the_jit_in_no_more_time(reg, tmp_path):
    blind = run(reg, tmp_path, "jit", swing, "jit", recurrences=1)
    aware = run(reg, tmp_path, "carbon-aware", swing, "aware", recurrences=1)
    assert aware["carbon_g"] < 0.995 * blind["carbon_g"]
    assert aware["time_s"] <= blind["time_s"]
    decisions = aware["power"]["carbon_aware"]
    assert len(decisions["periods_by_limit"]) >= 3 and decisions["decisions"] > 10
    assert aware["power"]["power_limit_by_batch_size"] == blind["power"]["power_limit_by_batch_size"]  # the JIT's profile


def test_a_later_recurrence_steers_from_the_stored_profile_as_the_benchmark_s_replay_does(reg, tmp_path):
    """Recurrence 2 does not profile again: its time, energy and grams are those of the fast replay
    (``benchmarks/carbon_replay.py``) of the same epochs from the same moment on the same grid."""
    run(reg, tmp_path, "carbon-aware", swing, "aware", recurrences=2)
    first, second = rows(tmp_path, "aware")
    wt = select(load_traces(TRACES, "v100"), "imagenet", "resnet50", "adadelta", 0.65)
    i = wt.index(256)
    profile = {
        float(p): (float(wt.time[i, j]), float(wt.time[i, j] * wt.power[i, j]))
        for j, p in enumerate(wt.power_limits)
        if not np.isnan(wt.time[i, j])
    }
    series = open_grid(GridOptions(carbon_intensity=str(tmp_path / "aware" / "ci.csv"), timezone="UTC"), reg, tmp_path).carbon
    with warnings.catch_warnings():
        warnings.simplefilter("error", GridWarning)  # the policy looks back no further than the series begins
        r = replay(
            series,
            T0 + float(first["time_s"]),
            profile,
            float(second["epochs"]),
            carbon_aware(series, profile, budget_of(profile, 175.0, "cost", 1.0), 24 * HOUR, 6 * HOUR),
        )
    assert float(second["time_s"]) == pytest.approx(r.time_s, rel=1e-5)  # the policy acts up to an iteration late
    assert float(second["energy_j"]) == pytest.approx(r.energy_j, rel=1e-5)
    assert float(second["carbon_g"]) == pytest.approx(r.carbon_g, rel=1e-4)


def test_on_a_flat_grid_under_zeus_run_it_is_the_jit(reg, tmp_path):
    blind = run(reg, tmp_path, "jit", lambda h: 300.0, "jit", recurrences=2)
    aware = run(reg, tmp_path, "carbon-aware", lambda h: 300.0, "aware", recurrences=2)
    assert aware["carbon_g"] == pytest.approx(blind["carbon_g"], rel=1e-9)
    assert aware["time_s"] == pytest.approx(blind["time_s"], rel=1e-9)

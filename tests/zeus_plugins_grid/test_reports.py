"""Emissions and money next to joules in `zeus run` and `zeus report` (trace device and workload): exact with a
constant, charged hour by hour across a change of the grid, bad [grid] tables refused with their key, and a dead
live service that never stops the job."""

from __future__ import annotations

import csv
import json
import re
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner
from grid_helpers import grid_registry, trace_job

from zeus_core import units
from zeus_core.cli import main as zcli


@pytest.fixture(scope="module")
def reg():
    return grid_registry()


def zeus(reg, *args):
    return CliRunner().invoke(zcli.cli, list(args), obj={"registry": reg}, catch_exceptions=False)


def job(tmp_path: Path, grid: str, power: str = 'plugin = "max"', recurrences: int = 2) -> Path:
    return trace_job(tmp_path, grid, power, recurrences)


def rows(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def test_a_constant_intensity_and_price_give_exact_columns_next_to_energy_in_every_report(reg, tmp_path):
    path = job(tmp_path, 'carbon_intensity = 437.5\nprice = 0.25\ncurrency = "EUR"')
    out = tmp_path / "out"
    res = zeus(reg, "run", str(path), "--output", str(out))
    assert res.exit_code == 0, res.output
    got = rows(out / "recurrences.csv")
    assert list(got[0])[6:] == [
        "energy_j",
        "cost",
        "reached",
        "power_limit_w",
        "carbon_g",
        "carbon_intensity_g_per_kwh",
        "cost_eur",
        "price_eur_per_kwh",
        "energy_method",
        "energy_error_j",
    ]
    assert {r["energy_method"] for r in got} == {"estimate"}  # the trace device's energy is a replayed estimate
    for r in got:
        assert float(r["carbon_g"]) == float(r["energy_j"]) * 437.5 / 3.6e6
        assert float(r["cost_eur"]) == float(r["energy_j"]) * 0.25 / 3.6e6
    summary = json.loads((out / "summary.json").read_text())
    assert summary["carbon_g"] == summary["energy_j"] * 437.5 / 3.6e6
    assert summary["cost_eur"] == summary["energy_j"] * 0.25 / 3.6e6
    assert list(summary)[:6] == ["job", "recurrences", "tries", "energy_j", "carbon_g", "carbon_intensity_g_per_kwh"]
    assert summary["grid"] == {"carbon_intensity": "constant:437.5", "price": "constant:0.25", "currency": "EUR", "tries_charged": 2}
    assert re.search(r"┃\s*carbon\s*┃", res.output) and "cost (EUR)" in res.output  # emissions in human units, money in EUR
    again = tmp_path / "again"
    rep = zeus(reg, "report", str(path), "--output", str(again))
    assert rep.exit_code == 0, rep.output
    # the total's emissions in human units in the table, and in the closing verdict
    assert rep.output.count(units.carbon(summary["carbon_g"])) >= 2
    assert json.loads((again / "summary.json").read_text())["carbon_g"] == summary["carbon_g"]


def test_a_run_from_a_dirty_night_into_a_clean_morning_pays_each_hour_at_its_own_intensity(reg, tmp_path):
    """At a fixed limit the trace device's power is constant, so the emissions are that power times each stretch's
    intensity: not the energy times the mean of the series over the run."""
    lines = ["Time,Carbon Intensity"] + [f"2020-06-{1 + h // 24:02d} {h % 24:02d}:00:00,{800 if h < 6 else 50}" for h in range(48)]
    (tmp_path / "ci.csv").write_text("\n".join(lines) + "\n")
    path = job(
        tmp_path,
        'carbon_intensity = "ci.csv"\ntimezone = "UTC"\nstart = "2020-06-01T00:00:00Z"',
        power='plugin = "fixed"\nlimit_w = 250',
        recurrences=1,
    )
    out = tmp_path / "out"
    res = zeus(reg, "run", str(path), "--output", str(out))
    assert res.exit_code == 0, res.output
    (r,) = rows(out / "recurrences.csv")
    energy, seconds = float(r["energy_j"]), float(r["time_s"])
    assert seconds > 8 * 3600  # the run crosses 06:00
    dirty = 6 * 3600
    expected = energy / seconds * (dirty * 800 + (seconds - dirty) * 50) / 3.6e6
    assert float(r["carbon_g"]) == pytest.approx(expected, rel=1e-9)
    assert float(r["carbon_g"]) != pytest.approx(energy * (800 * 6 + 50 * 42) / 48 / 3.6e6, rel=1e-3)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["carbon_g"] == pytest.approx(expected, rel=1e-9) and "held_s" not in summary["grid"]


@pytest.mark.parametrize(
    "grid, where, words",
    [
        ("price = 0.3", "$.grid", ["price needs its currency"]),
        ('carbon_intensity = "ci.csv"\ntimezone = "UTC"', "$.grid.carbon_intensity", ["ci.csv:3", "repeats row 2"]),
        ('carbon_intensity = "ci.csv"\ntimezone = "Mars/Olympus"', "$.grid.timezone", ["unknown time zone"]),
        (
            'carbon_intensity = "ci.csv"\ntimezone = "UTC"\nstart = "2021-01-01T00:00:00Z"',
            "$.grid.start",
            ["outside carbon_intensity's series"],
        ),
        ("carbon_intensity = -3", "$.grid.carbon_intensity", [">= 0"]),
        ("carbon_intensty = 300", "$.grid", ["carbon_intensty"]),
    ],
)
def test_a_bad_grid_table_is_bad_input_at_its_key(reg, tmp_path, grid, where, words):
    (tmp_path / "ci.csv").write_text(
        "Time,Carbon Intensity\n2020-06-01 00:00,1\n2020-06-01 00:00,2\n"
        if "repeats" in words[-1]
        else "Time,Carbon Intensity\n2020-06-01 00:00,1\n"
    )
    res = zeus(reg, "validate", str(job(tmp_path, grid)))
    assert res.exit_code == 2, res.output
    assert where in res.output
    for w in words:
        assert w in res.output


def test_the_carbon_aware_policy_without_a_grid_says_what_to_add(reg, tmp_path):
    path = job(tmp_path, "", power='plugin = "carbon-aware"')
    res = zeus(reg, "run", str(path))
    assert res.exit_code == 2, res.output
    assert "add [grid] carbon_intensity" in res.output


def test_a_dead_live_service_never_stops_the_job(reg, tmp_path, monkeypatch):
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("ELECTRICITYMAPS_TOKEN", "t")
    monkeypatch.setenv("ZEUS_ELECTRICITYMAPS_URL", f"http://127.0.0.1:{port}")
    out = tmp_path / "out"
    res = zeus(reg, "run", str(job(tmp_path, 'carbon_intensity = "electricitymaps:DE"\ntimeout_s = 0.5')), "--output", str(out))
    assert res.exit_code == 0, res.output
    # zeus run shows a plugin's Python warning as a warning of the zeus.warnings logger, once
    said = " ".join(res.output.split())
    assert said.count("zeus.warnings warning: electricitymaps:DE: the service did not answer") == 1, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tries"] == 2 and "carbon_g" not in summary
    assert summary["grid"]["tries_charged"] == 0 and summary["grid"]["held_s"] > 0
    assert "carbon_g" not in rows(out / "recurrences.csv")[0]


def test_the_example_job_validates_on_the_shared_data(reg):
    example = Path(__file__).resolve().parents[2] / "examples" / "zeus_nsdi23" / "imagenet_carbon.toml"
    res = zeus(reg, "validate", str(example))
    assert res.exit_code == 0, res.output
    assert "power=carbon-aware" in res.output

"""The result first: ``zeus run`` and ``zeus report`` end with a verdict in human units (energy, time, cost
with its unit, against the default and the oracle; carbon and money with ``[grid]``), the exact figures
staying in the files; on a terminal the progress is one live line, piped (or with ``-v``) a line per recurrence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from terminal import in_terminal

from zeus_core import units
from zeus_core.verdict import Verdict

REPO = Path(__file__).resolve().parents[2]
CIFAR = REPO / "examples" / "zeus_nsdi23" / "cifar100.toml"


@pytest.mark.parametrize(
    ("joules", "text"),
    [
        (0.0, "0 J"),
        (512.4, "512 J"),
        (999.96, "1.00 kJ"),  # what rounds to 1000 goes up a prefix
        (12_345.0, "12.3 kJ"),
        (4_451_029.08, "4.45 MJ (1.24 kWh)"),
        (23_448_001_085.0, "23.4 GJ (6.51 MWh)"),
    ],
)
def test_energy_reads_in_the_unit_of_its_size(joules, text):
    assert units.energy(joules) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(4.2, "4.20 s"), (59.99, "1.00 min"), (750.0, "12.5 min"), (37_752.09, "10.5 h"), (10_587_237.0, "123 days")],
)
def test_durations_read_in_s_min_h_days(seconds, text):
    assert units.duration(seconds) == text


def test_carbon_money_and_no_negative_zero():
    assert units.carbon(8754.2) == "8.75 kgCO2eq" and units.carbon(12.0) == "12.0 gCO2eq" and units.carbon(2.5e6) == "2.50 tCO2eq"
    assert units.money(6.783, "eur") == "6.78 EUR"
    assert units.significant(-0.0) == "0" and units.significant(-0.0001, 1) == "-0.0001"


def test_the_verdict_compares_each_figure_with_each_baseline_and_states_carbon_and_money():
    v = Verdict(
        job="j",
        recurrences=2,
        totals={"energy_j": 50_000.0, "time_s": 7200.0, "cost": 80_000.0},
        baselines={"default": {"energy_j": 100_000.0, "time_s": 3600.0, "cost": 80_000.0}},
        this_run="recurrence 2",
        grid={"carbon_g": 1500.0, "cost_eur": 0.42},
        eta=0.5,
    )
    lines = v.lines()
    assert lines[0] == "result of job 'j', the job so far (2 recurrences; this run: recurrence 2)"
    assert lines[1].split() == "energy 50.0 kJ 50.0 % less than the default (100 kJ)".split()
    assert lines[2].split() == "time 2.00 h 100.0 % more than the default (1.00 h)".split()
    assert lines[3].split() == "cost 80.0 kJ the same as the default (80.0 kJ)".split()
    assert lines[4].split() == ["carbon", "1.50", "kgCO2eq"]
    assert lines[5].split()[:3] == ["money", "0.42", "EUR"]
    assert "eta = 0.5, in joules" in lines[-1]


def _zeus(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "zeus_core.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def _after_verdict(out: str) -> list[str]:
    lines = out.splitlines()
    return lines[max(i for i, line in enumerate(lines) if line.startswith("result of job")) :]


def test_zeus_run_ends_with_the_verdict_and_the_files_keep_the_exact_figures(tmp_path):
    r = _zeus("run", str(CIFAR), "--set", "job.recurrences=12", "--output", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    head, energy, time, cost, unit, files = _after_verdict(r.stdout)  # the verdict is the last thing printed
    assert head == "result of job 'zeus-cifar100', the job so far (12 recurrences; this run: recurrences 1-12)"
    base = summary["workload"]["baselines"]
    saved = summary["workload"]["vs_default"]
    assert energy.split()[:5] == ["energy", *units.energy(summary["energy_j"]).split()]
    assert f"{units.percent(saved['energy_saved'])} less than the default ({units.si(base['default']['energy_j'], 'J')})" in energy
    assert "than the oracle" in energy
    assert time.split()[1:3] == units.duration(summary["time_s"]).split()
    assert f"{units.percent(saved['cost_saved'])} less than the default" in cost
    assert cost.split()[1:3] == units.si(summary["cost"], "J").split()
    assert "energy-time cost" in unit and "eta = 0.5" in unit and "in joules" in unit
    assert files == "(exact figures: out/recurrences.csv, out/summary.json)"
    # piped: every recurrence has its line, kept
    assert all(f"recurrence {n}: " in r.stdout for n in range(1, 13))
    # the files keep the exact figures (not the rounded ones)
    assert summary["energy_j"] == pytest.approx(
        sum(float(row.split(",")[6]) for row in (tmp_path / "out" / "recurrences.csv").read_text().splitlines()[1:])
    )

    rep = _zeus("report", str(CIFAR), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    said = _after_verdict(rep.stdout)
    assert said[0] == "result of job 'zeus-cifar100', the job so far (12 recurrences)"
    assert said[1:5] == [energy, time, cost, unit]  # the same verdict


def _kept_recurrence_lines(out: str) -> list[str]:
    """Recurrence lines that stay on the screen: ended by a newline, not redrawn over (rich's live
    display rewrites its line after a carriage return and an erase)."""
    return [line for line in out.replace("\r\n", "\n").split("\n") if "\r" not in line and line.startswith("recurrence ")]


def test_on_a_terminal_the_progress_is_one_live_line_and_with_v_every_line_shows(tmp_path):
    job = ("run", str(CIFAR), "--set", "job.recurrences=8")
    live = in_terminal([*job], tmp_path)
    assert _kept_recurrence_lines(live) == []
    assert "\x1b[2K" in live  # the live line, erased as it is redrawn and at the end
    assert "result of job 'zeus-cifar100'" in live.split("\x1b[2K")[-1]  # after the live line is gone

    verbose = in_terminal(["-v", *job, "--fresh"], tmp_path)
    assert [line.split(":")[0] for line in _kept_recurrence_lines(verbose)] == [f"recurrence {n}" for n in range(1, 9)]

"""The shared savings arithmetic and comparison table."""

import io

import pytest
from rich.console import Console

from zeus_core import savings
from zeus_core.comparison import Row as Row
from zeus_core.comparison import comparison_table


def test_savings_are_fractions_of_the_base_and_regret_is_extra_cost():
    s = savings({"energy_j": 75.0, "time_s": 120.0, "cost": 90.0}, {"energy_j": 100.0, "time_s": 100.0, "cost": 60.0})
    assert s == pytest.approx({"energy_saved": 0.25, "time_saved": -0.2, "cost_saved": -0.5, "regret": 0.5})
    assert savings({"energy_j": 1.0, "time_s": 1.0, "cost": 1.0}, {"energy_j": 0.0, "time_s": 0.0, "cost": 0.0}) == {
        "energy_saved": 0.0,
        "time_saved": 0.0,
        "cost_saved": 0.0,
        "regret": 0.0,
    }


def render(table) -> str:
    buf = io.StringIO()
    Console(file=buf, width=200).print(table)
    return buf.getvalue()


def test_large_totals_read_in_human_units():
    """The Alibaba replay's totals, once 23,448,001,085 J and 187,538,500 s."""
    rows = [Row("rule paper", "-", {"energy_j": 23_448_001_085.0, "time_s": 187_538_500.0, "cost": 35_166_312_987.0})]
    line = next(ln for ln in render(comparison_table("T", rows, base=None, reference=None)).splitlines() if "rule paper" in ln)
    assert "23.4 GJ (6.51 MWh)" in line and "2,171 days" in line and "35.2 GJ" in line


def test_table_rows_savings_and_missing_baselines():
    base = {"energy_j": 200.0, "time_s": 10.0, "cost": 100.0}
    best = {"energy_j": 100.0, "time_s": 10.0, "cost": 50.0}
    rows = [Row("this run", "(chosen)", {"energy_j": 150.0, "time_s": 10.0, "cost": 75.0}), Row("default", "b=8", base)]
    text = render(comparison_table("T", rows, base=base, reference=best, reference_label="regret vs best", decimals=1))
    line = next(ln for ln in text.splitlines() if "this run" in ln)
    assert "150 J" in line and "75.0 J" in line and "10.0 s" in line  # totals in human units
    assert "+25.0%" in line and "+50.0%" in line  # saves 25% energy/cost, 50% over the best
    assert "regret vs best" in text
    text = render(comparison_table("T", rows[:1], base=None, reference=None))
    line = next(ln for ln in text.splitlines() if "this run" in ln)
    assert line.count(" - ") + line.count("│ - ") >= 1 and "%" not in line

"""A job with [grid]: its emissions and energy cost scraped from /metrics over loopback, equal to summary.json."""

from __future__ import annotations

import csv
import json

import httpx
import pytest
from click.testing import CliRunner
from grid_helpers import grid_registry, trace_job
from pg_server import free_port
from prometheus_client.parser import text_string_to_metric_families

from zeus_core.cli import main as zcli
from zeus_plugins_prometheus import plugin as prom_plugin


def test_carbon_and_money_series_match_summary_json(tmp_path, monkeypatch):
    lines = ["Time,Carbon Intensity"] + [f"2020-06-{1 + h // 24:02d} {h % 24:02d}:00:00,{700 if h % 5 else 80}" for h in range(96)]
    (tmp_path / "ci.csv").write_text("\n".join(lines) + "\n")
    trace_job(
        tmp_path,
        'carbon_intensity = "ci.csv"\ntimezone = "UTC"\nstart = "2020-06-01T00:00:00Z"\nprice = 0.21\ncurrency = "GBP"',
        name="grid-metrics",
    )
    port = free_port()
    monkeypatch.setenv("ZEUS_METRICS_ADDRESS", f"127.0.0.1:{port}")
    reg = grid_registry(("prometheus", prom_plugin))
    try:
        res = CliRunner().invoke(
            zcli.cli, ["run", str(tmp_path / "job.toml"), "--output", str(tmp_path / "out")], obj={"registry": reg}, catch_exceptions=False
        )
        assert res.exit_code == 0, res.output
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    finally:
        if prom_plugin._exporter is not None:
            prom_plugin._exporter.close()
            prom_plugin._exporter = None
    series = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            series[(s.name, tuple(sorted(s.labels.items())))] = s.value
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    with open(tmp_path / "out" / "recurrences.csv") as f:
        last = list(csv.DictReader(f))[-1]
    j = (("zeus_job", "grid-metrics"),)
    money = (("currency", "GBP"), *j)
    assert 80 < summary["carbon_intensity_g_per_kwh"] < 700  # charged hour by hour, both values
    assert series[("zeus_carbon_grams_total", j)] == pytest.approx(summary["carbon_g"], rel=1e-9)
    assert series[("zeus_job_carbon_grams", j)] == pytest.approx(summary["carbon_g"], rel=1e-12)
    assert series[("zeus_energy_cost", money)] == pytest.approx(summary["cost_gbp"], rel=1e-9)
    assert series[("zeus_job_energy_cost", money)] == pytest.approx(summary["cost_gbp"], rel=1e-12)
    assert series[("zeus_carbon_intensity_grams_per_kwh", j)] == pytest.approx(float(last["carbon_intensity_g_per_kwh"]))

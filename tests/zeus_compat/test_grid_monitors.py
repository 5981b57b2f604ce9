"""Upstream's carbon and price monitors on the simulated NVIDIA driver and zeus's grid signals."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta

import pytest
import requests
from zeus.monitor.carbon import (
    CarbonEmissionMonitor,
    CarbonIntensityProvider,
    ElectrictyMapsClient,
    ZeusCarbonIntensityNotFoundError,
)
from zeus.monitor.price import EnergyCostMonitor, OpenEIClient, ZeusElectricityPriceHTTPError, ZeusElectricityPriceNotFoundError

from zeus_core.errors import BadInput
from zeus_core.grid import Step

J_PER_KWH = 3.6e6


class History(CarbonIntensityProvider):
    """A provider that knows the hours it is given (hour start -> gCO2eq/kWh)."""

    def __init__(self, values: dict[datetime, float]) -> None:
        self.values = values
        self.asked = 0

    def get_current_carbon_intensity(self) -> float:
        return self.values[max(self.values)]

    def get_recent_carbon_intensity(self) -> dict[datetime, float]:
        self.asked += 1
        return dict(self.values)

    @property
    def update_period(self) -> timedelta:
        return timedelta(hours=1)

    @property
    def history_length(self) -> int:
        return 24


def window(monitor, key="w", seconds=0.2):
    monitor.begin_window(key, sync_execution=False)
    time.sleep(seconds)
    return monitor.end_window(key, sync_execution=False)


def test_each_gpu_pays_the_intensity_of_its_hour(driver):
    driver(gpus=2, demand_w=300.0)
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    provider = History({hour - timedelta(hours=1): 900.0, hour: 250.0, hour + timedelta(hours=1): 50.0})
    monitor = CarbonEmissionMonitor(provider, cpu_indices=[])
    m = window(monitor)
    assert provider.asked == 1  # asked at the window's end
    assert set(m.gpu_carbon_emission) == {0, 1} and m.cpu_carbon_emission is None and m.dram_carbon_emission is None
    for gpu, grams in m.gpu_carbon_emission.items():
        # the loop's readings lie inside the window: at most its energy, charged at this hour's 250 g/kWh
        assert 0 < grams <= m.gpu_energy[gpu] * 250.0 / J_PER_KWH * 1.001
    m2 = window(monitor, "again")  # the loop ended with the last window; a new one starts
    assert m2.gpu_carbon_emission[0] > 0 and provider.asked == 2


def test_an_hour_the_provider_does_not_know_holds_the_last_value_and_none_known_is_nan(driver):
    driver(gpus=1, demand_w=200.0)
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    m = window(CarbonEmissionMonitor(History({hour - timedelta(hours=3): 400.0}), cpu_indices=[]))
    assert 0 < m.gpu_carbon_emission[0] <= m.gpu_energy[0] * 400.0 / J_PER_KWH * 1.001  # upstream: KeyError in its process
    m = window(CarbonEmissionMonitor(History({}), cpu_indices=[]))
    assert math.isnan(m.gpu_carbon_emission[0])  # nothing known: nothing to charge at, said plainly


def test_a_grid_value_is_opened_by_the_installed_grid_sources(driver, tmp_path):
    driver(gpus=1, demand_w=200.0)
    m = window(CarbonEmissionMonitor(420, cpu_indices=[]))  # the grid plugin's constant source
    assert 0 < m.gpu_carbon_emission[0] <= m.gpu_energy[0] * 420.0 / J_PER_KWH * 1.001
    cost = window(EnergyCostMonitor(0.25, currency="EUR", cpu_indices=[]))
    assert 0 < cost.gpu_energy_cost[0] <= cost.gpu_energy[0] * 0.25 / J_PER_KWH * 1.001
    with pytest.raises(BadInput, match="currency"):
        EnergyCostMonitor(0.25, cpu_indices=[])
    with pytest.raises(BadInput, match="nope.txt"):
        CarbonEmissionMonitor(str(tmp_path / "nope.txt"), cpu_indices=[])


def test_windows_are_named_once(driver):
    driver(gpus=1)
    monitor = CarbonEmissionMonitor(300, cpu_indices=[])
    monitor.begin_window("a", sync_execution=False)
    with pytest.raises(ValueError, match="'a' already exists"):
        monitor.begin_window("a", sync_execution=False)
    with pytest.raises(ValueError, match="'b' does not exist"):
        monitor.end_window("b")
    monitor.end_window("a", sync_execution=False)


class Broken:
    """A grid signal that fails when charged: the loop's failure must reach end_window."""

    source = "broken"

    def steps(self, start: float, end: float) -> list[Step]:
        raise OSError("disk gone")


def test_a_failure_of_the_loop_is_raised_by_end_window_not_waited_for(driver):
    driver(gpus=1)
    monitor = CarbonEmissionMonitor(Broken(), cpu_indices=[])
    monitor.begin_window("a", sync_execution=False)
    with pytest.raises(RuntimeError, match="OSError: disk gone"):
        monitor.end_window("a", sync_execution=False)


class Answer:
    def __init__(self, body):
        self.body = body
        self.text = str(body)

    def json(self):
        if isinstance(self.body, Exception):
            raise self.body
        return self.body


def test_service_answers_become_upstreams_errors(driver, monkeypatch):
    driver(gpus=1)
    answers = {"api.electricitymap.org": Answer({"error": "No recent data for zone"}), "api.openei.org": Answer({"items": []})}
    seen = []

    def get(url, headers=None, timeout=None):
        seen.append((url, headers, timeout))
        return next(a for host, a in answers.items() if host in url)

    monkeypatch.setattr(requests, "get", get)
    monkeypatch.setenv("ELECTRICITYMAPS_TOKEN", "t0k")
    with pytest.raises(ZeusCarbonIntensityNotFoundError, match=r"not found at `\(48.1, 11.6\)`"):
        ElectrictyMapsClient((48.1, 11.6), estimate=True).get_current_carbon_intensity()
    assert seen[-1] == (
        "https://api.electricitymap.org/v3/carbon-intensity/latest?lat=48.1&lon=11.6&disableEstimations=False&emissionFactorType=direct",
        {"auth-token": "t0k"},
        30.0,
    )
    with pytest.raises(ZeusElectricityPriceNotFoundError, match="No rates found for lat, lon"):
        EnergyCostMonitor(OpenEIClient((38.0, -78.0), "x"), cpu_indices=[])  # the tariff is fetched when the monitor is made
    answers["api.openei.org"] = Answer(requests.exceptions.JSONDecodeError("Expecting value", "<html>", 0))
    with pytest.raises(ZeusElectricityPriceHTTPError, match="Failed to retrieve"):
        OpenEIClient((38.0, -78.0), "x").get_current_electricity_prices()

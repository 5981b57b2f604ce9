"""Upstream's public import paths, types and messages, as upstream's users write them."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest
import zeus
from zeus.callback import Callback, CallbackSet
from zeus.monitor import Measurement, PowerMonitor, TemperatureMonitor, ZeusMonitor
from zeus.optimizer.power_limit import (
    Energy,
    GlobalPowerLimitOptimizer,
    HFGlobalPowerLimitOptimizer,
    MaxSlowdownConstraint,
    PowerLimitMeasurement,
    Time,
    ZeusCost,
)
from zeus.utils.env import get_env
from zeus.utils.metric import zeus_cost

COMPAT = Path(__file__).resolve().parents[2] / "plugins" / "zeus"


def test_zeus_resolves_to_the_compat_package():
    assert Path(zeus.__file__).resolve().is_relative_to(COMPAT)
    # upstream's faces (PowerDomain members, whole degrees) over the core's samplers
    assert PowerMonitor.__module__ == "zeus.monitor.power" and PowerMonitor.__mro__[1].__module__ == "zeus_core.inloop.timeline"
    assert TemperatureMonitor.__module__ == "zeus.monitor.temperature"
    assert TemperatureMonitor.__mro__[1].__module__ == "zeus_core.inloop.timeline"
    assert ZeusMonitor.__module__ == "zeus.monitor.energy"


def test_measurement_is_upstreams_dataclass():
    m = Measurement(time=2.0, gpu_energy={0: 10.0, 3: 5.0}, cpu_energy={0: 7.0})
    assert dataclasses.asdict(m) == {
        "time": 2.0,
        "gpu_energy": {0: 10.0, 3: 5.0},
        "cpu_energy": {0: 7.0},
        "dram_energy": None,
        "soc_energy": None,
    }
    assert m.total_energy == 15.0  # GPUs only, as upstream


def test_zeus_cost_takes_upstreams_keywords():
    assert zeus_cost(energy=100.0, time=2.0, eta_knob=0.25, max_power=300) == pytest.approx(0.25 * 100 + 0.75 * 300 * 2)


def test_get_env(monkeypatch):
    monkeypatch.setenv("ZC_INT", "12")
    monkeypatch.setenv("ZC_BOOL", "False")
    monkeypatch.setenv("ZC_BAD", "yes")
    assert get_env("ZC_INT", int) == 12
    assert get_env("ZC_BOOL", bool) is False
    assert get_env("ZC_MISSING", int, default=3) == 3
    with pytest.raises(ValueError, match="Missing environment variable 'ZC_MISSING'"):
        get_env("ZC_MISSING", str)
    with pytest.raises(ValueError, match="Strange boolean"):
        get_env("ZC_BAD", bool)


def test_callback_set_forwards_in_order():
    seen = []

    class Recorder(Callback):
        def __init__(self, name):
            self.name = name

        def on_evaluate(self, metric):
            seen.append((self.name, metric))

        def on_step_begin(self):
            seen.append((self.name, "step"))

    both = CallbackSet([Recorder("a"), Recorder("b")])
    both.on_step_begin()
    both.on_evaluate(0.5)
    both.on_epoch_end()  # a no-op on both
    assert seen == [("a", "step"), ("b", "step"), ("a", 0.5), ("b", 0.5)]


MEASURED = [
    PowerLimitMeasurement(300, 1000.0, 10.0),
    PowerLimitMeasurement(250, 900.0, 10.5),
    PowerLimitMeasurement(200, 800.0, 13.0),
    PowerLimitMeasurement(150, 850.0, 18.0),
]


def test_selectors():
    assert Energy().select(MEASURED) == 200
    assert Time().select(MEASURED) == 300
    assert MaxSlowdownConstraint(1.1).select(MEASURED) == 250
    assert MaxSlowdownConstraint(1.3).select(MEASURED) == 200
    # eta 0: time only; eta 1: energy only; world_size scales the time term's max power
    assert ZeusCost(0.0).select(MEASURED) == 300
    assert ZeusCost(1.0).select(MEASURED) == 200
    assert ZeusCost(0.5).select(MEASURED) == 300  # 0.5*1000 + 0.5*300*10 = 2000 beats 2025 at 250 W
    assert ZeusCost(0.9).select(MEASURED) == 200
    assert ZeusCost(0.95, world_size=8).select(MEASURED) == 250  # 8 GPUs' max power weighs time more


def test_selector_errors():
    with pytest.raises(ValueError, match="eta_knob must be between 0 and 1"):
        ZeusCost(1.5)
    with pytest.raises(ValueError, match="world_size must be greater than or equal to 1"):
        ZeusCost(0.5, world_size=0)
    with pytest.raises(ValueError, match="greater than or equal to 1.0. Got 0.9"):
        MaxSlowdownConstraint(0.9)


def test_hf_callback_takes_every_argument_of_the_optimizer():
    assert inspect.signature(HFGlobalPowerLimitOptimizer.__init__) == inspect.signature(GlobalPowerLimitOptimizer.__init__)
    assert {"optimum_selector", "profile_path"} <= set(inspect.signature(HFGlobalPowerLimitOptimizer.__init__).parameters)

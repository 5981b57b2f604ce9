"""The simulated driver's temperature quirk (issue 37 item 2): off by default, and when on, the die
heats towards its steady state with its time constant, leakage adds power within the limit, and the
energy counter integrates the draw it reports."""

from __future__ import annotations

import math
import time

import pytest

from zeus_plugins_nvml import fake_pynvml


@pytest.fixture
def nvml(tmp_path, monkeypatch):
    def make(**gpu):
        path = fake_pynvml.create(tmp_path / "nvml.json", [fake_pynvml.FakeGpu(**gpu)], privileged=True)
        mod = fake_pynvml.install(path, monkeypatch)
        mod.nvmlInit()
        return mod, mod.nvmlDeviceGetHandleByIndex(0)

    return make


def _state(g: dict, at: float) -> tuple[float, float]:
    return fake_pynvml.temperature_at(g, at), fake_pynvml._power_at(g, at)


def test_off_by_default_the_temperature_and_draw_stay_constant(nvml):
    nv, h = nvml(demand_w=250.0)
    t0, e0 = nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU), nv.nvmlDeviceGetTotalEnergyConsumption(h)
    time.sleep(0.05)
    assert nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU) == t0 == 45
    assert nv.nvmlDeviceGetPowerUsage(h) == 250_000
    g = fake_pynvml.read_state()["gpus"][0]
    now = time.monotonic()
    assert fake_pynvml._drawn_j(g, now) == pytest.approx(250.0 * (now - g["anchor_t"]))
    assert nv.nvmlDeviceGetTotalEnergyConsumption(h) > e0


def test_the_die_heats_with_its_time_constant_and_leakage_adds_power_within_the_limit(nvml):
    nv, h = nvml(demand_w=250.0, thermal_tau_s=10.0, ambient_c=40.0, temperature_c=40.0, thermal_c_per_w=0.12, leakage_w_per_c=1.0)
    g = fake_pynvml.read_state()["gpus"][0]
    a = g["anchor_t"]
    steady = 40.0 + 0.12 * 250.0  # 70 degrees
    assert _state(g, a) == pytest.approx((40.0, 250.0))
    temp, power = _state(g, a + 10.0)  # one time constant: 63 % of the way
    assert temp == pytest.approx(steady - 30.0 * math.exp(-1))
    assert power == pytest.approx(250.0 + (temp - 40.0))
    assert _state(g, a + 1000.0) == pytest.approx((steady, 280.0))
    # the counter is the integral of that draw (checked against a fine Riemann sum)
    n = 20000
    riemann = sum(fake_pynvml._power_at(g, a + (k + 0.5) * 30.0 / n) for k in range(n)) * 30.0 / n
    assert fake_pynvml._drawn_j(g, a + 30.0) == pytest.approx(riemann, rel=1e-6)
    # under a 260 W limit the draw stops at the limit, and leakage is then paid in work
    nv.nvmlDeviceSetPowerManagementLimit(h, 260_000)
    g = fake_pynvml.read_state()["gpus"][0]
    a = g["anchor_t"]
    assert fake_pynvml._power_at(g, a + 1000.0) == pytest.approx(260.0)
    riemann = sum(fake_pynvml._power_at(g, a + (k + 0.5) * 60.0 / n) for k in range(n)) * 60.0 / n
    assert fake_pynvml._drawn_j(g, a + 60.0) == pytest.approx(riemann, rel=1e-5)  # across the point where it reaches the limit


def test_the_reported_temperature_follows_the_load(nvml):
    nv, h = nvml(demand_w=300.0, thermal_tau_s=0.2, ambient_c=40.0, temperature_c=40.0, thermal_c_per_w=0.1)
    time.sleep(0.6)  # three time constants: 95 % of the 30 degrees
    hot = nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
    assert 67 <= hot <= 70
    assert fake_pynvml.useful_w(0) == pytest.approx(300.0, abs=0.5)  # uncapped: leakage comes on top
    fake_pynvml.set_demand(0, 100.0)
    time.sleep(0.6)
    assert nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU) <= 52  # cooling towards 50

"""Two lines in a script: emissions and energy cost of ZeusMonitor windows (CarbonEmissionMonitor,
EnergyCostMonitor) and of PowerLimitOptimizer epochs, on the simulated NVIDIA driver and the wall clock."""

from __future__ import annotations

import time

import pytest
from inloop_helpers import QUICK_JIT, fake_gpus, run_epochs, spin

from zeus_core import PowerLimitOptimizer, ZeusMonitor
from zeus_core.errors import BadInput
from zeus_core.inloop.carbon import CarbonEmissionMonitor, EnergyCostMonitor


@pytest.fixture
def gpus(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=2)


def test_a_constant_intensity_charges_each_gpu_and_the_window_exactly(gpus):
    with CarbonEmissionMonitor(gpu_indices=[0, 1], cpu_indices=[], carbon_intensity=412.0) as mon:
        mon.begin_window("train")
        spin(0.05)
        m = mon.end_window("train")
    assert m.total_energy > 0 and m.time >= 0.05
    for i in (0, 1):
        assert m.gpu_carbon_emission[i] == m.gpu_energy[i] * 412.0 / 3.6e6
    assert m.carbon_g == m.energy_j * 412.0 / 3.6e6 and m.carbon_intensity_g_per_kwh == 412.0


def test_a_window_across_steps_of_the_series_pays_each_value(gpus, tmp_path):
    now = time.time()  # steps of 0.2 s alternating 500 / 100 for a minute: any 0.8 s window spans both
    rows = "".join(f"{now - 5 + 0.2 * k:.3f},{500 if k % 2 else 100}\n" for k in range(325))
    (tmp_path / "ci.csv").write_text("time,carbon_intensity\n" + rows)
    with CarbonEmissionMonitor(gpu_indices=[0], cpu_indices=[], carbon_intensity="ci.csv") as mon:
        mon.begin_window("train")
        spin(0.8)
        m = mon.end_window("train")
    assert 150 < m.carbon_intensity_g_per_kwh < 450  # between 1/4 and 3/4 of the window at each: charged as each
    assert m.carbon_g == pytest.approx(m.energy_j * m.carbon_intensity_g_per_kwh / 3.6e6, rel=1e-12)


def test_an_energy_cost_monitor_on_a_monitor_the_script_already_has(gpus):
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as zm:
        with EnergyCostMonitor(zm, price=0.31, currency="eur") as mon:
            mon.begin_window("step")
            spin(0.02)
            m = mon.end_window("step")
        assert m.currency == "EUR" and m.cost == m.energy_j * 0.31 / 3.6e6 and m.gpu_energy_cost[0] > 0
        zm.begin_window("still-open")  # the script's own monitor is not closed with it
        zm.end_window("still-open")
    with pytest.raises(BadInput, match="currency must be a three-letter ISO 4217 code"):
        EnergyCostMonitor(gpu_indices=[0], cpu_indices=[], price=0.31, currency="euro")


def test_power_limit_optimizer_epochs_carry_their_grams(gpus):
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as mon:
        with PowerLimitOptimizer(
            mon,
            policy="jit",
            job="plo-grid",
            options=QUICK_JIT,
            batch_size=64,
            grid={"carbon_intensity": 250.0, "price": 0.2, "currency": "USD"},
        ) as plo:
            run_epochs(plo, epochs=2, steps=150)
        for epoch in plo.epochs:
            assert epoch["carbon_g"] == epoch["energy_j"] * 250.0 / 3.6e6
            assert epoch["grid"]["cost_usd"] == epoch["energy_j"] * 0.2 / 3.6e6
        with pytest.raises(BadInput, match=r"grid: .*carbon_intensity must be a finite number >= 0"):
            PowerLimitOptimizer(mon, policy="jit", job="plo-grid", grid={"carbon_intensity": -1})


def test_the_carbon_aware_policy_steers_in_the_user_s_loop(gpus, tmp_path):
    now = time.time()
    rows = "".join(f"{now - 30 + 0.25 * k:.3f},{900 if k % 4 < 2 else 100}\n" for k in range(600))
    (tmp_path / "ci.csv").write_text("time,carbon_intensity\n" + rows)
    with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as mon:
        with PowerLimitOptimizer(
            mon, policy="carbon-aware", job="plo-carbon", options=QUICK_JIT, batch_size=64, grid={"carbon_intensity": "ci.csv"}
        ) as plo:
            run_epochs(plo, epochs=3, steps=150, step_s=0.002)
            decisions = plo.policy.decisions
            assert decisions and plo.power_limit == decisions[-1][2]
            assert all(now - 30 < t <= time.time() for t, _, _ in decisions)  # decided on the wall clock
        assert all("carbon_g" in e for e in plo.epochs)
    with pytest.raises(BadInput, match="add \\[grid\\] carbon_intensity"):
        with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as mon:
            PowerLimitOptimizer(mon, policy="carbon-aware", job="plo-carbon2", options=QUICK_JIT, batch_size=64)

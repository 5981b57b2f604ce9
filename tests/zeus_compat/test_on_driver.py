"""The monitor and the power-limit optimizer on the simulated NVIDIA driver, as upstream's users drive them."""

from __future__ import annotations

import json
import time
import warnings

import pytest
from zeus.device import get_gpus
from zeus.device.gpu import ZeusGPUNotFoundError
from zeus.monitor import ZeusMonitor
from zeus.monitor.energy import ZERO_ENERGY_WARNING
from zeus.optimizer.power_limit import Done, Energy, GlobalPowerLimitOptimizer, Profiling, Ready


def test_windows_measure_the_driver_and_log_upstreams_format(driver, tmp_path):
    nvml = driver(gpus=2, demand_w=200.0)
    log = tmp_path / "log.csv"
    log.write_text("left,over\n1,2\n")
    monitor = ZeusMonitor(cpu_indices=[], log_file=log)
    assert monitor.gpu_indices == [0, 1]
    monitor.begin_window("a", sync_execution=False)
    time.sleep(0.05)
    m = monitor.end_window("a", sync_execution=False)
    assert set(m.gpu_energy) == {0, 1}
    for joules in m.gpu_energy.values():  # 200 W drawn for the window's time (the driver's counter)
        assert joules == pytest.approx(200.0 * m.time, rel=0.1)
    assert m.total_energy == pytest.approx(sum(m.gpu_energy.values()))
    with pytest.raises(ValueError, match="Measurement window 'a' does not exist"):
        monitor.end_window("a")
    monitor.begin_window("b", sync_execution=False)
    with pytest.raises(ValueError, match="already exists"):
        monitor.begin_window("b", sync_execution=False)
    cancelled = monitor.end_window("b", sync_execution=False, cancel=True)
    assert cancelled.time == 0.0 and cancelled.gpu_energy == {0: 0.0, 1: 0.0}
    monitor.close()
    lines = log.read_text().splitlines()
    assert lines[0] == "start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy"  # truncated, upstream's columns
    assert len(lines) == 2  # the cancelled window is not logged
    start, name, elapsed, *energy = lines[1].split(",")
    assert name == "a" and float(elapsed) == m.time and [float(e) for e in energy] == [m.gpu_energy[0], m.gpu_energy[1]]
    assert nvml is not None


def test_the_log_takes_any_window_name_as_upstream(driver, tmp_path):
    """A window named by an int or a tuple is measured and logged by its str(), as upstream writes it
    (this used to lose the measurement with a TypeError from the log's join)."""
    driver(gpus=1, demand_w=100.0)
    log = tmp_path / "log.csv"
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[], log_file=log)
    names = [3, ("epoch", 1), None]
    got = []
    for name in names:
        monitor.begin_window(name, sync_execution=False)
        time.sleep(0.01)
        got.append(monitor.end_window(name, sync_execution=False))
    monitor.close()
    assert all(set(m.gpu_energy) == {0} for m in got)
    rows = log.read_text().splitlines()[1:]
    assert [r.split(",", 2)[1] for r in rows] == ["3", "('epoch'", "None"]  # upstream's row: the key as str() gives it
    assert rows[1].split(",")[1:3] == ["('epoch'", " 1)"]


def _just_after_a_counter_update(period_s: float) -> None:
    """Wait until the simulated counter (which moves at multiples of ``period_s`` of this clock) has just moved."""
    while time.monotonic() % period_s > 0.01:
        time.sleep(0.002)


def test_zero_energy_warns_with_upstreams_text_or_approximates(driver):
    # the counter moves every 0.2 s: seen moving by the 0.3 s check at open (so trusted), and still
    # within a window that begins just after a move and lasts well under 0.2 s
    driver(gpus=1, counter_period_s=0.2, demand_w=150.0)
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    _just_after_a_counter_update(0.2)
    monitor.begin_window("short", sync_execution=False)
    with pytest.warns(UserWarning) as caught:
        m = monitor.end_window("short", sync_execution=False)
    assert str(caught[0].message) == ZERO_ENERGY_WARNING
    assert m.gpu_energy == {0: 0.0}
    approx = ZeusMonitor(gpu_indices=[0], cpu_indices=[], approx_instant_energy=True)
    _just_after_a_counter_update(0.2)
    approx.begin_window("short", sync_execution=False)
    time.sleep(0.02)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = approx.end_window("short", sync_execution=False)
    assert m.gpu_energy[0] == pytest.approx(150.0 * m.time, rel=0.2)


def test_gpu_indices_are_cuda_visible_indices(driver, monkeypatch):
    driver(gpus=4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    gpus = get_gpus()
    assert len(gpus) == 2
    with pytest.raises(ZeusGPUNotFoundError):
        gpus.get_power_management_limit(2)
    gpus.set_power_management_limit(1, 250_000)  # CUDA index 1 is the driver's GPU 3
    from zeus_plugins_nvml import fake_pynvml

    limits = [g["limit_w"] for g in fake_pynvml.read_state()["gpus"]]
    assert limits[3] == 250.0 and limits[0] in (None, 400.0) and limits[2] in (None, 400.0)


def _limits_set(monkeypatch) -> list[int]:
    """Every power limit (mW) the simulated driver is told to set, in order."""
    from zeus_plugins_nvml import fake_pynvml

    seen: list[int] = []
    original = fake_pynvml.nvmlDeviceSetPowerManagementLimit

    def record(handle, limit_mw):
        seen.append(limit_mw)
        return original(handle, limit_mw)

    monkeypatch.setattr(fake_pynvml, "nvmlDeviceSetPowerManagementLimit", record)
    return seen


def test_upstreams_profiling_sequence_when_an_epoch_ends_mid_profiling(driver, monkeypatch, tmp_path):
    driver(gpus=1, min_limit_w=100.0, max_limit_w=400.0, default_limit_w=300.0)
    seen = _limits_set(monkeypatch)
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    profile = tmp_path / "profile.json"
    plo = GlobalPowerLimitOptimizer(monitor, wait_steps=0, warmup_steps=1, profile_steps=2, pl_step=100, profile_path=profile)
    assert plo.power_limits == [400_000, 300_000, 200_000, 100_000]
    assert isinstance(plo.state, Ready) and plo.current_power_limit == 400_000
    for _ in range(6):  # 400 W: warm up 1, measure 2; 300 W: warm up 1, measure 1 of 2
        plo.on_step_begin()
    assert isinstance(plo.state, Profiling) and plo.state.current_power_limit == 300_000
    plo.on_epoch_end()  # the epoch ends mid-profiling: cancelled, back to the maximum, 300 W again next epoch
    assert isinstance(plo.state, Ready) and plo.state.next_power_limit == 300_000
    assert monitor.measurement_states == {} and plo.current_power_limit == 400_000
    steps = 0
    while not isinstance(plo.state, Done):
        plo.on_step_begin()
        plo.on_step_end()
        steps += 1
        assert steps < 100
    assert [m.power_limit for m in plo.measurements] == [400, 300, 200, 100]
    optimum = plo.state.optimal_power_limit
    # upstream's sequence: the maximum, 300 W (cut by the epoch end), the maximum, 300 W again, 200, 100, the optimum
    assert seen == [400_000, 300_000, 400_000, 300_000, 200_000, 100_000] + ([optimum] if optimum != 100_000 else [])
    assert plo.current_power_limit == plo.state.optimal_power_limit
    saved = json.loads(profile.read_text())
    assert [m["power_limit"] for m in saved["measurements"]] == [400, 300, 200, 100]
    # a second run loads the profile: Done from the start, the optimum chosen by its selector
    again = GlobalPowerLimitOptimizer(monitor, optimum_selector=Energy(), profile_path=profile)
    assert isinstance(again.state, Done)
    assert again.state.optimal_power_limit == 1000 * min(saved["measurements"], key=lambda m: m["energy"])["power_limit"]


def test_without_privilege_the_optimizer_raises_runtime_error(driver):
    driver(gpus=1, privileged=False, default_limit_w=300.0)
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    with pytest.raises(RuntimeError, match="SYS_ADMIN capability is required to modify GPU power limits"):
        GlobalPowerLimitOptimizer(monitor)


def test_no_visible_gpu_measures_none(driver, monkeypatch):
    driver(gpus=2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monitor = ZeusMonitor(cpu_indices=[])
    assert monitor.gpu_indices == []
    monitor.begin_window("w", sync_execution=False)
    assert monitor.end_window("w", sync_execution=False).gpu_energy == {}

"""Upstream's power and temperature monitors and ``python -m zeus.monitor`` on the simulated NVIDIA driver:
``PowerDomain`` members, upstream's timeline keys, ``power_domain=``, ``PowerSample``, ``TemperatureSample``."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time

import pytest
from zeus.device.gpu import ZeusGPUInitError
from zeus.monitor import PowerDomain, PowerMonitor, TemperatureMonitor
from zeus.monitor import power as power_module
from zeus.monitor.power import PowerSample, infer_counter_update_period
from zeus.monitor.temperature import TemperatureSample

UPSTREAM_KEYS = ["device_instant", "device_average", "memory_average"]


def test_power_domain_members_and_values():
    assert [d.name for d in PowerDomain] == ["DEVICE_INSTANT", "DEVICE_AVERAGE", "MEMORY_AVERAGE"]
    assert [d.value for d in PowerDomain] == UPSTREAM_KEYS
    assert PowerDomain("device_average") is PowerDomain.DEVICE_AVERAGE


def test_samples_are_upstreams_dataclasses():
    s = PowerSample(timestamp=1.5, gpu_index=0, power_mw=250_000.0)
    assert [f.name for f in dataclasses.fields(PowerSample)] == ["timestamp", "gpu_index", "power_mw"]
    assert s.power_mw / 1000.0 == 250.0
    t = TemperatureSample(timestamp=1.5, gpu_index=1, temperature_c=45)
    assert [f.name for f in dataclasses.fields(TemperatureSample)] == ["timestamp", "gpu_index", "temperature_c"]
    assert t.temperature_c == 45


def test_measurement_domains_are_power_domain_members(driver):
    driver(gpus=2, demand_w=250.0, memory_power_w=30.0)
    pm = PowerMonitor(update_period=0.05)
    try:
        assert pm.gpu_indices == [0, 1]
        assert PowerDomain.DEVICE_INSTANT in pm.measurement_domains
        assert pm.measurement_domains == list(PowerDomain)
        assert all(isinstance(d, PowerDomain) for d in pm.measurement_domains)
        time.sleep(0.2)
        timelines = pm.get_all_power_timelines()
        assert list(timelines) == UPSTREAM_KEYS
        assert set(timelines["device_instant"]) == {0, 1}
        assert timelines["memory_average"][0][-1][1] == pytest.approx(30.0)  # watts
        assert pm.get_power_timeline("device_average", gpu_index=1).keys() == {1}
        assert pm.get_power_timeline(PowerDomain.DEVICE_INSTANT, gpu_index=7) == {}  # not monitored: left out
        assert pm.get_power() == {0: 250.0, 1: 250.0}
        assert pm.get_power(power_domain="memory_average") == {0: 30.0, 1: 30.0}
        assert pm.get_power(power_domain=PowerDomain.DEVICE_AVERAGE) == {0: 250.0, 1: 250.0}
    finally:
        pm.stop()


def test_get_energy_by_power_domain(driver):
    driver(gpus=1, demand_w=200.0, memory_power_w=20.0)
    pm = PowerMonitor(gpu_indices=[0], update_period=0.05)
    try:
        t0 = time.time()
        time.sleep(0.3)
        t1 = time.time()
        assert pm.get_energy(t0, t1) == {0: pytest.approx(200.0 * (t1 - t0), rel=0.05)}
        assert pm.get_energy(t0, t1, power_domain="memory_average") == {0: pytest.approx(20.0 * (t1 - t0), rel=0.05)}
        assert pm.get_energy(t0, t1, power_domain=PowerDomain.DEVICE_AVERAGE)[0] == pytest.approx(200.0 * (t1 - t0), rel=0.05)
        assert pm.get_energy(0.0, 1.0) == {0: 0.0}  # before the first reading: nothing
    finally:
        pm.stop()


def test_domains_asked_for_and_upstreams_errors(driver):
    driver(gpus=1, demand_w=200.0)  # no memory power on this board
    pm = PowerMonitor(gpu_indices=[0], update_period=0.05, power_domains=["device_average"])
    try:
        assert pm.measurement_domains == [PowerDomain.DEVICE_AVERAGE]
        assert list(pm.get_all_power_timelines()) == ["device_average"]
        with pytest.raises(ValueError, match="Power domain device_instant is not being monitored"):
            pm.get_power()
        with pytest.raises(ValueError, match="Power domain device_instant is not being monitored"):
            pm.get_power_timeline("device_instant")
        assert pm.get_power(power_domain="device_average") == {0: 200.0}
        t = time.time()
        assert set(pm.get_energy(t - 1, t)) == {0}  # average, as upstream falls back to it
    finally:
        pm.stop()
    with pytest.raises(ValueError, match="memory_average is not supported"):
        PowerMonitor(gpu_indices=[0], update_period=0.05, power_domains=[PowerDomain.MEMORY_AVERAGE])
    with pytest.raises(ValueError, match="is not a valid PowerDomain"):
        PowerMonitor(gpu_indices=[0], update_period=0.05, power_domains=["instant"])
    with pytest.raises(ValueError, match="must be either `None` or non-empty"):
        PowerMonitor(gpu_indices=[])
    with pytest.raises(ValueError, match="must be either `None` or non-empty"):
        PowerMonitor(power_domains=[])
    memory_only = PowerMonitor(gpu_indices=[0], update_period=0.05, power_domains=["device_instant"])
    memory_only._upstream_domains = [PowerDomain.MEMORY_AVERAGE]  # as upstream's test builds a memory-only monitor
    try:
        with pytest.raises(ValueError, match="Neither"):
            memory_only.get_energy(0.0, 1.0)
    finally:
        memory_only.stop()


def test_update_period_none_infers_from_the_counter(driver):
    driver(gpus=2, demand_w=200.0)
    assert infer_counter_update_period([0, 1]) == pytest.approx(0.05)  # a steady reading: 0.1 s, halved
    pm = PowerMonitor(gpu_indices=[0])
    try:
        assert pm.update_period == pytest.approx(0.05)
    finally:
        pm.stop()


def test_infer_halves_the_fastest_model_and_caps_at_a_tenth(driver, monkeypatch):
    driver(gpus=2)
    periods = iter([0.4, 0.12])
    monkeypatch.setattr(power_module, "_infer_counter_update_period_single", lambda index: next(periods))
    monkeypatch.setattr(power_module.get_gpus().__class__, "get_name", lambda self, i: ["A40", "V100"][i], raising=False)
    assert infer_counter_update_period([0, 1]) == pytest.approx(0.06)
    monkeypatch.setattr(power_module, "_infer_counter_update_period_single", lambda index: 0.5)
    assert infer_counter_update_period([0]) == pytest.approx(0.1)  # 0.25 s is too slow: 0.1 s


def test_no_gpu_library_is_zeus_gpu_init_error(driver, monkeypatch):
    monkeypatch.delenv("ZEUS_FAKE_NVML", raising=False)
    with pytest.raises(ZeusGPUInitError):
        PowerMonitor(update_period=0.1)


def test_temperature_monitor_gives_whole_degrees(driver):
    driver(gpus=2, temperature_c=47)
    tm = TemperatureMonitor(update_period=0.05)
    try:
        time.sleep(0.1)
        assert tm.get_temperature() == {0: 47, 1: 47}
        assert all(isinstance(c, int) for c in tm.get_temperature().values())
        timeline = tm.get_temperature_timeline(gpu_index=1)
        assert list(timeline) == [1] and all(isinstance(c, int) and c == 47 for _, c in timeline[1])
        assert tm.get_temperature_timeline(gpu_index=5) == {}
    finally:
        tm.stop()
    with pytest.raises(ValueError, match="must be either `None` or non-empty"):
        TemperatureMonitor(gpu_indices=[])


def test_cli_power_queries_and_integrates_the_domain_asked(monkeypatch, capsys):
    """As upstream's test: the power subcommand prints the domain asked for and integrates the same one."""
    from unittest import mock

    from zeus.monitor import __main__ as cli

    monitor = mock.MagicMock()
    monitor.update_period = 0.1
    monitor.get_power.side_effect = [{0: 70.0}, None]
    monitor.get_energy.return_value = {0: 5.0}
    monkeypatch.setattr(cli, "PowerMonitor", mock.MagicMock(return_value=monitor))
    fake_time = mock.MagicMock()
    fake_time.time.return_value = 0.0
    fake_time.sleep.side_effect = [None, None, KeyboardInterrupt]
    monkeypatch.setattr(cli, "time", fake_time)
    cli.power(gpu_indices=[0], update_period=0.1, power_domain="device_average")
    monitor.get_power.assert_called_with(power_domain="device_average")
    monitor.get_energy.assert_called_once_with(0.0, 0.0, power_domain="device_average")
    out = capsys.readouterr().out
    assert "'GPU0': 70.0" in out and "Total time (s): 0.0" in out and "Total energy (J):" in out and "'GPU0': 5.0" in out


def test_cli_arguments_are_upstreams():
    from zeus.monitor.__main__ import build_parser

    args = build_parser().parse_args(["power", "--gpu-indices", "0", "1", "--update-period", "0.5", "--power-domain", "memory_average"])
    assert (args.subcommand, args.gpu_indices, args.update_period, args.power_domain) == ("power", [0, 1], 0.5, "memory_average")
    args = build_parser().parse_args(["power"])
    assert (args.gpu_indices, args.update_period, args.power_domain) == (None, 1.0, "device_instant")
    assert build_parser().parse_args(["energy", "--gpu-indices", "1"]).gpu_indices == [1]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["power", "--power-domain", "instant"])
    with pytest.raises(SystemExit):
        build_parser().parse_args([])


#: ``python -m zeus.monitor ARGS`` as ``-m`` runs it (runpy), its main thread's waits of 0.1 s or more announced
#: on stderr: the energy command's one wait comes after its window began, the power command's second after
#: its first line. Ctrl-C before then (a loaded machine can take many seconds to import torch) would stop
#: the import, not the monitor.
ANNOUNCED = """
import runpy, sys, threading, time
sleep = time.sleep
def announced(seconds):
    if seconds >= 0.1 and threading.current_thread() is threading.main_thread():
        print("zeus-test: waiting", file=sys.stderr, flush=True)
    sleep(seconds)
time.sleep = announced
sys.argv[0] = "zeus.monitor"
runpy.run_module("zeus.monitor", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(("argv", "waits"), [(["energy", "--gpu-indices", "0"], 1), (["power", "--update-period", "0.1"], 2)])
def test_python_m_zeus_monitor_until_ctrl_c(driver, argv, waits):
    import threading

    from zeus_test_helpers import ended, start

    driver(gpus=1, demand_w=150.0)
    err_lines: list[str] = []
    # SIGINT at its default in the monitor (start), whatever this test runner was started with
    args = [sys.executable, "-c", ANNOUNCED, *argv]
    with ended(start(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, COLUMNS="200"))) as proc:
        reader = threading.Thread(target=lambda: err_lines.extend(proc.stderr), daemon=True)
        reader.start()
        deadline = time.monotonic() + 120
        while sum(line.startswith("zeus-test: waiting") for line in list(err_lines)) < waits:
            assert proc.poll() is None and time.monotonic() < deadline, "".join(err_lines)
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out = proc.stdout.read()
        proc.wait(timeout=60)
        reader.join(60)
    err = "".join(line for line in err_lines if not line.startswith("zeus-test: waiting"))
    assert proc.returncode == 0, err
    if argv[0] == "energy":
        assert "Measurement(" in out and "gpu_energy={0:" in out
    else:
        assert "'GPU0': 150.0" in out and "Total time (s):" in out and "Total energy (J):" in out


def test_gpus_of_two_models_are_refused_as_upstream(driver, tmp_path, monkeypatch):
    from zeus.device.gpu import ZeusGPUHeterogeneousError

    from zeus_plugins_nvml import fake_pynvml

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    path = fake_pynvml.create(
        tmp_path / "mixed.json", [fake_pynvml.FakeGpu(), fake_pynvml.FakeGpu(name="NVIDIA H100 80GB HBM3")], privileged=True
    )
    fake_pynvml.install(path, monkeypatch)
    with pytest.raises(ZeusGPUHeterogeneousError, match="Heterogeneous GPUs found"):
        PowerMonitor(gpu_indices=[0], update_period=0.1)
    with pytest.raises(ZeusGPUHeterogeneousError, match="Heterogeneous GPUs found"):
        TemperatureMonitor(gpu_indices=[0])

"""Upstream's vendor modules (``zeus.device.gpu.nvidia`` / ``.amd``, ``zeus.device.cpu.rapl``), ``zeus.device.soc``
and ``CallbackSet``'s keywords, on the simulated drivers of zeus's device plugins."""

from __future__ import annotations

import builtins
import time
from unittest.mock import patch

import pytest
import zeus.device.soc
from zeus.device import get_gpus, get_soc
from zeus.device.cpu import CPUs, get_current_cpu_index
from zeus.device.cpu.rapl import (
    RAPL_DIR,
    RAPLCPUs,
    ZeusRAPLNotSupportedError,
    get_current_rapl_zone_id,
    rapl_is_available,
)
from zeus.device.gpu import GPUs, ZeusGPUInitError, ZeusGPUInvalidArgError
from zeus.device.gpu.amd import AMDGPU, AMDGPUs, amdsmi_is_available
from zeus.device.gpu.nvidia import NVIDIAGPU, NVIDIAGPUs, nvml_is_available
from zeus.device.soc import SoC, ZeusSoCInitError
from zeus.device.soc.apple import AppleSilicon, AppleSiliconMeasurement, apple_silicon_is_available
from zeus.device.soc.jetson import Jetson, JetsonMeasurement, ZeusJetsonInitError

from zeus_plugins_amdsmi import fake_amdsmi
from zeus_plugins_apple_silicon import fake_apple_silicon
from zeus_plugins_jetson.fake_sysfs import write_tree


@pytest.fixture(autouse=True)
def fresh_soc():
    zeus.device.soc._soc = None
    yield
    zeus.device.soc._soc = None


def test_get_gpus_is_nvidiagpus_on_nvml(driver, monkeypatch):
    driver(gpus=2)
    monkeypatch.delenv("ZEUS_GPU_DEVICE")
    assert nvml_is_available() is True
    gpus = get_gpus()
    assert type(gpus) is NVIDIAGPUs and isinstance(gpus, GPUs)
    assert len(gpus) == 2 and all(type(g) is NVIDIAGPU for g in gpus.gpus)
    assert gpus.get_power_management_limit_constraints(1) == (100_000, 400_000)


def test_nvml_is_not_available_without_a_driver(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEUS_FAKE_NVML", str(tmp_path / "no-driver.json"))  # no state: nvmlInit fails
    monkeypatch.delenv("ZEUS_FAKE_AMDSMI", raising=False)
    assert nvml_is_available() is False
    monkeypatch.setenv("ZEUS_GPU_DEVICE", "nvml")
    with pytest.raises(ZeusGPUInitError):
        get_gpus()


def test_amd_gpus_through_the_amdsmi_plugin(tmp_path, monkeypatch):
    for var in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ZEUS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ZEUS_FAKE_NVML", str(tmp_path / "no-driver.json"))
    fake_amdsmi.install(fake_amdsmi.create(tmp_path / "amd.json", 2, privileged=True), monkeypatch)
    assert amdsmi_is_available() is True
    gpus = get_gpus()
    assert type(gpus) is AMDGPUs and type(gpus.gpus[0]) is AMDGPU and len(gpus) == 2
    assert gpus.get_power_management_limit(0) > 0
    # clocks as upstream's AMD GPU sets them: amdsmi's soft limits, left set when the process ends
    assert gpus.get_supported_memory_clocks(0) == [1300, 900]  # the hardware range, maximum first, as upstream lists it
    assert gpus.get_supported_graphics_clocks(0)[:2] == [2100, 2085]
    gpus.set_gpu_locked_clocks(0, 1000, 1500)
    gpus.set_memory_locked_clocks(1, 900, 1100)
    state = fake_amdsmi.read_state()["gpus"]
    assert [(g["sys_clock_lock_mhz"], g["mem_clock_lock_mhz"]) for g in state] == [([1000, 1500], None), (None, [900, 1100])]
    with pytest.raises(ZeusGPUInvalidArgError):  # amdsmi takes a range, not one frequency (AMDSMI_STATUS_INVAL)
        gpus.set_gpu_locked_clocks(0, 1200, 1200)
    gpus.reset_locked_clocks(0)
    gpus.reset_memory_locked_clocks(1)
    state = fake_amdsmi.read_state()["gpus"]
    assert [(g["sys_clock_lock_mhz"], g["mem_clock_lock_mhz"]) for g in state] == [([500, 2100], [900, 1300]), (None, [900, 1300])]


def test_rapl_names_and_zone_lookup(monkeypatch):
    stat = "515 (tmux: server (1)) R " + " ".join(["0"] * 35) + " 24 0 0"  # field 39: CPU 24
    files = {
        "/proc/515/stat": stat,
        "/sys/devices/system/cpu/cpu24/topology/physical_package_id": "1\n",
        "/sys/devices/system/cpu/cpu24/topology/die_id": "0\n",
        f"{RAPL_DIR}:0/name": "package-0\n",
        f"{RAPL_DIR}:1/name": "package-1-die-0\n",
        f"{RAPL_DIR}:1:0/name": "package-1\n",  # a sub-zone: never the answer
    }
    real_open = builtins.open

    def fake_open(path, *args, **kwargs):
        if str(path) in files:
            from io import StringIO

            return StringIO(files[str(path)])
        return real_open(path, *args, **kwargs)

    zones = [f"{RAPL_DIR}:1:0", f"{RAPL_DIR}:0", f"{RAPL_DIR}:1"]
    with (
        patch("builtins.open", side_effect=fake_open),
        patch("zeus.device.cpu.rapl.glob", return_value=zones),
        patch("os.path.exists", return_value=True),
    ):
        assert get_current_rapl_zone_id(515) == 1
        assert get_current_cpu_index(515) == 1  # 0.16's answer: the package id
        files["/sys/devices/system/cpu/cpu24/topology/physical_package_id"] = "7\n"
        with pytest.raises(ZeusRAPLNotSupportedError):
            get_current_rapl_zone_id(515)
    assert get_current_cpu_index() >= 0  # this process, on this machine
    rapl_is_available.cache_clear()
    assert isinstance(rapl_is_available(), bool)
    assert issubclass(RAPLCPUs, CPUs)


def test_cpu_aliases_are_upstreams():
    from zeus.device.cpu import CPU

    assert callable(CPUs.getTotalEnergyConsumption) and callable(CPUs.supportsGetDramEnergyConsumption)
    assert callable(CPU.getTotalEnergyConsumption) and callable(CPU.supportsGetDramEnergyConsumption)


def test_jetson_rails_by_role_in_millijoules(tmp_path):
    root = write_tree(tmp_path / "sys", "iio")  # GPU 4 W, CPU 2 W, SYS5V (the module's input) 9.5 W, others
    soc = Jetson({"sysfs_root": str(root), "poll_interval_s": 0.01})
    try:
        assert soc.get_available_metrics() == {"cpu_energy_mj", "gpu_energy_mj", "total_energy_mj"}
        soc.begin_window("w")
        with pytest.raises(KeyError, match="already exists"):
            soc.begin_window("w")
        soc.begin_window("w", restart=True)
        time.sleep(0.3)
        m = soc.end_window("w")
        assert isinstance(m, JetsonMeasurement)
        seconds = m.total_energy_mj / 9500.0
        assert 0.25 < seconds < 1.0
        assert m.gpu_energy_mj == pytest.approx(4000.0 * seconds, rel=0.1)
        assert m.cpu_energy_mj == pytest.approx(2000.0 * seconds, rel=0.1)
        with pytest.raises(KeyError, match="does not exist"):
            soc.end_window("w")
        zero = soc.get_total_energy_consumption()
        zero.zero_all_fields()
        assert zero == JetsonMeasurement(0.0, 0.0, 0.0)
    finally:
        soc.close()
    with pytest.raises(ZeusJetsonInitError):
        Jetson({"sysfs_root": str(tmp_path / "empty")})


def test_apple_silicon_fields_and_windows(tmp_path, monkeypatch):
    monkeypatch.setenv(fake_apple_silicon.ENV, str(fake_apple_silicon.create(tmp_path / "apple.json")))
    assert apple_silicon_is_available() is True
    soc = get_soc()
    assert type(soc) is AppleSilicon and isinstance(soc, SoC) and get_soc() is soc
    assert "gpu_sram_mj" not in soc.get_available_metrics() and "efficiency_cores_mj" in soc.get_available_metrics()
    soc.begin_window("w")
    with pytest.raises(RuntimeError):  # the binding's answer, as upstream passes it on
        soc.begin_window("w")
    time.sleep(0.2)
    m = soc.end_window("w")
    assert isinstance(m, AppleSiliconMeasurement) and type(m.gpu_mj) is int and m.gpu_sram_mj is None
    assert len(m.efficiency_cores_mj) == 4 and m.gpu_mj >= 12_000 * 0.2 * 0.9  # 12 W for >= 0.2 s, in mJ
    a, b = soc.get_total_energy_consumption(), soc.get_total_energy_consumption()
    assert (b - a).cpu_total_mj >= 0
    with pytest.raises(TypeError):
        b - JetsonMeasurement()


def test_get_soc_raises_where_no_soc_is_measured(monkeypatch):
    monkeypatch.delenv(fake_apple_silicon.ENV, raising=False)
    with pytest.raises(ZeusSoCInitError, match="No observable SoC"):
        get_soc()


def test_callback_set_takes_upstreams_keywords():
    from zeus.callback import Callback, CallbackSet

    seen: list[tuple[str, object]] = []

    class Recorder(Callback):
        def on_evaluate(self, metric: float) -> None:
            seen.append(("evaluate", metric))

        def on_instruction_begin(self, name: str) -> None:
            seen.append(("begin", name))

    callbacks = CallbackSet([Recorder(), Callback(), Recorder()])
    callbacks.on_evaluate(metric=0.75)
    callbacks.on_instruction_begin(name="forward")
    callbacks.on_instruction_end(name="forward")
    callbacks.on_step_begin()
    assert seen == [("evaluate", 0.75), ("evaluate", 0.75), ("begin", "forward"), ("begin", "forward")]
    with pytest.raises(TypeError):
        callbacks.on_evaluate(value=1.0)  # type: ignore[call-arg]


def test_zeus_monitor_measures_the_soc_beside_the_gpus(tmp_path, monkeypatch):
    """Upstream's ZeusMonitor fills ``Measurement.soc_energy`` where a SoC is measured (None where none is)."""
    from zeus.monitor import ZeusMonitor

    monkeypatch.setenv(fake_apple_silicon.ENV, str(fake_apple_silicon.create(tmp_path / "apple.json")))
    monitor = ZeusMonitor(gpu_indices=[], cpu_indices=[])
    monitor.begin_window("w", sync_execution=False)
    time.sleep(0.2)
    m = monitor.end_window("w", sync_execution=False)
    assert isinstance(m.soc_energy, AppleSiliconMeasurement)
    assert m.gpu_energy == {} and m.soc_energy.gpu_mj >= 12_000 * 0.2 * 0.9  # 12 W for >= 0.2 s, in mJ
    monitor.begin_window("c", sync_execution=False)
    cancelled = monitor.end_window("c", sync_execution=False, cancel=True)
    assert isinstance(cancelled.soc_energy, AppleSiliconMeasurement) and cancelled.soc_energy.gpu_mj == 0


def test_zeus_monitor_without_a_soc_has_none(monkeypatch):
    from zeus.monitor import ZeusMonitor

    monkeypatch.delenv(fake_apple_silicon.ENV, raising=False)
    monitor = ZeusMonitor(gpu_indices=[], cpu_indices=[])
    monitor.begin_window("w", sync_execution=False)
    assert monitor.end_window("w", sync_execution=False).soc_energy is None


def test_the_per_gpu_methods_type_checkers_see_are_those_gpus_has():
    # GPUs gets gpus.<method>(gpu_index, ...) for every method of GPU at import; its TYPE_CHECKING block
    # declares them for type checkers, and must name each one, with GPU's parameters after gpu_index.
    import ast
    import inspect

    from zeus.device.gpu import common

    tree = ast.parse(inspect.getsource(common))
    gpus = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GPUs")
    block = next(n for n in gpus.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    declared = {f.name: [a.arg for a in f.args.args] for f in block.body if isinstance(f, ast.FunctionDef)}
    methods = {n: f for n, f in vars(common.GPU).items() if not n.startswith("_") and callable(f) and n != "close"}
    snake = {n: f for n, f in methods.items() if n.lower() == n}
    assert set(declared) == set(snake)
    for name, f in snake.items():
        assert declared[name] == ["self", "gpu_index", *list(inspect.signature(f).parameters)[1:]], name
        assert callable(getattr(GPUs, name))

"""Power and temperature timelines (zeus_core.inloop.timeline): the bounded Timeline itself, the power and
temperature monitors on a device group a test steers, on the simulated drivers, and their errors and shutdown."""

from __future__ import annotations

import gc
import sys
import threading
import time
import types

import pytest

from zeus_core import hookimpl
from zeus_core.engine import registry as zreg
from zeus_core.errors import DeviceError
from zeus_core.inloop.timeline import DEFAULT_MAX_SAMPLES, PowerMonitor, TemperatureMonitor, Timeline

# --------------------------------------------------------------------------- Timeline


def test_a_run_of_equal_readings_keeps_its_ends_and_the_integral_is_exact_across_a_step():
    tl = Timeline(10)
    for t in range(0, 6):  # 100 W for 5 s
        tl.add(float(t), 100.0)
    assert tl.points() == [(0.0, 100.0), (5.0, 100.0)]  # six readings, two points
    tl.add(5.5, 300.0)
    for t in (6.0, 7.0, 8.0):
        tl.add(t, 300.0)
    assert tl.points() == [(0.0, 100.0), (5.0, 100.0), (5.5, 300.0), (8.0, 300.0)]
    # 5 s at 100 W, the 0.5 s ramp (100 J), 2.5 s at 300 W
    assert tl.integral(0.0, 8.0, held_until=8.0) == pytest.approx(500 + 100 + 750)
    assert tl.integral(1.0, 2.0, held_until=8.0) == pytest.approx(100.0)  # inside a run
    assert tl.integral(5.25, 5.5, held_until=8.0) == pytest.approx(0.25 * (200 + 300) / 2)  # half the ramp
    assert tl.integral(7.0, 10.0, held_until=9.0) == pytest.approx(300 * 2.0)  # held to 9.0, nothing after
    assert tl.integral(-3.0, 1.0, held_until=9.0) == pytest.approx(100.0)  # nothing before the first reading
    assert tl.points(5.0, 6.0) == [(5.0, 100.0), (5.5, 300.0)]
    assert tl.nearest() == 300.0 and tl.nearest(5.1) == 100.0 and tl.nearest(5.4) == 300.0 and tl.nearest(-1) == 100.0
    with pytest.raises(ValueError, match="time order"):
        tl.add(7.5, 1.0)
    with pytest.raises(ValueError, match="before its start"):
        tl.integral(3.0, 2.0, held_until=8.0)
    assert Timeline(2).integral(0, 1, 1) is None and Timeline(2).nearest() is None


def test_memory_is_bounded_and_dropped_readings_are_never_answered_from():
    tl = Timeline(100)
    for i in range(10_000):  # every reading differs: nothing to fold
        tl.add(float(i), float(i % 7))
    assert len(tl) == 100 and tl.dropped == 9_900 and tl.first_t == 9_900.0 and tl.last_t == 9_999.0
    assert tl._t.nbytes + tl._v.nbytes + tl._e.nbytes == 100 * 24  # 24 bytes a point, fixed at the start
    with pytest.raises(ValueError, match=r"readings before 9900.000 were dropped to keep within max_samples \(100 points\)"):
        tl.integral(9_000.0, 9_950.0, held_until=9_999.0)
    expected = sum((a % 7 + b % 7) / 2 for a, b in zip(range(9_900, 9_999), range(9_901, 10_000)))
    assert tl.integral(9_900.0, 9_999.0, held_until=9_999.0) == pytest.approx(expected)
    assert DEFAULT_MAX_SAMPLES == 100_000
    with pytest.raises(ValueError, match="at least 2 points"):
        Timeline(1)


# --------------------------------------------------------------------------- monitors on a group the test steers


class Board:
    """A device group whose power and temperature the test sets: gpu0 reads instant and average, gpu1 only
    average, rail reads one power (no domains), temperatures where set."""

    clock = staticmethod(time.monotonic)

    def __init__(self, domains: bool = True, temps: bool = True) -> None:
        self.names = ["gpu0", "gpu1", "rail"]
        self.energy_sources = dict.fromkeys(self.names, "polling")
        self.max_power_w = 600.0
        self.watts = {"gpu0": 100.0, "gpu1": 50.0, "rail": 7.0}
        self.celsius = {"gpu0": 40.0, "gpu1": 41.0}
        self.reads = 0
        self.closed = False
        self.fail = False
        if domains:
            self.read_power_domains = self._domains
        if temps:
            self.read_temperatures = self._temps

    def _domains(self):
        self.reads += 1
        if self.fail:
            raise DeviceError("sensor gone")
        return {"gpu0": {"instant": self.watts["gpu0"], "average": self.watts["gpu0"]}, "gpu1": {"average": self.watts["gpu1"]}}

    def _temps(self):
        return dict(self.celsius)

    def read_power(self):
        return dict(self.watts)

    def read_energy(self):
        return dict.fromkeys(self.names, 0.0)

    def close(self):
        self.closed = True


def wait_until(cond, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "the monitor's thread did not sample"
        time.sleep(0.005)


def test_power_monitor_answers_power_and_energy_between_two_times():
    board = Board()
    with PowerMonitor(update_period=0.01, device=board) as pm:
        assert pm.names == ["gpu0", "gpu1"] and pm.gpu_indices == [0, 1]  # the rail reads no domain
        assert pm.measurement_domains == ["instant", "average"] and pm.quantities == {"gpu0": ["instant", "average"], "gpu1": ["average"]}
        t0 = time.time()
        wait_until(lambda: len(pm.timeline("gpu0")) and pm.timeline("gpu0")[-1][0] > t0)
        board.watts["gpu0"] = 300.0
        wait_until(lambda: pm.get_power() == {0: 300.0, 1: 50.0})
        t_step = [t for t, w in pm.timeline("gpu0") if w == 300.0][0]
        last_100 = [t for t, w in pm.timeline("gpu0") if w == 100.0][-1]
        t1 = time.time()
        e = pm.get_energy(t0, t1)
        # gpu0: 100 W until its last 100 W reading, 300 W from its first 300 W one, a ramp between
        expected = 100 * (last_100 - t0) + 200 * (t_step - last_100) + 300 * (t1 - t_step)
        assert e[0] == pytest.approx(expected, rel=1e-9)
        assert e[1] == pytest.approx(50.0 * (t1 - t0), rel=1e-9)  # gpu1 integrates its average: it has no instant
        assert pm.energy(t0, t1) == {"gpu0": e[0], "gpu1": e[1]}
        assert pm.get_power(t0) == {0: 100.0, 1: 50.0}
        tl = pm.get_power_timeline("device_instant", 0, t0)  # upstream's name for the instant domain
        assert list(tl) == [0] and tl[0][-1][1] == 300.0 and all(t >= t0 for t, _ in tl[0])
        assert set(pm.get_all_power_timelines()) == {"instant", "average"}
        assert list(pm.get_all_power_timelines()["instant"]) == [0]  # gpu1 reads no instant power
    assert not board.closed  # a group the caller opened stays open
    assert pm.get_energy(t0, t1) == e  # after stop, the timelines stay
    ended = pm.timeline("gpu0")[-1][0]
    assert pm.energy(t0, ended + 100.0)["gpu0"] == pytest.approx(pm.energy(t0, ended)["gpu0"])  # nothing held after stop


def test_one_power_per_device_and_domains_to_keep():
    board = Board(domains=False)
    with PowerMonitor(update_period=3600, device=board) as pm:
        assert pm.quantities == {"gpu0": ["power"], "gpu1": ["power"], "rail": ["power"]}
        assert pm.power() == {"gpu0": 100.0, "gpu1": 50.0, "rail": 7.0}
    with PowerMonitor(update_period=3600, power_domains=["average"], device=Board()) as pm:
        assert pm.measurement_domains == ["average"]
    with pytest.raises(ValueError, match="power domain memory is not read by device group Board; it reads instant, average"):
        PowerMonitor(power_domains=["memory_average"], device=Board())
    with pytest.raises(ValueError, match="non-empty list"):
        PowerMonitor(power_domains=[], device=Board())


def test_temperature_monitor():
    board = Board()
    with TemperatureMonitor(update_period=0.01, device=board) as tm:
        assert tm.names == ["gpu0", "gpu1"] and tm.get_temperature() == {0: 40.0, 1: 41.0}
        board.celsius["gpu1"] = 70.5
        wait_until(lambda: tm.get_temperature()[1] == 70.5)
        assert [c for _, c in tm.get_temperature_timeline(1)[1]][-1] == 70.5 and tm.temperature()["gpu0"] == 40.0
        assert tm.update_period == 0.01
    assert TemperatureMonitor.__init__.__defaults__[1] == 1.0  # upstream's default period


def test_clear_errors_for_what_a_device_cannot_give():
    with pytest.raises(DeviceError, match="cannot give power over time: it reads no power"):
        PowerMonitor(
            device=types.SimpleNamespace(
                names=["x"], energy_sources={}, max_power_w=0, clock=time.monotonic, read_energy=lambda: {}, close=lambda: None
            )
        )
    with pytest.raises(DeviceError, match="cannot give temperatures"):
        TemperatureMonitor(device=Board(temps=False))
    with pytest.raises(ValueError, match="gpu_indices must be None"):
        PowerMonitor(gpu_indices=[], device=Board())
    with pytest.raises(ValueError, match="update_period must be a positive number"):
        PowerMonitor(update_period=0, device=Board())
    with pytest.raises(ValueError, match="max_samples_per_gpu must be an integer of at least 2"):
        PowerMonitor(max_samples_per_gpu=1, device=Board())
    with pytest.raises(DeviceError, match="the device group has no gpu5"):
        PowerMonitor(gpu_indices=[5], device=Board())
    rails = Board(domains=False)
    rails.names = ["rail"]
    with PowerMonitor(update_period=3600, device=rails) as pm:
        with pytest.raises(ValueError, match="this monitor has no GPU .* its devices are rail: query them by name"):
            pm.get_energy(0, 1)
        with pytest.raises(ValueError, match="no monitored device named 'gpu0'"):
            pm.timeline("gpu0")
    with PowerMonitor(update_period=3600, device=Board()) as pm:
        with pytest.raises(ValueError, match="GPU 3 is not monitored; monitored: 0, 1"):
            pm.get_power_timeline("instant", 3)
        with pytest.raises(ValueError, match="power domain memory is not being monitored"):
            pm.get_power_timeline("memory")


def test_a_wall_clock_set_back_loses_a_reading_not_the_timeline(monkeypatch):
    from zeus_core.inloop import timeline as timeline_module

    board = Board()
    with PowerMonitor(update_period=3600, device=board) as pm:
        first = pm.timeline("gpu0")[0][0]
        monkeypatch.setattr(timeline_module.time, "time", lambda: first - 60.0)  # NTP stepped the clock back
        pm._tick()
        assert pm.last_error is None and pm.timeline("gpu0") == [(first, 100.0)]


def test_a_failing_reading_is_kept_and_the_thread_goes_on():
    board = Board()
    with PowerMonitor(update_period=0.01, device=board) as pm:
        board.fail = True
        wait_until(lambda: pm.last_error is not None)
        assert str(pm.last_error) == "sensor gone"
        board.fail = False
        wait_until(lambda: pm.last_error is None)


# --------------------------------------------------------------------------- devices the monitor opens, and shutdown


OPENED: list[Board] = []


def _registry():
    plugin = types.ModuleType("zeus_test_timeline_devices")

    @hookimpl
    def zeus_register_devices(register):
        def make(options, context):
            OPENED.append(Board())
            return OPENED[-1]

        register("board", make)

    plugin.zeus_register_devices = zeus_register_devices
    return zreg.load(extra_plugins=[("timelinetest", plugin)], entry_points=False)


def _threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def test_the_monitor_closes_what_it_opened_and_its_thread_ends_on_stop_and_when_dropped():
    OPENED.clear()
    reg = _registry()
    before = len(_threads("zeus-powermonitor"))
    pm = PowerMonitor(update_period=0.01, device="board", registry=reg)
    assert len(_threads("zeus-powermonitor")) == before + 1
    pm.stop()
    assert OPENED[-1].closed and len(_threads("zeus-powermonitor")) == before
    pm.stop()  # a second stop does nothing
    reads = OPENED[-1].reads
    time.sleep(0.05)
    assert OPENED[-1].reads == reads  # no reading after stop

    dropped = PowerMonitor(update_period=0.01, device="board", registry=reg)
    board = OPENED[-1]
    wait_until(lambda: board.reads > 3)
    del dropped
    gc.collect()
    assert board.closed and len(_threads("zeus-powermonitor")) == before  # collected: stopped and closed
    with pytest.raises(Exception, match="no device plugin named 'nope'"):
        PowerMonitor(device="nope", registry=reg)
    with pytest.raises(ValueError, match="options= configures the plugin named by device="):
        PowerMonitor(device=Board(), options={"x": 1})


# --------------------------------------------------------------------------- on the simulated drivers


@pytest.fixture
def no_gpu_choice(monkeypatch):
    for var in (
        "ZEUS_GPU_DEVICE",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "ZEUS_FAKE_AMDSMI",
        "ZEUS_FAKE_NVML",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setitem(sys.modules, "amdsmi", None)


def test_on_simulated_nvidia_gpus_chosen_as_zeus_monitor_chooses(tmp_path, monkeypatch, no_gpu_choice):
    from zeus_plugins_nvml import fake_pynvml

    fake_pynvml.install(
        fake_pynvml.create(tmp_path / "nvml.json", [fake_pynvml.FakeGpu(memory_power_w=30.0) for _ in range(2)]), monkeypatch
    )
    with PowerMonitor(gpu_indices=[1], update_period=0.01) as pm, TemperatureMonitor(gpu_indices=[1], update_period=0.01) as tm:
        assert pm.plugin == "nvml" and pm.gpu_indices == [1] and pm.measurement_domains == ["instant", "average", "memory"]
        t0 = time.time()
        wait_until(lambda: pm.timeline("gpu1")[-1][0] > t0)
        fake_pynvml.set_demand(1, 150.0)
        wait_until(lambda: pm.get_power() == {1: 150.0})
        assert pm.get_power(power_domain="memory_average") == {1: 30.0}
        assert tm.get_temperature() == {1: 45.0}
    t1 = pm.timeline("gpu1")[-1][0]
    assert 150.0 * (t1 - t0) < pm.get_energy(t0, t1)[1] < 250.0 * (t1 - t0)


def test_on_simulated_amd_gpus_and_jetson_rails_by_name(tmp_path, monkeypatch, no_gpu_choice):
    from zeus_plugins_amdsmi import fake_amdsmi
    from zeus_plugins_apple_silicon import fake_apple_silicon
    from zeus_plugins_jetson.fake_sysfs import set_rails, write_tree

    monkeypatch.setitem(sys.modules, "pynvml", None)
    fake_amdsmi.install(fake_amdsmi.create(tmp_path / "amd.json", [fake_amdsmi.FakeAmdGpu(demand_w=420.0)]), monkeypatch)
    with PowerMonitor(update_period=0.01, device="amdsmi", options={"counter_check_s": 0.02}) as pm:
        assert pm.measurement_domains == ["instant", "average"] and pm.get_power() == {0: 420.0}
    with TemperatureMonitor(update_period=0.01, device="amdsmi", options={"counter_check_s": 0.02}) as tm:
        assert tm.get_temperature() == {0: 62.0}
    root = write_tree(tmp_path / "sys", "hwmon", {"VDD_IN": 7.5, "VDD_CPU_GPU_CV": 2.5, "VDD_SOC": 1.8})
    with PowerMonitor(update_period=0.01, device="jetson", options={"sysfs_root": str(root)}) as pm:
        assert pm.names == ["vdd_in", "vdd_cpu_gpu_cv", "vdd_soc"] and pm.measurement_domains == ["power"]
        set_rails(root, {"VDD_CPU_GPU_CV": 4.0})
        wait_until(lambda: pm.power()["vdd_cpu_gpu_cv"] == pytest.approx(4.0))
        assert [round(w, 3) for _, w in pm.timeline("vdd_cpu_gpu_cv")][0] == 2.5
    monkeypatch.setenv(fake_apple_silicon.ENV, str(fake_apple_silicon.create(tmp_path / "apple.json")))
    with pytest.raises(DeviceError, match="device plugin 'apple-silicon' cannot give power over time"):
        PowerMonitor(device="apple-silicon")

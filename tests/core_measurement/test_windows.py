"""The window API: names, overlap, nesting, cancel, sync order, scopes, CSV log, ZeusMonitor names."""

from __future__ import annotations

import csv
import sys
import types
import warnings

import pytest

from zeus_core import Measurement, Monitor
from zeus_core.windows import DeviceSet, TorchSync, make_sync


class ManualDevices:
    """Counters that grow at fixed watts on a clock the test advances."""

    def __init__(self, watts: dict[str, float], sources: dict[str, str] | None = None, log=None):
        self.names = list(watts)
        self.watts = watts
        self.energy_sources = sources or {n: "counter" for n in watts}
        self.max_power_w = float(sum(watts.values()))
        self.now = 100.0
        self.log = log if log is not None else []

    def advance(self, s: float) -> None:
        self.now += s

    def clock(self) -> float:
        self.log.append("clock")
        return self.now

    def read_energy(self) -> dict[str, float]:
        self.log.append("energy")
        return {n: w * self.now for n, w in self.watts.items()}

    def read_power(self) -> dict[str, float]:
        return dict(self.watts)

    def close(self) -> None:
        self.log.append("close")


def test_window_measures_time_and_energy_per_device():
    dev = ManualDevices({"gpu0": 200.0, "gpu1": 100.0, "cpu0-package": 50.0})
    mon = Monitor(dev, sync="none")
    mon.begin_window("epoch")
    dev.advance(2.0)
    m = mon.end_window("epoch")
    assert m.time == pytest.approx(2.0)
    assert m.energy == pytest.approx({"gpu0": 400.0, "gpu1": 200.0, "cpu0-package": 100.0})
    assert m.sources == {"gpu0": "counter", "gpu1": "counter", "cpu0-package": "counter"}


def test_zeusmonitor_names_keep_upstream_meaning():
    m = Measurement(
        1.0,
        {"gpu0": 3.0, "gpu2": 4.0, "cpu0-package": 10.0, "cpu0-dram": 1.0, "fan": 0.5},
        {"gpu0": "counter", "gpu2": "polling", "cpu0-package": "estimate"},
    )
    assert m.gpu_energy == {0: 3.0, 2: 4.0}
    assert m.cpu_energy == {0: 10.0}
    assert m.dram_energy == {0: 1.0}
    assert m.total_energy == 7.0  # GPUs only, as upstream ZeusMonitor
    assert m.total_gpu_energy == 7.0
    assert m.total_system_energy == pytest.approx(18.5)
    assert m.estimated == ["cpu0-package"]
    assert Measurement(1.0, {"gpu0": 1.0}).cpu_energy is None


def test_duplicate_and_unknown_names_say_which():
    dev = ManualDevices({"gpu0": 1.0})
    mon = Monitor(dev, sync="none")
    mon.begin_window("a")
    with pytest.raises(ValueError, match="'a' already exists"):
        mon.begin_window("a")
    with pytest.raises(ValueError, match=r"'b' does not exist \(open windows: 'a'\)"):
        mon.end_window("b")
    dev.advance(5)
    mon.begin_window("a", restart=True)
    dev.advance(1)
    assert mon.end_window("a").time == pytest.approx(1.0)


def test_windows_overlap_and_nest():
    dev = ManualDevices({"gpu0": 10.0})
    mon = Monitor(dev, sync="none")
    mon.begin_window("outer")
    dev.advance(1)
    mon.begin_window("inner")
    dev.advance(2)
    mon.begin_window("overlap")
    dev.advance(3)
    inner = mon.end_window("inner")
    dev.advance(4)
    outer = mon.end_window("outer")
    overlap = mon.end_window("overlap")
    assert (inner.time, outer.time, overlap.time) == pytest.approx((5.0, 10.0, 7.0))
    assert outer.energy["gpu0"] == pytest.approx(100.0)
    assert mon.open_windows == []


def test_cancel_returns_zeros_and_skips_log_and_callback(tmp_path):
    seen = []
    dev = ManualDevices({"gpu0": 10.0})
    mon = Monitor(dev, sync="none", on_measurement=lambda n, m: seen.append(n), log_file=tmp_path / "w.csv")
    mon.begin_window("x")
    dev.advance(1)
    m = mon.end_window("x", cancel=True)
    assert m.time == 0.0 and m.energy == {"gpu0": 0.0}
    assert seen == []
    mon.close()
    rows = list(csv.reader((tmp_path / "w.csv").open()))
    assert len(rows) == 1  # header only
    with pytest.raises(ValueError, match="does not exist"):
        mon.end_window("x")


def test_sync_runs_before_each_timestamp():
    log: list[str] = []
    dev = ManualDevices({"gpu0": 1.0}, log=log)
    mon = Monitor(dev, sync=lambda: log.append("sync"))
    mon.begin_window("w")
    mon.end_window("w")
    assert log == ["sync", "clock", "energy", "sync", "clock", "energy"]
    log.clear()
    mon.begin_window("w", sync_execution=False)
    mon.end_window("w", sync_execution=False)
    assert "sync" not in log


def test_torch_sync_is_free_without_cuda_and_syncs_measured_gpus(monkeypatch):
    synced = []
    cuda = types.SimpleNamespace(is_initialized=lambda: False, synchronize=synced.append, current_device=lambda: 0)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    TorchSync([0, 2])()
    assert synced == []  # CUDA never initialised: nothing can be in flight
    cuda.is_initialized = lambda: True
    TorchSync([0, 2])()
    TorchSync(None)()
    assert synced == [0, 2, 0]
    with pytest.raises(ValueError, match="sync must be one of"):
        make_sync("tensorflow")


def test_monitor_uses_devices_sync_indices_by_default(monkeypatch):
    synced = []
    cuda = types.SimpleNamespace(is_initialized=lambda: True, synchronize=synced.append, current_device=lambda: 0)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    dev = ManualDevices({"gpu1": 1.0, "gpu3": 1.0})
    dev.sync_indices = [1, 3]
    mon = Monitor(dev)
    with mon.window("w"):
        pass
    assert synced == [1, 3, 1, 3]


def test_context_manager_decorator_and_exception_cancels():
    got = []
    dev = ManualDevices({"gpu0": 2.0})
    mon = Monitor(dev, sync="none", on_measurement=lambda n, m: got.append((n, m.time)))
    with mon.window("block") as w:
        dev.advance(3)
    assert w.measurement.energy["gpu0"] == pytest.approx(6.0)

    @mon.measure()
    def step(s):
        dev.advance(s)
        return "done"

    assert step(1.5) == "done"
    assert got[-1] == ("test_context_manager_decorator_and_exception_cancels.<locals>.step", 1.5)

    @mon.window("named")
    def other():
        dev.advance(0.5)

    other()
    with pytest.raises(RuntimeError):
        with mon.window("boom"):
            raise RuntimeError("x")
    assert mon.open_windows == []
    assert [n for n, _ in got][::2] == ["block", "named"]  # the exception cancelled "boom"


def test_csv_log_rows_append_and_header_mismatch(tmp_path):
    path = tmp_path / "logs" / "windows.csv"
    dev = ManualDevices({"gpu0": 10.0, "cpu0-package": 5.0}, {"gpu0": "counter", "cpu0-package": "estimate"})
    with Monitor(dev, sync="none", log_file=path) as mon:
        mon.begin_window("e1")
        dev.advance(2)
        mon.end_window("e1")
    with Monitor(dev, sync="none", log_file=path) as mon:  # same columns: appended
        mon.begin_window("e2")
        dev.advance(1)
        mon.end_window("e2")
    rows = list(csv.DictReader(path.open()))
    assert [r["window_name"] for r in rows] == ["e1", "e2"]
    assert float(rows[0]["elapsed_time"]) == pytest.approx(2.0)
    assert float(rows[0]["gpu0_energy"]) == pytest.approx(20.0)
    assert float(rows[1]["cpu0-package_energy"]) == pytest.approx(5.0)
    assert rows[0]["sources"] == "gpu0=counter;cpu0-package=estimate"
    with pytest.raises(ValueError, match="existing window log has columns"):
        Monitor(ManualDevices({"gpu1": 1.0}), sync="none", log_file=path)


def test_zero_counter_energy_warns_or_is_approximated():
    dev = ManualDevices({"gpu0": 100.0})
    dev.read_energy = lambda: {"gpu0": 42.0}  # counter did not tick during the window
    mon = Monitor(dev, sync="none")
    mon.begin_window("short")
    dev.advance(0.001)
    with pytest.warns(UserWarning, match="exactly 0 J on gpu0"):
        mon.end_window("short")
    mon = Monitor(dev, sync="none", approx_instant_energy=True)
    mon.begin_window("short")
    dev.advance(0.002)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = mon.end_window("short")
    assert m.energy["gpu0"] == pytest.approx(0.2)
    assert m.sources["gpu0"] == "estimate"


def test_device_set_combines_groups_and_refuses_duplicate_names():
    gpus = ManualDevices({"gpu0": 100.0})
    gpus.sync_indices = [0]
    cpus = ManualDevices({"cpu0-package": 20.0}, {"cpu0-package": "estimate"})
    mon = Monitor([gpus, cpus], sync="none")
    assert mon.devices.max_power_w == 120.0
    assert mon.devices.sync_indices == [0]
    mon.begin_window("w")
    gpus.advance(1)
    cpus.advance(1)
    m = mon.end_window("w")
    assert m.energy == pytest.approx({"gpu0": 100.0, "cpu0-package": 20.0})
    assert m.sources["cpu0-package"] == "estimate"
    mon.devices.close()
    assert gpus.log[-1] == "close" and cpus.log[-1] == "close"
    with pytest.raises(ValueError, match="'gpu0' is provided by two"):
        DeviceSet([gpus, ManualDevices({"gpu0": 1.0})])

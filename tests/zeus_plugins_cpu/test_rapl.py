"""The rapl device over a fake powercap tree: zones, wraparound, permissions, limits."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from zeus_core import DeviceError, Monitor
from zeus_plugins_cpu import rapl
from zeus_plugins_cpu.options import RaplOptions
from zeus_plugins_cpu.rapl import RaplCpus

RANGE = 262_143_328_850  # a real package's max_energy_range_uj


def zone(path: Path, name: str, energy: int, rng: int = RANGE, limit_uw: int | None = None) -> Path:
    path.mkdir(parents=True)
    (path / "name").write_text(name + "\n")
    (path / "energy_uj").write_text(f"{energy}\n")
    (path / "max_energy_range_uj").write_text(f"{rng}\n")
    if limit_uw is not None:
        (path / "constraint_0_power_limit_uw").write_text(f"{limit_uw}\n")
    return path


@pytest.fixture
def powercap(tmp_path):
    """Two packages (one with DRAM), a psys zone, and an mmio duplicate that must be ignored."""
    root = tmp_path / "powercap"
    zone(root / "intel-rapl:0", "package-0", 1_000_000, limit_uw=165_000_000)
    zone(root / "intel-rapl:0" / "intel-rapl:0:0", "core", 5)
    zone(root / "intel-rapl:0" / "intel-rapl:0:1", "dram", 2_000_000)
    zone(root / "intel-rapl:1", "psys", 7, limit_uw=1)
    zone(root / "intel-rapl:2", "package-1", 3_000_000, limit_uw=165_000_000)
    zone(root / "intel-rapl-mmio:0", "package-0", 9)
    return root


def set_uj(root: Path, rel: str, value: int) -> None:
    (root / rel / "energy_uj").write_text(f"{value}\n")


def test_zones_names_and_limits(powercap):
    with_dev = RaplCpus(RaplOptions(powercap_root=str(powercap)))
    try:
        assert with_dev.names == ["cpu0-package", "cpu0-dram", "cpu1-package"]
        assert with_dev.energy_sources == dict.fromkeys(with_dev.names, "counter")
        assert with_dev.max_power_w == pytest.approx(330.0)
        assert with_dev.read_energy() == pytest.approx({"cpu0-package": 1.0, "cpu0-dram": 2.0, "cpu1-package": 3.0})
    finally:
        with_dev.close()
    dev = RaplCpus(RaplOptions(powercap_root=str(powercap), packages=[1], dram=False, max_power_w=200.0))
    assert dev.names == ["cpu1-package"] and dev.max_power_w == 200.0
    dev.close()
    with pytest.raises(DeviceError, match=r"RAPL packages \[4\] do not exist; this machine has packages \[0, 1\]"):
        RaplCpus(RaplOptions(powercap_root=str(powercap), packages=[4]))


def test_wraparound_mid_window(powercap):
    start = RANGE - 1_000_000
    set_uj(powercap, "intel-rapl:0", start)
    dev = RaplCpus(RaplOptions(powercap_root=str(powercap), packages=[0], dram=False))
    mon = Monitor(dev, sync="none")
    mon.begin_window("w")
    set_uj(powercap, "intel-rapl:0", 500_000)  # wrapped: 1.0 J to the top, then 0.5 J
    m = mon.end_window("w")
    assert m.energy["cpu0-package"] == pytest.approx(1.5)
    assert m.cpu_energy == {0: pytest.approx(1.5)}
    dev.close()


def test_each_window_says_its_scope_and_bound(powercap):
    """Issue 37: a package's and its DRAM's energy each with their scope and a +/- bound of one
    millisecond update at the package's limit, plus a microjoule."""
    dev = RaplCpus(RaplOptions(powercap_root=str(powercap), packages=[0]))
    mon = Monitor(dev, sync="none", target_error=None)
    mon.begin_window("w")
    set_uj(powercap, "intel-rapl:0", 3_000_000)
    m = mon.end_window("w")
    dev.close()
    assert m.scopes == {"cpu0-package": "cpu_package", "cpu0-dram": "dram"}
    assert m.errors == pytest.approx({"cpu0-package": 165.0 * 0.001 + 1e-6, "cpu0-dram": 165.0 * 0.001 + 1e-6})
    assert m.method == "counter"


def test_many_wraps_in_a_long_window_are_all_counted(powercap):
    rng = 10_000_000  # a 10 J counter wraps every 10 ms at 1000 W
    zone(powercap / "intel-rapl:3", "package-2", 9_000_000, rng=rng, limit_uw=100_000_000)
    dev = RaplCpus(RaplOptions(powercap_root=str(powercap), packages=[2], wrap_check_s=3600))
    assert dev.wrap_check_s == 3600  # the test drives the checks itself
    mon = Monitor(dev, sync="none")
    mon.begin_window("long")
    values = [9_000_000, 2_000_000, 8_000_000, 1_000_000, 4_000_000, 3_000_000]  # three wraps
    for value in values[1:]:
        set_uj(powercap, "intel-rapl:3", value)
        dev.poll()  # what the wrap-watch thread does each period
    set_uj(powercap, "intel-rapl:3", 5_000_000)
    m = mon.end_window("long")
    seq = values + [5_000_000]
    expected_uj = sum((b - a) % rng for a, b in zip(seq, seq[1:]))
    assert expected_uj == 26_000_000 and dev.counters[0].wraps == 3
    assert m.energy["cpu2-package"] == pytest.approx(expected_uj / 1e6)
    dev.close()


def test_default_check_period_follows_the_counter_range_and_the_thread_runs(powercap):
    rng = 400_000_000  # 400 J: wraps in 0.4 s at 1000 W -> checked every 0.1 s
    zone(powercap / "intel-rapl:3", "package-2", 0, rng=rng, limit_uw=100_000_000)
    dev = RaplCpus(RaplOptions(powercap_root=str(powercap), packages=[2]))
    try:
        assert dev.wrap_check_s == pytest.approx(0.1)
        counter = dev.counters[0]
        set_uj(powercap, "intel-rapl:3", 300_000_000)
        wait_for(lambda: counter._last == 300_000_000)  # the thread read 300 J ...
        set_uj(powercap, "intel-rapl:3", 100_000_000)
        wait_for(lambda: counter.wraps == 1)  # ... and then saw the wrap to 100 J
        assert dev.read_energy()["cpu2-package"] == pytest.approx(500.0)
    finally:
        dev.close()
    assert not dev._sampler.alive
    slow = RaplCpus(RaplOptions(powercap_root=str(powercap), packages=[0]))
    assert slow.wrap_check_s == 60.0  # 262 kJ counters: once a minute is plenty
    slow.close()


def wait_for(cond, timeout_s: float = 10.0) -> None:
    """Wait for the background thread without assuming how fast a loaded machine runs it."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "the wrap-watch thread did not run"
        time.sleep(0.01)


def test_permission_error_explains_the_fix(powercap, monkeypatch):
    real_open = os.open

    def guarded(path, flags, *a, **k):
        if str(path).endswith("energy_uj"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *a, **k)

    monkeypatch.setattr(rapl.os, "open", guarded)
    with pytest.raises(DeviceError, match=r"permission denied\. Since Linux 5\.10 .*root only.*chmod o\+r.*cpu-estimate"):
        RaplCpus(RaplOptions(powercap_root=str(powercap)))


def test_no_rapl_says_to_estimate(tmp_path, monkeypatch):
    monkeypatch.setattr(rapl, "DEFAULT_ROOTS", (str(tmp_path / "nothing"),))
    with pytest.raises(DeviceError, match=r'does not expose RAPL.*plugin = "cpu-estimate"'):
        RaplCpus()
    (tmp_path / "only-psys").mkdir()
    zone(tmp_path / "only-psys" / "intel-rapl:0", "psys", 0)
    with pytest.raises(DeviceError, match="none is a CPU package"):
        RaplCpus(RaplOptions(powercap_root=str(tmp_path / "only-psys")))


def test_missing_limit_asks_for_max_power(tmp_path):
    zone(tmp_path / "pc" / "intel-rapl:0", "package-0", 0)
    with pytest.raises(DeviceError, match="set max_power_w"):
        RaplCpus(RaplOptions(powercap_root=str(tmp_path / "pc")))

"""The cpu-estimate device: TDP x utilisation per package, always marked estimate."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from zeus_core import DeviceError, Monitor
from zeus_core.engine.validation import Problem, structure
from zeus_plugins_cpu.estimate import CpuEstimate
from zeus_plugins_cpu.options import EstimateOptions


class FakeMachine:
    """A /proc/stat and sysfs topology with four CPUs on two packages, and a manual clock."""

    def __init__(self, root: Path) -> None:
        self.stat = root / "stat"
        self.sys_cpu = root / "cpu"
        for cpu, pkg in {0: 0, 1: 0, 2: 1, 3: 1}.items():
            d = self.sys_cpu / f"cpu{cpu}" / "topology"
            d.mkdir(parents=True)
            (d / "physical_package_id").write_text(f"{pkg}\n")
        (self.sys_cpu / "cpufreq").mkdir()
        self.busy = [0, 0, 0, 0]
        self.idle = [0, 0, 0, 0]
        self.now = 50.0
        self.write()

    def write(self) -> None:
        lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
        for i, (b, d) in enumerate(zip(self.busy, self.idle)):
            # user nice system idle iowait irq softirq steal guest guest_nice
            lines.append(f"cpu{i} {b // 2} 0 {b - b // 2} {d} 0 0 0 0 0 0")
        lines.append("intr 1 2 3")
        self.stat.write_text("\n".join(lines) + "\n")

    def run(self, seconds: float, load: list[float]) -> None:
        """Advance time with each CPU busy for the given fraction (100 jiffies per second)."""
        for i, u in enumerate(load):
            self.busy[i] += round(100 * seconds * u)
            self.idle[i] += round(100 * seconds * (1 - u))
        self.now += seconds
        self.write()

    def device(self, **opts) -> CpuEstimate:
        return CpuEstimate(EstimateOptions(**opts), proc_stat=self.stat, sys_cpu=self.sys_cpu, clock=lambda: self.now)


def test_energy_is_tdp_times_utilisation_per_package(tmp_path):
    fm = FakeMachine(tmp_path)
    dev = fm.device(tdp_w=100.0)
    assert dev.names == ["cpu0-package", "cpu1-package"]
    assert dev.energy_sources == {"cpu0-package": "estimate", "cpu1-package": "estimate"}
    assert dev.max_power_w == 200.0
    mon = Monitor(dev, sync="none")
    mon.begin_window("w")
    fm.run(10.0, [1.0, 0.0, 0.5, 0.5])  # package 0 at 50%, package 1 at 50%
    fm.run(10.0, [1.0, 1.0, 0.0, 0.0])  # package 0 at 100%, package 1 idle
    m = mon.end_window("w")
    assert m.time == 20.0
    assert m.energy["cpu0-package"] == pytest.approx(100 * (0.5 * 10 + 1.0 * 10))
    assert m.energy["cpu1-package"] == pytest.approx(100 * 0.5 * 10)
    assert m.estimated == ["cpu0-package", "cpu1-package"]
    assert m.cpu_energy == {0: pytest.approx(1500.0), 1: pytest.approx(500.0)}


def test_an_estimate_says_so_and_claims_no_bound(tmp_path):
    """A model's figure is an estimate whose error nobody published: its bound is unknown (NaN), never 0."""
    fm = FakeMachine(tmp_path)
    dev = fm.device(tdp_w=100.0)
    assert {p.method for p in dev.energy_precision.values()} == {"estimate"}
    mon = Monitor(dev, sync="none")
    mon.begin_window("w")
    fm.run(10.0, [1.0, 1.0, 0.5, 0.5])
    m = mon.end_window("w")
    assert m.scopes == {"cpu0-package": "cpu_package", "cpu1-package": "cpu_package"} and m.method == "estimate"
    assert all(math.isnan(e) for e in m.errors.values()) and math.isnan(m.error_j())


def test_idle_floor_and_max_power_option(tmp_path):
    fm = FakeMachine(tmp_path)
    dev = fm.device(tdp_w=120.0, idle_w=20.0, max_power_w=150.0)
    assert dev.max_power_w == 150.0
    e0 = dev.read_energy()
    fm.run(4.0, [0.25, 0.25, 0.0, 0.0])
    e1 = dev.read_energy()
    assert e1["cpu0-package"] - e0["cpu0-package"] == pytest.approx(4 * (20 + 100 * 0.25))
    assert e1["cpu1-package"] - e0["cpu1-package"] == pytest.approx(4 * 20)
    assert dev.read_power() == {"cpu0-package": pytest.approx(45.0), "cpu1-package": pytest.approx(20.0)}


def test_process_scope_uses_this_process_cpu_time(tmp_path):
    fm = FakeMachine(tmp_path)
    cpu = [0.0]
    dev = CpuEstimate(
        EstimateOptions(tdp_w=100.0, scope="process"),
        proc_stat=fm.stat,
        sys_cpu=fm.sys_cpu,
        clock=lambda: fm.now,
        process_times=lambda: cpu[0],
    )
    fm.run(10.0, [1.0, 1.0, 1.0, 1.0])  # other processes' load does not count
    cpu[0] = 20.0  # this process used 2 of the 4 CPUs for 10 s
    e = dev.read_energy()
    assert e == {"cpu0-package": pytest.approx(500.0), "cpu1-package": pytest.approx(500.0)}


def test_runs_on_this_machine():
    dev = CpuEstimate()
    mon = Monitor(dev, sync="none")
    with mon.window("spin") as w:
        end = time.monotonic() + 0.2
        while time.monotonic() < end:
            pass
    m = w.measurement
    assert set(m.sources.values()) == {"estimate"}
    assert all(math.isfinite(v) and 0 < v <= 85.0 * m.time * 1.01 for v in m.energy.values())
    dev.close()


def test_unreadable_proc_stat_in_system_scope_names_the_option(tmp_path):
    with pytest.raises(DeviceError, match=r'scope = "process"'):
        CpuEstimate(EstimateOptions(), proc_stat=tmp_path / "missing")
    dev = CpuEstimate(EstimateOptions(scope="process"), proc_stat=tmp_path / "missing")
    assert dev.read_energy()


@pytest.mark.parametrize(
    "table,message",
    [
        ({"tdp_w": 0}, "tdp_w must be between 0 and 1000 W"),
        ({"tdp_w": 50.0, "idle_w": 60.0}, "idle_w (60.0 W) must be below tdp_w (50.0 W)"),
        ({"scope": "container"}, "scope must be one of 'system', 'process'"),
        ({"max_power_w": 0}, "max_power_w must be positive"),
        ({"tdp": 100}, "'tdp_w'"),  # the core suggests the right key
    ],
)
def test_job_toml_errors_name_the_field(table, message):
    problems: list[Problem] = []
    assert structure(EstimateOptions, table, ("device",), problems) is None
    assert any(message in p.message for p in problems), problems

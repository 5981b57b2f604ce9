"""The ``cpu-estimate`` device: CPU energy where no RAPL counter can be read.

Power of a package is modelled as ``idle_w + (tdp_w - idle_w) x u`` with
``u`` the package's CPU utilisation; with ``idle_w = 0`` this is CodeCarbon's
fallback, TDP x load. Because the model is linear in ``u``, the energy over
any interval is exact for the model from two readings of the CPU-time
counters, however long the interval: ``E = idle_w x dt + (tdp_w - idle_w) x
busy_time / n_cpus``. So there is no sampling thread; each ``read_energy``
reads ``/proc/stat`` (``system`` scope) or the process's CPU times
(``process`` scope) and adds the interval since the previous read.

Every device name is marked ``estimate`` in ``energy_sources``, so each
Measurement and report says the figure was not measured.

How sure a figure is (``energy_precision``): method ``estimate``, scope
``cpu_package``, with no relative error declared, so its bound is unknown (NaN),
never claimed small. The model's error against a package's real draw is
published nowhere we know of (CodeCarbon documents TDP x load as a fallback,
not its accuracy), and TDP is no ceiling either: a package may draw above it
while turbo lasts (Intel's PL2, AMD's PPT), so not even ``tdp_w x seconds``
bounds a window.

Utilisation in ``system`` scope counts every process on the package's CPUs
(what RAPL would see); a VM or container sees only its own vCPUs in
``/proc/stat``, so set ``tdp_w`` to the share of the package it has.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zeus_core import DeviceError
from zeus_core.device import Precision
from zeus_plugins_cpu.options import EstimateOptions
from zeus_plugins_cpu.rapl import cpu_model

USER_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def package_of_cpus(sys_cpu: Path) -> dict[int, int]:
    """Logical CPU -> physical package id, from sysfs topology; {} where unknown."""
    out = {}
    for d in sys_cpu.glob("cpu[0-9]*"):
        m = re.fullmatch(r"cpu(\d+)", d.name)
        if not m:
            continue
        try:
            out[int(m.group(1))] = int((d / "topology" / "physical_package_id").read_text())
        except (OSError, ValueError):
            continue
    return out


def read_proc_stat(path: Path) -> dict[int, tuple[int, int]]:
    """Logical CPU -> (busy jiffies, total jiffies) from ``/proc/stat``."""
    out = {}
    with open(path) as f:
        for line in f:
            if not line.startswith("cpu") or line.startswith("cpu "):
                continue
            name, *vals = line.split()
            v = [int(x) for x in vals[:8]]
            v += [0] * (8 - len(v))
            user, nice, system, idle, iowait, irq, softirq, steal = v
            busy = user + nice + system + irq + softirq + steal
            out[int(name[3:])] = (busy, busy + idle + iowait)
    return out


class CpuEstimate:
    """The ``cpu-estimate`` device group: ``cpu<K>-package`` per package, source ``estimate``."""

    def __init__(
        self,
        options: EstimateOptions | None = None,
        proc_stat: str | os.PathLike[str] = "/proc/stat",
        sys_cpu: str | os.PathLike[str] = "/sys/devices/system/cpu",
        clock: Callable[[], float] = time.monotonic,
        process_times: Callable[[], float] | None = None,
    ) -> None:
        self.options = options = options or EstimateOptions()
        self.clock = clock
        self._proc_stat = Path(proc_stat)
        self._process_times = process_times or _own_cpu_seconds
        scope = options.scope
        try:
            stat = read_proc_stat(self._proc_stat)
        except (OSError, ValueError):
            stat = {}
        if not stat:
            if scope == "system":
                raise DeviceError(
                    f"cannot read per-CPU times from {self._proc_stat} (not Linux?); "
                    'use scope = "process" in [device] to estimate from this process\'s CPU time'
                )
            stat = {i: (0, 0) for i in range(os.cpu_count() or 1)}
        pkg = package_of_cpus(Path(sys_cpu))
        cpus_by_pkg: dict[int, list[int]] = {}
        for cpu in sorted(stat):
            cpus_by_pkg.setdefault(pkg.get(cpu, 0), []).append(cpu)
        self._packages = sorted(cpus_by_pkg)
        self._cpus_by_pkg = cpus_by_pkg
        self.n_cpus = len(stat)
        self.names = [f"cpu{p}-package" for p in self._packages]
        self.energy_sources = {n: "estimate" for n in self.names}
        #: an estimate without a declared relative error: its bound is unknown (the module says why)
        self.energy_precision = {n: Precision("estimate", "cpu_package", options.tdp_w) for n in self.names}
        n = len(self._packages)
        self.max_power_w = options.max_power_w if options.max_power_w is not None else options.tdp_w * n
        self._energy = {name: 0.0 for name in self.names}
        self._t = clock()
        self._last_stat = self._package_jiffies(stat) if scope == "system" else None
        self._last_cpu_s = self._process_times() if scope == "process" else 0.0
        self.utilisation = {name: 0.0 for name in self.names}
        self.device_models = dict.fromkeys(self.names, f"{model} (estimated)") if (model := cpu_model()) else {}

    def _package_jiffies(self, stat: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
        out = {}
        for p, cpus in self._cpus_by_pkg.items():
            busy = sum(stat[c][0] for c in cpus if c in stat)
            total = sum(stat[c][1] for c in cpus if c in stat)
            out[p] = (busy, total)
        return out

    def _utilisation(self, dt: float) -> dict[str, float]:
        if self.options.scope == "system":
            now = self._package_jiffies(read_proc_stat(self._proc_stat))
            assert self._last_stat is not None  # read at the start in the system scope
            util = {}
            for p, name in zip(self._packages, self.names):
                b0, t0 = self._last_stat[p]
                b1, t1 = now[p]
                # Within one jiffy nothing is counted yet: keep the last figure.
                util[name] = (b1 - b0) / (t1 - t0) if t1 > t0 else self.utilisation[name]
            self._last_stat = now
            return util
        cpu_s = self._process_times()
        share = (cpu_s - self._last_cpu_s) / (dt * self.n_cpus) if dt > 0 else 0.0
        self._last_cpu_s = cpu_s
        return {name: share for name in self.names}

    def read_energy(self) -> dict[str, float]:
        t = self.clock()
        dt = t - self._t
        if dt > 0:
            util = self._utilisation(dt)
            o = self.options
            for name, u in util.items():
                u = min(max(u, 0.0), 1.0)
                self._energy[name] += (o.idle_w + (o.tdp_w - o.idle_w) * u) * dt
                self.utilisation[name] = u
            self._t = t
        return dict(self._energy)

    def read_power(self) -> dict[str, float]:
        """The modelled power (W) at the last read's utilisation."""
        o = self.options
        return {n: o.idle_w + (o.tdp_w - o.idle_w) * u for n, u in self.utilisation.items()}

    def close(self) -> None:
        return None


def _own_cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have been waited for."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def make_estimate(options: EstimateOptions, context: Any) -> CpuEstimate:
    """CPU energy estimated as TDP x utilisation where RAPL cannot be read (marked ``estimate``)."""
    return CpuEstimate(options)

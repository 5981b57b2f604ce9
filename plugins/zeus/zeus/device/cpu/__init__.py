"""``get_cpus()``: the CPU packages' energy counters behind upstream's index-based API."""

from __future__ import annotations

from zeus.device.cpu.common import *  # noqa: F403 - upstream's names
from zeus.device.cpu.common import CPUs
from zeus.device.cpu.rapl import RAPLCPUs, get_current_cpu_index, rapl_is_available  # noqa: F401 - upstream's names

_cpus: CPUs | None = None


def get_cpus() -> CPUs:
    """The process's RAPL counters (:class:`~zeus.device.cpu.rapl.RAPLCPUs`), opened once;
    ``ZeusCPUInitError`` / ``ZeusCPUNoPermissionError`` where none can be read."""
    global _cpus
    if _cpus is None:
        _cpus = RAPLCPUs()
    return _cpus

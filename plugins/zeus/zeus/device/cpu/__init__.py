"""``get_cpus()``: the CPU packages' energy counters behind upstream's index-based API."""

from __future__ import annotations

from zeus.device.cpu.common import *  # noqa: F403 - upstream's names
from zeus.device.cpu.common import CPUs

_cpus: CPUs | None = None


def get_cpus() -> CPUs:
    """The process's CPU counters, opened once; ``ZeusCPUInitError`` / ``ZeusCPUNoPermissionError`` where none can be read."""
    global _cpus
    if _cpus is None:
        _cpus = CPUs()
    return _cpus

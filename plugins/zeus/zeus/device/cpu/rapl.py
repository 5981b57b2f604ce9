"""Intel and AMD CPUs' RAPL counters (upstream's ``zeus.device.cpu.rapl``), read by zeus's ``rapl`` device plugin.

The plugin reads the powercap zones (wraparounds counted, permissions explained); this module keeps
upstream's names: where RAPL is, whether it is there, which package zone a process runs on.
"""

from __future__ import annotations

import os
from functools import lru_cache
from glob import glob
from typing import Any, Literal

from zeus.device.cpu.common import CPU, CpuDramMeasurement, CPUs, ZeusCPUInitError
from zeus.device.exception import ZeusBaseCPUError

#: where Linux exposes RAPL zones (``intel-rapl:N``), and where a container mounts them for zeus
RAPL_DIR = "/sys/class/powercap/intel-rapl"
CONTAINER_RAPL_DIR = "/zeus_sys/class/powercap/intel-rapl"

PLUGIN = "rapl"


@lru_cache(maxsize=1)
def rapl_is_available() -> bool:
    """True where RAPL zones are exposed (``RAPL_DIR``, or ``CONTAINER_RAPL_DIR`` in a container); read once."""
    return os.path.exists(RAPL_DIR) or os.path.exists(CONTAINER_RAPL_DIR)


class ZeusRAPLNotSupportedError(ZeusBaseCPUError):
    """RAPL is not exposed here, or no zone matches what was asked."""


class ZeusRAPLFileInitError(ZeusBaseCPUError):
    """A RAPL zone's file could not be opened."""


class ZeusRAPLPermissionError(ZeusBaseCPUError):
    """RAPL's counters are root-only (since Linux 5.10) and this process may not read them."""


def _last_cpu(pid: int) -> int:
    """The logical CPU ``pid`` last ran on: field 39 of ``/proc/<pid>/stat``, counted after the
    command name (which may hold spaces and parentheses)."""
    with open(f"/proc/{pid}/stat") as f:
        after_name = f.read().rsplit(")", 1)[1].split()
    return int(after_name[36])


def get_current_cpu_index(pid: int | Literal["current"] = "current") -> int:
    """The physical package (socket) id of the CPU ``pid`` (this process by default) last ran on.

    Pin the process (``taskset``) for the answer to hold: the scheduler may move it.
    """
    cpu = _last_cpu(os.getpid() if pid == "current" else pid)
    with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id") as f:
        return int(f.read().strip())


def get_current_rapl_zone_id(pid: int | Literal["current"] = "current") -> int:
    """The RAPL package zone id (the ``N`` of ``intel-rapl:N``) of the socket ``pid`` last ran on.

    The package id sysfs reports need not be the zone's number, so the zone is found by its name:
    ``package-<package id>`` or ``package-<package id>-die-<die id>``. Raises
    ``ZeusRAPLNotSupportedError`` where no zone has that name.
    """
    pid = os.getpid() if pid == "current" else pid
    cpu = _last_cpu(pid)
    topology = f"/sys/devices/system/cpu/cpu{cpu}/topology"
    with open(f"{topology}/physical_package_id") as f:
        package = int(f.read().strip())
    names = {f"package-{package}"}
    try:
        with open(f"{topology}/die_id") as f:
            names.add(f"package-{package}-die-{int(f.read().strip())}")
    except (OSError, ValueError):
        pass
    root = RAPL_DIR if os.path.exists(RAPL_DIR) else CONTAINER_RAPL_DIR
    for zone in glob(f"{root}:[0-9]*"):
        number = zone.rsplit(":", 1)[-1]
        if not number.isdigit() or os.path.basename(zone).count(":") != 1:
            continue  # a sub-zone (intel-rapl:N:M: core, dram)
        try:
            with open(os.path.join(zone, "name")) as f:
                name = f.read().strip()
        except OSError:
            continue
        if name in names:
            return int(number)
    raise ZeusRAPLNotSupportedError(
        f"no RAPL package zone under {root} is named {' or '.join(sorted(names))} (process {pid} last ran on CPU {cpu}, package {package})"
    )


class RAPLCPU(CPU):
    """One CPU package's RAPL counters (and its DRAM zone where it has one), in millijoules."""


class ZeusdRAPLCPU(RAPLCPU):
    """One package's counters read by the daemon ``ZEUSD_HOST_PORT`` names (upstream's class of the same
    name): the daemon's µJ as mJ, raw as upstream gives them (a counter that wraps, wraps here too)."""

    def __init__(self, cpu_index: int, client: Any) -> None:
        from zeus.utils.zeusd import require_capabilities

        require_capabilities(client, read_cpu=True, cpu_ids=[cpu_index])
        self.dram_available = client.dram_available[client.cpu_ids.index(cpu_index)]
        super().__init__(cpu_index, None, f"cpu{cpu_index}-package", f"cpu{cpu_index}-dram" if self.dram_available else None)
        self._client = client

    def get_total_energy_consumption(self) -> CpuDramMeasurement:
        from zeus.device.exception import ZeusdError

        entry = self._client.get_cpu_energy([self.index], cpu=True, dram=True)[self.index]
        if entry.cpu_energy_uj is None:
            raise ZeusdError(f"CPU {self.index}: the daemon at {self._client.endpoint} sent no package energy")
        if entry.dram_energy_uj is None and self.dram_available:
            raise ZeusdError(f"CPU {self.index}: the daemon at {self._client.endpoint} sent no DRAM energy, which /discover offered")
        dram = entry.dram_energy_uj / 1000 if entry.dram_energy_uj is not None else None
        return CpuDramMeasurement(entry.cpu_energy_uj / 1000, dram)


class RAPLCPUs(CPUs):
    """The CPU packages' RAPL counters, read by the ``rapl`` plugin only; or, where upstream's
    ``ZEUSD_HOST_PORT`` (with ``ZEUSD_TOKEN``) names a daemon, by that daemon (``cpu-read`` required).
    ``ZEUSD_SOCK_PATH`` needs nothing here: the ``rapl`` plugin reaches ``zeus daemon`` on that socket."""

    _cpu_class = RAPLCPU

    def __init__(self, registry: Any = None) -> None:
        from zeus.device.gpu.nvidia import OnePlugin
        from zeus.exception import ZeusBaseError
        from zeus.utils.zeusd import ZeusdClient, ZeusdConfig
        from zeus_core.engine import get_registry

        config = ZeusdConfig.from_env()
        if config is not None and config.socket_path is None:
            try:
                client = ZeusdClient(config)
                self._cpus = [ZeusdRAPLCPU(i, client) for i in client.cpu_ids]
            except ZeusBaseError as e:
                raise ZeusCPUInitError(str(e)) from e
            self.group = None
            return
        super().__init__(OnePlugin(registry if registry is not None else get_registry(), PLUGIN))


__all__ = [
    "CONTAINER_RAPL_DIR",
    "RAPLCPU",
    "RAPLCPUs",
    "RAPL_DIR",
    "ZeusRAPLFileInitError",
    "ZeusRAPLNotSupportedError",
    "ZeusRAPLPermissionError",
    "ZeusdRAPLCPU",
    "get_current_cpu_index",
    "get_current_rapl_zone_id",
    "rapl_is_available",
]

"""CPU packages as upstream's index-based API, over the CPU energy counters of zeus's device plugins (RAPL)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from zeus.device.common import DeprecatedAliasABCMeta, deprecated_alias
from zeus.device.exception import ZeusBaseCPUError


@dataclass
class CpuDramMeasurement:
    """Energy counters of one package: ``cpu_mj`` and, where the package has a DRAM zone, ``dram_mj`` (millijoules)."""

    cpu_mj: float
    dram_mj: float | None = None

    def __sub__(self, other: CpuDramMeasurement) -> CpuDramMeasurement:
        dram = self.dram_mj - other.dram_mj if self.dram_mj is not None and other.dram_mj is not None else None
        return CpuDramMeasurement(self.cpu_mj - other.cpu_mj, dram)

    def __truediv__(self, factor: float) -> CpuDramMeasurement:
        return CpuDramMeasurement(self.cpu_mj / factor, self.dram_mj / factor if self.dram_mj is not None else None)


class ZeusCPUInitError(ZeusBaseCPUError):
    """No CPU energy counter could be opened."""


class ZeusCPUNoPermissionError(ZeusBaseCPUError):
    """The counters exist but this process may not read them (root only since Linux 5.10)."""


class ZeusCPUNotFoundError(ZeusBaseCPUError):
    """No such CPU package."""


class CPU(metaclass=DeprecatedAliasABCMeta):
    """One CPU package of a counter group (``package`` and optional ``dram`` names in it)."""

    def __init__(self, index: int, group: Any, package: str, dram: str | None) -> None:
        self.index = index
        self.group = group
        self.package = package
        self.dram = dram

    @property
    def cpu_index(self) -> int:
        return self.index

    @deprecated_alias("getTotalEnergyConsumption")
    def get_total_energy_consumption(self) -> CpuDramMeasurement:
        joules = self.group.read_energy()
        return CpuDramMeasurement(joules[self.package] * 1000.0, joules[self.dram] * 1000.0 if self.dram else None)

    @deprecated_alias("supportsGetDramEnergyConsumption")
    def supports_get_dram_energy_consumption(self) -> bool:
        return self.dram is not None


class CPUs(metaclass=DeprecatedAliasABCMeta):
    """The CPU packages of the installed plugin that reads CPU energy counters (``rapl``)."""

    _cpu_class: type[CPU] = CPU

    def __init__(self, registry: Any = None) -> None:
        from rich.console import Console

        from zeus_core.engine import build_device, get_registry

        registry = registry if registry is not None else get_registry()
        why = []
        for r in registry.measuring("cpu"):
            try:
                group, _ = build_device(registry, r.name, {}, Console(stderr=True))
            except Exception as e:  # noqa: BLE001 - the next plugin may open
                why.append(f"{r.name}: {e}")
                continue
            if any(s != "counter" for s in group.energy_sources.values()):
                group.close()  # an estimate is not upstream's RAPL reading
                why.append(f"{r.name}: no energy counter")
                continue
            self.group = group
            self._cpus = self._packages(group)
            return
        text = "; ".join(why) or "no installed device plugin measures CPUs"
        if "ermission" in text:
            raise ZeusCPUNoPermissionError(f"RAPL counters cannot be read by this process: {text}")
        raise ZeusCPUInitError(f"RAPL unavailable. Failed to initialize CPU management library ({text}).")

    def _packages(self, group: Any) -> list[CPU]:
        names = list(group.names)
        out: list[CPU] = []
        for name in names:
            m = re.fullmatch(r"cpu(\d+)-package", name)
            if m:
                dram = f"cpu{m.group(1)}-dram"
                out.append(self._cpu_class(len(out), group, name, dram if dram in names else None))
        return out

    @property
    def cpus(self) -> Sequence[CPU]:
        return self._cpus

    def __len__(self) -> int:
        return len(self.cpus)

    @deprecated_alias("getTotalEnergyConsumption")
    def get_total_energy_consumption(self, index: int) -> CpuDramMeasurement:
        return self.cpus[index].get_total_energy_consumption()

    @deprecated_alias("supportsGetDramEnergyConsumption")
    def supports_get_dram_energy_consumption(self, index: int) -> bool:
        return self.cpus[index].supports_get_dram_energy_consumption()


class EmptyCPUs(CPUs):
    """No CPU counter: what the monitor uses where none can be read and none was asked for."""

    def __init__(self) -> None:
        self._cpus = []

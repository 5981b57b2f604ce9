"""Upstream's ``ZeusMonitor``: named time and energy windows over GPUs and CPUs, upstream's log file.

The readings come from zeus's device plugins (:func:`zeus.device.get_gpus`,
:func:`zeus.device.get_cpus`); what differs from :class:`zeus_core.ZeusMonitor` is what
upstream's users see: :class:`Measurement` is upstream's dataclass (GPU indices as keys),
GPUs without an energy counter are integrated from a :class:`~zeus.monitor.power.PowerMonitor`,
the log file is truncated at start and holds exactly ``start_time,window_name,elapsed_time``
and one ``gpu{i}_energy`` column per GPU (what upstream's replay monitor reads), and the
zero-energy warning has upstream's text.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from time import time
from typing import Any

from zeus.device import get_cpus, get_gpus, get_soc
from zeus.device.cpu.common import CPUs, EmptyCPUs, ZeusCPUInitError, ZeusCPUNoPermissionError
from zeus.device.gpu.common import EmptyGPUs, GPUs, ZeusBaseGPUError
from zeus.device.soc import EmptySoC, SoC, ZeusSoCInitError
from zeus.monitor.power import PowerMonitor
from zeus.utils.framework import sync_execution as sync_execution_fn

logger = logging.getLogger(__name__)

ZERO_ENERGY_WARNING = (
    "The energy consumption of one or more GPUs was measured as zero. This means that the time duration of the "
    "measurement window was shorter than the GPU's energy counter update period. Consider turning on the "
    "`approx_instant_energy` option in `ZeusMonitor`, which approximates the energy consumption of a short time "
    "window as instant power draw x window duration."
)


@dataclass
class Measurement:
    """What one window measured: ``time`` (s) and joules per GPU, CPU package, DRAM and SoC (keys: indices)."""

    time: float
    gpu_energy: dict[int, float]
    cpu_energy: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    soc_energy: Any = None

    @cached_property
    def total_energy(self) -> float:
        """The GPUs' joules summed (GPUs only, as upstream)."""
        return sum(self.gpu_energy.values())


@dataclass
class MeasurementState(Measurement):
    """The readings at a window's beginning (``time`` is a timestamp here, energies are counter values)."""


class ZeusMonitor:
    """Measure the time and energy of named windows (upstream's constructor and window methods)."""

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        cpu_indices: list[int] | None = None,
        approx_instant_energy: bool = False,
        log_file: str | Path | None = None,
        sync_execution_with: str | Callable[[], Any] = "torch",
    ) -> None:
        self.approx_instant_energy = approx_instant_energy
        self.sync_with = sync_execution_with
        try:
            self.gpus: GPUs = get_gpus()
            visible = len(self.gpus) if gpu_indices is None else 0
        except ZeusBaseGPUError:  # no GPU library: no GPU measured, as upstream
            self.gpus, visible = EmptyGPUs(), 0
        try:
            self.cpus: CPUs = get_cpus()
        except ZeusCPUNoPermissionError as e:
            if cpu_indices:
                raise RuntimeError(
                    "Root privilege is required to read RAPL metrics. See "
                    "https://ml.energy/zeus/getting_started/#system-privileges for more information or "
                    "disable CPU measurement by passing cpu_indices=[] to ZeusMonitor"
                ) from e
            self.cpus = EmptyCPUs()
        except ZeusCPUInitError:
            self.cpus = EmptyCPUs()
        self.gpu_indices = list(gpu_indices) if gpu_indices is not None else list(range(visible))
        self.cpu_indices = list(cpu_indices) if cpu_indices is not None else list(range(len(self.cpus.cpus)))
        logger.info("Monitoring GPU indices %s.", self.gpu_indices)
        logger.info("Monitoring CPU indices %s", self.cpu_indices)

        # the machine's SoC (Apple Silicon, a Jetson), measured beside the GPUs and CPUs as upstream does
        try:
            self.soc: SoC = get_soc()
        except ZeusSoCInitError:
            self.soc = EmptySoC()

        self.measurement_states: dict[str, MeasurementState] = {}
        # GPUs without an energy counter are integrated from sampled power.
        self._counter = [i for i in self.gpu_indices if self.gpus.supports_get_total_energy_consumption(i)]
        polled = [i for i in self.gpu_indices if i not in self._counter]
        self.power_monitor: Any = PowerMonitor(gpu_indices=polled, update_period=None) if polled else None
        self._dram = [i for i in self.cpu_indices if self.cpus.supports_get_dram_energy_consumption(i)]

        self.log_file: Any = None
        if log_file is not None:
            path = Path(log_file)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.log_file = path.open("w")
            header = ",".join(["start_time", "window_name", "elapsed_time", *(f"gpu{i}_energy" for i in self.gpu_indices)])
            self.log_file.write(header + "\n")
            self.log_file.flush()

    def _sync(self) -> None:
        sync_execution_fn(self.gpu_indices, sync_with=self.sync_with)

    def _instant_power(self) -> tuple[dict[int, float], float]:
        start = time()
        watts = {i: self.gpus.get_instant_power_usage(i) / 1000.0 for i in self.gpu_indices}
        return watts, time() - start

    def _read(self) -> MeasurementState:
        timestamp = time()
        gpu = {i: self.gpus.get_total_energy_consumption(i) / 1000.0 for i in self._counter}
        cpu: dict[int, float] = {}
        dram: dict[int, float] = {}
        for i in self.cpu_indices:
            reading = self.cpus.get_total_energy_consumption(i)
            cpu[i] = reading.cpu_mj / 1000.0
            if i in self._dram and reading.dram_mj is not None:
                dram[i] = reading.dram_mj / 1000.0
        soc = None if isinstance(self.soc, EmptySoC) else self.soc.get_total_energy_consumption()
        return MeasurementState(timestamp, gpu, cpu or None, dram or None, soc)

    def begin_window(self, key: str, sync_execution: bool = True, restart: bool = False) -> None:
        """Start window ``key``; one of that name already open is a ``ValueError`` unless ``restart``."""
        if key in self.measurement_states and not restart:
            raise ValueError(f"Measurement window '{key}' already exists")
        if sync_execution:
            self._sync()
        self.measurement_states[key] = self._read()
        logger.debug("Measurement window '%s' started.", key)

    def end_window(self, key: str, sync_execution: bool = True, cancel: bool = False) -> Measurement:
        """End window ``key`` and return its :class:`Measurement`; ``cancel`` returns zeros and logs nothing."""
        try:
            begin = self.measurement_states.pop(key)
        except KeyError:
            raise ValueError(f"Measurement window '{key}' does not exist") from None
        if cancel:
            zero_cpu = dict.fromkeys(self.cpu_indices, 0.0) if self.cpu_indices else None
            zero_dram = dict.fromkeys(self._dram, 0.0) if self._dram else None
            zero_soc = None
            if begin.soc_energy is not None:
                zero_soc = begin.soc_energy - begin.soc_energy
                zero_soc.zero_all_fields()
            return Measurement(0.0, dict.fromkeys(self.gpu_indices, 0.0), zero_cpu, zero_dram, zero_soc)
        power, power_read_s = self._instant_power() if self.approx_instant_energy else ({}, 0.0)
        if sync_execution:
            self._sync()
        end = self._read()
        elapsed = end.time - begin.time
        gpu = {i: end.gpu_energy[i] - begin.gpu_energy[i] for i in self._counter}
        polled = [i for i in self.gpu_indices if i not in self._counter]
        if polled:
            integrated = self.power_monitor.get_energy(begin.time, end.time) or {}
            for i in polled:
                if i in integrated:
                    gpu[i] = integrated[i]
                else:
                    if not power:
                        power, power_read_s = self._instant_power()
                    gpu[i] = power[i] * max(elapsed - power_read_s, 0.0)
        gpu = {i: gpu[i] for i in self.gpu_indices}
        if self.approx_instant_energy:
            for i, joules in gpu.items():
                if joules == 0.0:
                    gpu[i] = power[i] * max(elapsed - power_read_s, 0.0)
        elif any(joules == 0.0 for joules in gpu.values()):
            warnings.warn(ZERO_ENERGY_WARNING, stacklevel=2)
        cpu = {i: end.cpu_energy[i] - begin.cpu_energy[i] for i in self.cpu_indices} if end.cpu_energy and begin.cpu_energy else None
        dram = {i: end.dram_energy[i] - begin.dram_energy[i] for i in end.dram_energy} if end.dram_energy and begin.dram_energy else None
        if self.log_file is not None:
            # any key, as upstream (which formats it into the row): a window named 3 or ("fwd", 1) is logged by its str()
            row = [str(begin.time), str(key), str(elapsed), *(str(gpu[i]) for i in self.gpu_indices)]
            self.log_file.write(",".join(row) + "\n")
            self.log_file.flush()
        soc = end.soc_energy - begin.soc_energy if end.soc_energy is not None and begin.soc_energy is not None else None
        logger.debug("Measurement window '%s' ended.", key)
        return Measurement(elapsed, gpu, cpu, dram, soc)

    def reset_windows(self) -> None:
        """Drop every open window."""
        self.measurement_states.clear()

    def close(self) -> None:
        """Close the log file and stop the power sampler (the devices stay open for other users)."""
        if self.log_file is not None:
            self.log_file.close()
            self.log_file = None
        if self.power_monitor is not None:
            self.power_monitor.stop()
            self.power_monitor = None


__all__ = ["Measurement", "MeasurementState", "ZeusMonitor"]

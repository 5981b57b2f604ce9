"""GPUs as upstream's index-based API, over GPU device groups opened through zeus's registry.

Each CUDA-visible GPU is opened as its own one-GPU group of the installed GPU device plugin
(``nvml``, ``amdsmi``; ``$ZEUS_GPU_DEVICE`` picks one where both open), the first time an
index is used, so a program that touches GPU 1 only never reads GPU 0. Reads and settings go
through the core's device protocols; a setting changed here is journaled and put back by the
plugin as for every zeus part. Units are upstream's: milliwatts, millijoules.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rich.console import Console

from zeus.device.exception import *  # noqa: F403 - upstream exports the GPU errors from here
from zeus.device.exception import (
    ZeusBaseGPUError,
    ZeusGPUHeterogeneousError,
    ZeusGPUInitError,
    ZeusGPUInvalidArgError,
    ZeusGPUNoPermissionError,
    ZeusGPUNotFoundError,
    ZeusGPUNotSupportedError,
)
from zeus_core import DeviceError, PowerDomainReadings, PowerLimitControl, PowerReadings, TemperatureReadings
from zeus_core.device import DeviceModels

_NOT_VISIBLE = re.compile(r"not CUDA-visible|CUDA sees no GPU|makes no GPU visible|out of range", re.I)


def translate(e: Exception) -> ZeusBaseGPUError:
    """An engine error as the upstream GPU error a caller catches (permission, support, argument)."""
    text = str(e)
    if isinstance(e, ValueError) and not isinstance(e, DeviceError):
        return ZeusGPUInvalidArgError(text)
    if "refused" in text or "privilege" in text.lower() or "permission" in text.lower():
        return ZeusGPUNoPermissionError(text)
    if "does not support" in text or "not supported" in text.lower():
        return ZeusGPUNotSupportedError(text)
    return ZeusGPUInitError(text) if isinstance(e, DeviceError) else ZeusBaseGPUError(text)


class GPU:
    """One CUDA-visible GPU (``gpu_index``), a one-GPU group of a zeus device plugin."""

    def __init__(self, gpu_index: int, plugin: str, group: Any) -> None:
        self.gpu_index = gpu_index
        self.plugin = plugin
        self.group = group
        [self.name_key] = list(group.names)
        self._disable_sys_admin_warning = False

    def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except ZeusBaseGPUError:
            raise
        except Exception as e:  # noqa: BLE001 - every engine failure becomes the upstream type callers catch
            raise translate(e) from e

    def _need(self, capability: type, what: str) -> Any:
        if not isinstance(self.group, capability):
            raise ZeusGPUNotSupportedError(f"GPU {self.gpu_index} ({self.plugin}) cannot {what}")
        return self.group

    def get_name(self) -> str:
        models = self.group.device_models if isinstance(self.group, DeviceModels) else {}
        return models.get(self.name_key, self.name_key)

    def get_power_management_limit_constraints(self) -> tuple[int, int]:
        lo, hi = self._call(self._need(PowerLimitControl, "read power limits").power_limit_range)
        return int(round(lo * 1000)), int(round(hi * 1000))

    def get_power_management_limit(self) -> int:
        return int(round(self._call(self._need(PowerLimitControl, "read power limits").power_limit) * 1000))

    def set_power_management_limit(self, power_limit_mw: int, block: bool = True) -> None:
        self._call(self._need(PowerLimitControl, "set power limits").set_power_limit, power_limit_mw / 1000.0)

    def reset_power_management_limit(self, block: bool = True) -> None:
        self.set_power_management_limit(self.get_power_management_limit_constraints()[1], block)

    def set_persistence_mode(self, enabled: bool, block: bool = True) -> None:
        """Persistence mode is left to the driver (zeus keeps a device open while it steers it)."""

    def get_persistence_mode(self) -> bool:
        return True

    def get_instant_power_usage(self) -> int:
        group = self._need(PowerReadings, "read power")
        if isinstance(group, PowerDomainReadings):
            domains = self._call(group.read_power_domains).get(self.name_key, {})
            if "instant" in domains:
                return int(round(domains["instant"] * 1000))
        return int(round(self._call(group.read_power)[self.name_key] * 1000))

    def get_average_power_usage(self) -> int:
        group = self._need(PowerDomainReadings, "read average power")
        domains = self._call(group.read_power_domains).get(self.name_key, {})
        if "average" not in domains:
            raise ZeusGPUNotSupportedError(f"GPU {self.gpu_index} does not report average power")
        return int(round(domains["average"] * 1000))

    def get_average_memory_power_usage(self) -> int:
        group = self._need(PowerDomainReadings, "read memory power")
        domains = self._call(group.read_power_domains).get(self.name_key, {})
        if "memory" not in domains:
            raise ZeusGPUNotSupportedError(f"GPU {self.gpu_index} does not report memory power")
        return int(round(domains["memory"] * 1000))

    def supports_get_total_energy_consumption(self) -> bool:
        return self.group.energy_sources.get(self.name_key) == "counter"

    def get_total_energy_consumption(self) -> int:
        """Millijoules since the device opened (the counter where the GPU has one, else integrated power)."""
        return int(round(self._call(self.group.read_energy)[self.name_key] * 1000))

    def get_gpu_temperature(self) -> int:
        return int(round(self._call(self._need(TemperatureReadings, "read its temperature").read_temperatures)[self.name_key]))

    def close(self) -> None:
        self.group.close()


class GPUs:
    """The CUDA-visible GPUs, opened one by one on first use (see the module's docstring)."""

    def __init__(self, ensure_homogeneous: bool = False, registry: Any = None) -> None:
        from zeus_core.engine.registry import get_registry
        from zeus_core.inloop.monitor import open_gpus

        self._open_gpus = open_gpus
        self._registry = registry if registry is not None else get_registry()
        self._console = Console(stderr=True)
        self._gpus: dict[int, GPU] = {}
        self._count: int | None = None
        self._disable_sys_admin_warning = False
        if not self._registry.measuring("gpu"):
            raise ZeusGPUInitError("No GPU device plugin is installed: "
                                   "pip install zeus-plugins-nvml (NVIDIA) or zeus-plugins-amdsmi (AMD).")
        if ensure_homogeneous:
            self._ensure_homogeneous()

    def _open(self, index: int) -> GPU | None:
        if index < 0:
            raise ZeusGPUNotFoundError(f"GPU index {index} is negative")
        choice = self._open_gpus(self._registry, [index], self._console)
        if choice.opened is None:
            why = choice.why()
            if choice.failed and all(_NOT_VISIBLE.search(reason) for _, reason in choice.failed):
                return None
            raise ZeusGPUInitError(f"GPU {index} could not be opened: {why}")
        name, _, group = choice.opened
        return GPU(index, name, group)

    def _gpu(self, index: int) -> GPU:
        gpu = self._gpus.get(index)
        if gpu is None:
            if self._count is not None and index >= self._count:
                raise ZeusGPUNotFoundError(f"GPU index {index} out of range: {self._count} GPU(s) are visible")
            opened = self._open(index)
            if opened is None:
                raise ZeusGPUNotFoundError(f"GPU index {index} is not CUDA-visible")
            gpu = self._gpus[index] = opened
        return gpu

    @property
    def gpus(self) -> Sequence[GPU]:
        """Every CUDA-visible GPU (opens those not opened yet)."""
        if self._count is None:
            index = 0
            while True:
                if index not in self._gpus:
                    opened = self._open(index)
                    if opened is None:
                        break
                    self._gpus[index] = opened
                index += 1
            self._count = index
        return [self._gpus[i] for i in range(self._count)]

    def __len__(self) -> int:
        return len(self.gpus)

    def _ensure_homogeneous(self) -> None:
        names = {g.get_name() for g in self.gpus}
        if len(names) > 1:
            raise ZeusGPUHeterogeneousError(f"Heterogeneous GPUs found: {sorted(names)}")

    def close(self) -> None:
        """Close every opened GPU (its changed settings go back)."""
        for gpu in self._gpus.values():
            gpu.close()
        self._gpus.clear()

    def __getattr__(self, name: str) -> Any:
        """``gpus.<method>(gpu_index, *args)`` for every per-GPU method of :class:`GPU`."""
        if name.startswith("_") or not callable(getattr(GPU, name, None)):
            raise AttributeError(name)

        def per_gpu(gpu_index: int, *args: Any, **kwargs: Any) -> Any:
            return getattr(self._gpu(gpu_index), name)(*args, **kwargs)

        per_gpu.__name__ = name
        return per_gpu


class EmptyGPUs(GPUs):
    """No GPU: what the monitor uses where no GPU library is on the machine."""

    def __init__(self, ensure_homogeneous: bool = False) -> None:
        self._gpus = {}
        self._count = 0
        self._disable_sys_admin_warning = False

    def _gpu(self, index: int) -> GPU:
        raise ZeusGPUNotFoundError(f"GPU index {index}: no GPU is available")

    def close(self) -> None:
        pass

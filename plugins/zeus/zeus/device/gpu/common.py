"""GPUs as upstream's index-based API, over GPU device groups opened through zeus's registry.

Each CUDA-visible GPU is opened as its own one-GPU group of the installed GPU device plugin
(``nvml``, ``amdsmi``; ``$ZEUS_GPU_DEVICE`` picks one where both open), the first time an
index is used, so a program that touches GPU 1 only never reads GPU 0. Reads and settings go
through the core's device protocols. Units are upstream's: milliwatts, millijoules, MHz.

A setting changed directly here (power limit, locked clocks) stays as set when the process ends,
as upstream leaves it: the device plugin's journal entry is dropped right after the change (on
the local path; ``zeus daemon`` puts back what it set when the process disconnects). The
power-limit optimizer's limits stay journaled (put back at exit, on signals, after a crash).
Clocks go through the core's clock control (:class:`zeus_core.ClockControl`, what Perseus
locks SM clocks with) and, for ranges and memory clocks, the range methods of the ``nvml``
device group (:class:`ClockRangeControl`).
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from rich.console import Console

from zeus.device.common import DeprecatedAliasABCMeta, _alias, deprecated_alias, deprecated_aliases, has_sys_admin
from zeus.device.exception import *  # noqa: F403 - upstream exports the GPU errors from here
from zeus.device.exception import (
    ZeusBaseError,
    ZeusBaseGPUError,
    ZeusGPUHeterogeneousError,
    ZeusGPUInitError,
    ZeusGPUInvalidArgError,
    ZeusGPUNoPermissionError,
    ZeusGPUNotFoundError,
    ZeusGPUNotSupportedError,
)
from zeus_core import ClockControl, DeviceError, PowerDomainReadings, PowerLimitControl, PowerReadings, TemperatureReadings
from zeus_core.device import DeviceModels

_NOT_VISIBLE = re.compile(r"not (CUDA|HIP)-visible|(CUDA|HIP) sees no GPU|makes no GPU visible|out of range", re.I)


def translate(e: Exception) -> ZeusBaseGPUError:
    """An engine error as the upstream GPU error a caller catches (permission, support, argument)."""
    text = str(e)
    if isinstance(e, ValueError) and not isinstance(e, DeviceError):
        return ZeusGPUInvalidArgError(text)
    if "refused" in text or "privilege" in text.lower() or "permission" in text.lower():
        return ZeusGPUNoPermissionError(text)
    if "does not support" in text or "not supported" in text.lower():
        return ZeusGPUNotSupportedError(text)
    if "Invalid Argument" in text:  # the driver's status, as the device plugin words it
        return ZeusGPUInvalidArgError(text)
    if text.endswith("error: Not Found"):
        return ZeusGPUNotFoundError(text)
    return ZeusGPUInitError(text) if isinstance(e, DeviceError) else ZeusBaseGPUError(text)


class GPUIndexError(ZeusGPUNotFoundError, IndexError):
    """A GPU index that names no visible GPU: upstream indexes a list (``IndexError``); this is both."""


class NoGPUsError(ZeusGPUNotFoundError, ValueError):
    """A call on :class:`EmptyGPUs`: upstream raises ``ValueError("No GPUs available.")``; this is both."""


@runtime_checkable
class ClockRangeControl(Protocol):
    """A device group that locks SM and memory clocks to ranges and lists memory clocks (the ``nvml``
    group); with :class:`zeus_core.ClockControl` alone, only one SM clock can be locked."""

    def supported_memory_clocks(self) -> list[int]: ...

    def supported_graphics_clocks(self, memory_mhz: int) -> list[int]: ...

    def lock_clock_range(self, min_mhz: int, max_mhz: int) -> None: ...

    def lock_memory_clock_range(self, min_mhz: int, max_mhz: int) -> None: ...

    def reset_sm_clocks(self) -> None: ...

    def reset_memory_clocks(self) -> None: ...


class GPU(metaclass=DeprecatedAliasABCMeta):
    """One CUDA-visible GPU (``gpu_index``), a one-GPU group of a zeus device plugin."""

    def __init__(self, gpu_index: int, plugin: str, group: Any) -> None:
        self.gpu_index = gpu_index
        self.plugin = plugin
        self.group = group
        [self.name_key] = list(group.names)
        self._disable_sys_admin_warning = False
        #: (client, the daemon's index of this GPU) where ``ZEUSD_HOST_PORT`` names a daemon that makes the changes
        self._zeusd: tuple[Any, int] | None = None

    def _through_zeusd(self, method: str, *args: Any) -> bool:
        """Make a change through the daemon ``ZEUSD_HOST_PORT`` names (True), or say there is none (False)."""
        if self._zeusd is None:
            return False
        client, index = self._zeusd
        getattr(client, method)([index], *args)
        return True

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

    def _warn_sys_admin(self) -> None:
        """Warn once (unless ``_disable_sys_admin_warning``) before a setter where this process lacks
        CAP_SYS_ADMIN and no ``zeus daemon`` makes the change for it, as upstream warns."""
        if self._disable_sys_admin_warning or has_sys_admin():
            return
        if getattr(getattr(self.group, "settings", None), "path", "local") == "daemon":
            return
        warnings.warn(
            "Changing a GPU's power limit or clocks needs SYS_ADMIN privileges (root, or the CAP_SYS_ADMIN "
            "capability), which this process lacks; set ZEUS_DAEMON_SOCKET to a running `zeus daemon` to "
            "make the change through it.",
            stacklevel=3,
        )
        self._disable_sys_admin_warning = True

    def _leave(self, fn: Callable[..., Any], *args: Any) -> None:
        """Make a change that stays when the process ends, as upstream's does: the journal entry the
        change made is dropped (one journaled before, by the optimizer, is kept)."""
        self._warn_sys_admin()
        guard = getattr(getattr(self.group, "settings", None), "guard", None)
        before = set(guard.pending) if guard is not None else set()
        self._call(fn, *args)
        if guard is not None:
            for key in set(guard.pending) - before:
                guard.forget(key)

    @property
    def supports_nonblocking_setters(self) -> bool:
        """False: every setter here returns once the setting is made (``block`` is accepted and ignored)."""
        return False

    @deprecated_alias("getName")
    def get_name(self) -> str:
        models = self.group.device_models if isinstance(self.group, DeviceModels) else {}
        return models.get(self.name_key, self.name_key)

    @deprecated_alias("getPowerManagementLimitConstraints")
    def get_power_management_limit_constraints(self) -> tuple[int, int]:
        lo, hi = self._call(self._need(PowerLimitControl, "read power limits").power_limit_range)
        return int(round(lo * 1000)), int(round(hi * 1000))

    def get_power_management_limit(self) -> int:
        return int(round(self._call(self._need(PowerLimitControl, "read power limits").power_limit) * 1000))

    @deprecated_alias("setPowerManagementLimit")
    def set_power_management_limit(self, power_limit_mw: int, block: bool = True) -> None:
        """Set the limit (mW); it stays when the process ends, as upstream leaves it."""
        if self._zeusd is not None and self.get_power_management_limit() == power_limit_mw:
            return
        if self._through_zeusd("set_power_limit", power_limit_mw, block):
            return
        self._leave(self._need(PowerLimitControl, "set power limits").set_power_limit, power_limit_mw / 1000.0)

    def _set_power_limit_journaled(self, power_limit_mw: int) -> None:
        """The power-limit optimizer's path: the original limit comes back at exit, on signals, after a crash."""
        self._warn_sys_admin()
        self._call(self._need(PowerLimitControl, "set power limits").set_power_limit, power_limit_mw / 1000.0)

    @deprecated_alias("resetPowerManagementLimit")
    def reset_power_management_limit(self, block: bool = True) -> None:
        self.set_power_management_limit(self.get_power_management_limit_constraints()[1], block)

    @deprecated_alias("setPersistenceMode")
    def set_persistence_mode(self, enabled: bool, block: bool = True) -> None:
        """Persistence mode is left to the driver (zeus keeps a device open while it steers it), or to
        the daemon ``ZEUSD_HOST_PORT`` names."""
        self._through_zeusd("set_persistence_mode", enabled, block)

    def get_persistence_mode(self) -> bool:
        return True

    # -- clocks (MHz) --

    def _ranges(self, what: str) -> ClockRangeControl:
        group: ClockRangeControl = self._need(ClockRangeControl, what)
        return group

    @deprecated_alias("getSupportedMemoryClocks")
    def get_supported_memory_clocks(self) -> list[int]:
        """Memory clocks the GPU supports (MHz)."""
        return list(self._call(self._ranges("list memory clocks").supported_memory_clocks))

    @deprecated_alias("getSupportedGraphicsClocks")
    def get_supported_graphics_clocks(self, memory_clock_mhz: int | None = None) -> list[int]:
        """SM clocks the GPU supports at ``memory_clock_mhz`` (MHz); None: at the highest memory clock."""
        if memory_clock_mhz is None and not isinstance(self.group, ClockRangeControl):
            return list(self._call(self._need(ClockControl, "list SM clocks").supported_clocks))
        ranges = self._ranges("list SM clocks")
        if memory_clock_mhz is None:
            memory_clock_mhz = max(self._call(ranges.supported_memory_clocks))
        return list(self._call(ranges.supported_graphics_clocks, memory_clock_mhz))

    @deprecated_alias("setGpuLockedClocks")
    def set_gpu_locked_clocks(self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True) -> None:
        """Lock the SM clock to ``[min_clock_mhz, max_clock_mhz]``; it stays locked when the process ends."""
        if self._through_zeusd("set_gpu_locked_clocks", min_clock_mhz, max_clock_mhz, block):
            return
        if isinstance(self.group, ClockRangeControl):
            self._leave(self.group.lock_clock_range, min_clock_mhz, max_clock_mhz)
        elif min_clock_mhz == max_clock_mhz:
            self._leave(self._need(ClockControl, "lock its SM clock").lock_clocks, min_clock_mhz)
        else:
            raise ZeusGPUNotSupportedError(
                f"GPU {self.gpu_index} ({self.plugin}) locks its SM clock to one value only, not {min_clock_mhz}..{max_clock_mhz} MHz"
            )

    @deprecated_alias("resetGpuLockedClocks")
    def reset_gpu_locked_clocks(self, block: bool = True) -> None:
        """Unlock the SM clock."""
        if self._through_zeusd("reset_gpu_locked_clocks", block):
            return
        if isinstance(self.group, ClockRangeControl):
            self._call(self.group.reset_sm_clocks)
        else:
            self._call(self._need(ClockControl, "unlock its SM clock").reset_clocks)

    @deprecated_alias("setMemoryLockedClocks")
    def set_memory_locked_clocks(self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True) -> None:
        """Lock the memory clock to ``[min_clock_mhz, max_clock_mhz]``; it stays locked when the process ends."""
        if self._through_zeusd("set_mem_locked_clocks", min_clock_mhz, max_clock_mhz, block):
            return
        self._leave(self._ranges("lock its memory clock").lock_memory_clock_range, min_clock_mhz, max_clock_mhz)

    @deprecated_alias("resetMemoryLockedClocks")
    def reset_memory_locked_clocks(self, block: bool = True) -> None:
        """Unlock the memory clock."""
        if self._through_zeusd("reset_mem_locked_clocks", block):
            return
        self._call(self._ranges("unlock its memory clock").reset_memory_clocks)

    def reset_locked_clocks(self, block: bool = True) -> None:
        """Unlock the SM clock, then the memory clock."""
        self.reset_gpu_locked_clocks(block)
        self.reset_memory_locked_clocks(block)

    @deprecated_alias("getInstantPowerUsage")
    def get_instant_power_usage(self) -> int:
        group = self._need(PowerReadings, "read power")
        if isinstance(group, PowerDomainReadings):
            domains = self._call(group.read_power_domains).get(self.name_key, {})
            if "instant" in domains:
                return int(round(domains["instant"] * 1000))
        return int(round(self._call(group.read_power)[self.name_key] * 1000))

    @deprecated_alias("getAveragePowerUsage")
    def get_average_power_usage(self) -> int:
        group = self._need(PowerDomainReadings, "read average power")
        domains = self._call(group.read_power_domains).get(self.name_key, {})
        if "average" not in domains:
            raise ZeusGPUNotSupportedError(f"GPU {self.gpu_index} does not report average power")
        return int(round(domains["average"] * 1000))

    @deprecated_alias("getAverageMemoryPowerUsage")
    def get_average_memory_power_usage(self) -> int:
        group = self._need(PowerDomainReadings, "read memory power")
        domains = self._call(group.read_power_domains).get(self.name_key, {})
        if "memory" not in domains:
            raise ZeusGPUNotSupportedError(f"GPU {self.gpu_index} does not report memory power")
        return int(round(domains["memory"] * 1000))

    @deprecated_alias("supportsGetTotalEnergyConsumption")
    def supports_get_total_energy_consumption(self) -> bool:
        return self.group.energy_sources.get(self.name_key) == "counter"

    @deprecated_alias("getTotalEnergyConsumption")
    def get_total_energy_consumption(self) -> int:
        """Millijoules since the device opened (the counter where the GPU has one, else integrated power)."""
        return int(round(self._call(self.group.read_energy)[self.name_key] * 1000))

    @deprecated_alias("getGpuTemperature")
    def get_gpu_temperature(self) -> int:
        return int(round(self._call(self._need(TemperatureReadings, "read its temperature").read_temperatures)[self.name_key]))

    def close(self) -> None:
        self.group.close()


class GPUs:
    """The CUDA-visible GPUs, opened one by one on first use (see the module's docstring)."""

    _gpu_class: type[GPU] = GPU
    _zeusd: Any = None

    if TYPE_CHECKING:  # set below from GPU's methods (``_per_gpu``): ``gpus.<method>(gpu_index, ...)``

        def get_name(self, gpu_index: int) -> str: ...
        def get_power_management_limit_constraints(self, gpu_index: int) -> tuple[int, int]: ...
        def get_power_management_limit(self, gpu_index: int) -> int: ...
        def set_power_management_limit(self, gpu_index: int, power_limit_mw: int, block: bool = True) -> None: ...
        def reset_power_management_limit(self, gpu_index: int, block: bool = True) -> None: ...
        def set_persistence_mode(self, gpu_index: int, enabled: bool, block: bool = True) -> None: ...
        def get_persistence_mode(self, gpu_index: int) -> bool: ...
        def get_supported_memory_clocks(self, gpu_index: int) -> list[int]: ...
        def get_supported_graphics_clocks(self, gpu_index: int, memory_clock_mhz: int | None = None) -> list[int]: ...
        def set_gpu_locked_clocks(self, gpu_index: int, min_clock_mhz: int, max_clock_mhz: int, block: bool = True) -> None: ...
        def reset_gpu_locked_clocks(self, gpu_index: int, block: bool = True) -> None: ...
        def set_memory_locked_clocks(self, gpu_index: int, min_clock_mhz: int, max_clock_mhz: int, block: bool = True) -> None: ...
        def reset_memory_locked_clocks(self, gpu_index: int, block: bool = True) -> None: ...
        def reset_locked_clocks(self, gpu_index: int, block: bool = True) -> None: ...
        def get_instant_power_usage(self, gpu_index: int) -> int: ...
        def get_average_power_usage(self, gpu_index: int) -> int: ...
        def get_average_memory_power_usage(self, gpu_index: int) -> int: ...
        def supports_get_total_energy_consumption(self, gpu_index: int) -> bool: ...
        def get_total_energy_consumption(self, gpu_index: int) -> int: ...
        def get_gpu_temperature(self, gpu_index: int) -> int: ...

    def __init__(self, ensure_homogeneous: bool = False, registry: Any = None) -> None:
        from zeus_core.engine import get_registry
        from zeus_core.inloop.monitor import open_gpus

        self._open_gpus = open_gpus
        self._registry = registry if registry is not None else get_registry()
        self._console = Console(stderr=True)
        self._gpus: dict[int, GPU] = {}
        self._count: int | None = None
        self._disable_sys_admin_warning = False
        if not self._registry.measuring("gpu"):
            raise ZeusGPUInitError(
                "No GPU device plugin is installed: pip install zeus-plugins-nvml (NVIDIA) or zeus-plugins-amdsmi (AMD)."
            )
        self._zeusd = self._zeusd_from_env()
        if ensure_homogeneous:
            self._ensure_homogeneous()

    @staticmethod
    def _zeusd_from_env() -> Any:
        """The daemon upstream's ``ZEUSD_HOST_PORT`` (with ``ZEUSD_TOKEN``) names, which makes every change
        (``gpu-control`` required, as upstream requires it); None without one. ``ZEUSD_SOCK_PATH`` needs
        nothing here: the device plugins reach ``zeus daemon`` on that socket themselves."""
        from zeus.utils.zeusd import ZeusdClient, ZeusdConfig, require_capabilities

        config = ZeusdConfig.from_env()
        if config is None or config.socket_path is not None:
            return None
        try:
            client = ZeusdClient(config)
            require_capabilities(client, control_gpu=True)
        except ZeusBaseError as e:
            raise ZeusGPUInitError(str(e)) from e
        return client

    @staticmethod
    def _daemon_index(index: int) -> int:
        """The index the daemon knows GPU ``index`` by: its entry of ``CUDA_VISIBLE_DEVICES`` (or
        ``HIP_VISIBLE_DEVICES``) where that lists indices, as upstream reads it; else ``index``."""
        visible = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("HIP_VISIBLE_DEVICES")
        if not visible:
            return index
        entries = [e.strip() for e in visible.split(",")]
        if index < len(entries) and entries[index].isdigit():
            return int(entries[index])
        raise ZeusGPUInitError(
            f"ZEUSD_HOST_PORT names a daemon, which numbers GPUs by index, but CUDA_VISIBLE_DEVICES={visible!r} does not "
            f"give GPU {index} as one; list indices there"
        )

    def _open(self, index: int) -> GPU | None:
        if index < 0:
            raise GPUIndexError(f"GPU index {index} is negative")
        choice = self._open_gpus(self._registry, [index], self._console)
        if choice.opened is None:
            why = choice.why()
            if choice.failed and all(_NOT_VISIBLE.search(reason) for _, reason in choice.failed):
                return None
            raise ZeusGPUInitError(f"GPU {index} could not be opened: {why}")
        name, _, group = choice.opened
        gpu = self._gpu_class(index, name, group)
        if self._zeusd is not None:
            daemon_index = self._daemon_index(index)
            if daemon_index not in self._zeusd.gpu_ids:
                raise ZeusGPUInitError(
                    f"GPU {index} is GPU {daemon_index} of this node, which the daemon at {self._zeusd.endpoint} does not serve"
                )
            gpu._zeusd = (self._zeusd, daemon_index)
            gpu._disable_sys_admin_warning = True
        return gpu

    def _gpu(self, index: int) -> GPU:
        gpu = self._gpus.get(index)
        if gpu is None:
            if self._count is not None and index >= self._count:
                raise GPUIndexError(f"GPU index {index} out of range: {self._count} GPU(s) are visible")
            opened = self._open(index)
            if opened is None:
                raise GPUIndexError(f"GPU index {index} is not CUDA-visible")
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


def _per_gpu(name: str) -> Callable[..., Any]:
    def per_gpu(self: GPUs, gpu_index: int, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._gpu(gpu_index), name)(*args, **kwargs)

    per_gpu.__name__ = name
    per_gpu.__qualname__ = f"GPUs.{name}"
    per_gpu.__doc__ = f"``GPU.{name}`` of GPU ``gpu_index``."
    return per_gpu


# ``gpus.<method>(gpu_index, ...)`` for every per-GPU method of GPU, and upstream's camelCase aliases of them.
for _name in [n for n in vars(GPU) if not n.startswith("_") and callable(vars(GPU)[n]) and n != "close"]:
    setattr(GPUs, _name, _per_gpu(_name))
for _old, _new in deprecated_aliases(GPU).items():
    setattr(GPUs, _old, _alias(_new, _old, getattr(GPUs, _new)))


class EmptyGPUs(GPUs):
    """No GPU: what the monitor uses where no GPU library is on the machine."""

    def __init__(self, ensure_homogeneous: bool = False) -> None:
        self._gpus = {}
        self._count = 0
        self._disable_sys_admin_warning = False

    def _gpu(self, index: int) -> GPU:
        raise NoGPUsError("No GPUs available.")

    def close(self) -> None:
        pass

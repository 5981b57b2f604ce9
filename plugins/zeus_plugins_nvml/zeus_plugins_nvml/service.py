"""The ``nvml`` service of ``zeus daemon``: GPU power limits and clocks for unprivileged clients.

The daemon (root) builds :class:`NvmlService` once from ``[serve.nvml]``: it
opens NVML and resolves the served GPUs (``gpus = "all"``, or NVML indices and
``GPU-`` UUIDs) to UUIDs, so that a typo fails the daemon's start with the
field's path. Clients name a GPU by UUID, which means the same thing in every
process whatever its ``CUDA_VISIBLE_DEVICES``.

Every request is checked against the GPU before NVML is asked: the GPU must be
served, a power limit must lie inside its constraints, a clock must be one it
supports. Changes go through ``client.change`` (journaled under the ``nvml``
restorer, the same :func:`~zeus_plugins_nvml.control.restore_setting` a local
run uses after a crash), so the daemon puts them back when the client leaves.
An NVML failure is returned with its error code (``detail.nvml_error``), and
the client raises the same NVML exception a local call would have.
"""

from __future__ import annotations

from typing import Any

import attrs

from zeus_core.daemon import Refused, operation
from zeus_core.devicekit import GpuArgs, GpuService, all_or_list, select_gpus
from zeus_plugins_nvml.control import OWNER, apply, driver_errors, key_for, nvml_module
from zeus_plugins_nvml.processes import ProcessSampler


@attrs.define
class NvmlServeOptions:
    """``[serve.nvml]`` in the daemon's configuration. ``gpus``: the GPUs clients may change:
    ``"all"`` or a list of NVML indices (as ``nvidia-smi`` numbers them) and ``GPU-`` UUIDs."""

    gpus: Any = attrs.field(default="all", validator=all_or_list('NVML indices and GPU UUIDs (e.g. [0, "GPU-8f2e..."])'))


@attrs.define
class PowerLimit:
    gpu: str
    milliwatts: int


@attrs.define
class ProcessesSince:
    gpu: str
    since: float  # Unix seconds


@attrs.define
class ClockRange:
    gpu: str
    min_mhz: int
    max_mhz: int


class NvmlService(GpuService):
    """Set and reset power limits, lock and reset SM and memory clocks, on the served GPUs only."""

    section = "serve.nvml"

    def start_library(self) -> None:
        self._nvml = nvml = nvml_module()
        self._errors = driver_errors(nvml)
        self._samplers: dict[str, ProcessSampler] = {}  # per GPU, for read_processes (each keeps its learned idle power)
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as e:
            raise RuntimeError(f"NVML cannot start ({e}); is the NVIDIA driver loaded?") from None

    def stop_library(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass

    def gpu_table(self, wanted: Any) -> dict[str, tuple[int, Any]]:
        """UUID -> (NVML index, handle) of each served GPU; an entry is an NVML index or a GPU UUID."""
        nvml = self._nvml
        everything = {}
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            everything[nvml.nvmlDeviceGetUUID(h)] = (i, h)
        by_index = {i: u for u, (i, _) in everything.items()}

        def lookup(entry: Any) -> str | None:
            if isinstance(entry, int):
                return by_index.get(entry)
            return entry if isinstance(entry, str) else None

        def missing(entry: Any) -> str:
            if isinstance(entry, int):
                return f"no GPU has NVML index {entry}; this machine has {len(everything)} (0..{len(everything) - 1})"
            return f"{entry!r} is neither an NVML index nor the UUID of a GPU here (`nvidia-smi -L`: {', '.join(everything) or 'none'})"

        return select_gpus(wanted, everything, lookup, missing)

    def _clocks_in(self, args: ClockRange, supported: list[int], what: str) -> None:
        bad = [c for c in (args.min_mhz, args.max_mhz) if c not in supported]
        if bad or args.min_mhz > args.max_mhz:
            raise Refused(
                f"{what} {args.min_mhz}..{args.max_mhz} MHz is not a range of supported clocks of GPU {args.gpu} "
                f"(min <= max, each one of {sorted(supported)})"
            )

    def _lock(self, args: ClockRange, client: Any, setting: str, what: str) -> dict[str, Any]:
        """Lock ``setting`` (SM or memory clocks) to ``args``' range, each end a supported clock.
        SM clocks are those NVML lists at the highest memory clock, the one the device locks first."""
        h = self.gpus.handle(args.gpu)
        nvml = self._nvml
        with self._errors.served(f"lock the {what}", f"GPU {args.gpu}"):
            mems = list(nvml.nvmlDeviceGetSupportedMemoryClocks(h))
            supported = mems if setting == "locked_memory_clocks" else list(nvml.nvmlDeviceGetSupportedGraphicsClocks(h, max(mems)))
            self._clocks_in(args, supported, what)
            client.change(OWNER, key_for(args.gpu, setting), None, lambda: apply(nvml, h, setting, [args.min_mhz, args.max_mhz]))
        return {"min_mhz": args.min_mhz, "max_mhz": args.max_mhz}

    def _release(self, args: GpuArgs, client: Any, setting: str, resettable: bool) -> dict[str, Any]:
        h = self.gpus.handle(args.gpu)
        reset = (lambda: apply(self._nvml, h, setting, None)) if resettable else None
        with self._errors.served(f"reset the {setting.replace('_', ' ')}", f"GPU {args.gpu}"):
            return {"outcome": client.release(OWNER, key_for(args.gpu, setting), reset)}

    @operation(PowerLimit)
    def set_power_limit(self, args: PowerLimit, client: Any) -> dict[str, Any]:
        """Set a GPU's power limit (mW), inside its constraints."""
        h = self.gpus.handle(args.gpu)
        nvml = self._nvml
        with self._errors.served("set the power limit", f"GPU {args.gpu}"):
            lo, hi = nvml.nvmlDeviceGetPowerManagementLimitConstraints(h)
            if not lo <= args.milliwatts <= hi:
                raise Refused(
                    f"{args.milliwatts / 1000:g} W is outside the power-limit range of GPU {args.gpu}: {lo / 1000:g} to {hi / 1000:g} W"
                )
            current = nvml.nvmlDeviceGetPowerManagementLimit(h)
            # Even at the same value: the client now holds the limit, so another client leaving
            # cannot put it back under it.
            client.change(OWNER, key_for(args.gpu, "power_limit"), current, lambda: apply(nvml, h, "power_limit", args.milliwatts))
        return {"milliwatts": args.milliwatts, "previous": current}

    @operation(GpuArgs)
    def reset_power_limit(self, args: GpuArgs, client: Any) -> dict[str, Any]:
        """Put back the power limit the GPU had before this client changed it."""
        return self._release(args, client, "power_limit", resettable=False)

    @operation(ClockRange)
    def lock_clocks(self, args: ClockRange, client: Any) -> dict[str, Any]:
        """Lock a GPU's SM clock to a range of its supported clocks (at its highest memory clock)."""
        return self._lock(args, client, "locked_clocks", "SM clock")

    @operation(GpuArgs)
    def reset_clocks(self, args: GpuArgs, client: Any) -> dict[str, Any]:
        """Unlock a GPU's SM clock."""
        return self._release(args, client, "locked_clocks", resettable=True)

    @operation(ClockRange)
    def lock_memory_clocks(self, args: ClockRange, client: Any) -> dict[str, Any]:
        """Lock a GPU's memory clock to a range of its supported memory clocks."""
        return self._lock(args, client, "locked_memory_clocks", "memory clock")

    @operation(GpuArgs)
    def reset_memory_clocks(self, args: GpuArgs, client: Any) -> dict[str, Any]:
        """Unlock a GPU's memory clock."""
        return self._release(args, client, "locked_memory_clocks", resettable=True)

    # -- reads (the HTTP API's /gpu/get_* and stream_power; zeus_core.daemon.gpus) --

    @operation(GpuArgs, changes=False)
    def read_info(self, args: GpuArgs, client: Any) -> dict[str, Any]:
        """A GPU's NVML index, model, PCI address and whether it counts energy."""
        h = self.gpus.handle(args.gpu)
        nvml = self._nvml
        with self._errors.served("describe", f"GPU {args.gpu}"):
            name = nvml.nvmlDeviceGetName(h)
            try:
                pci = nvml.nvmlDeviceGetPciInfo(h).busId
            except (AttributeError, nvml.NVMLError):  # a driver (or the simulated one) without PCI information
                pci = ""
            try:
                nvml.nvmlDeviceGetTotalEnergyConsumption(h)
                energy = True
            except nvml.NVMLError:
                energy = False
        text = lambda v: v.decode() if isinstance(v, bytes) else str(v)  # noqa: E731
        return {"index": self.gpus.gpus[args.gpu][0], "name": text(name), "pci_address": text(pci), "cumulative_energy_available": energy}

    @operation(GpuArgs, changes=False)
    def read_power(self, args: GpuArgs, client: Any) -> dict[str, int]:
        """A GPU's power draw now, in mW."""
        h = self.gpus.handle(args.gpu)
        with self._errors.served("read the power", f"GPU {args.gpu}"):
            return {"power_mw": int(self._nvml.nvmlDeviceGetPowerUsage(h))}

    @operation(GpuArgs, changes=False)
    def read_energy(self, args: GpuArgs, client: Any) -> dict[str, int]:
        """A GPU's energy counter since the driver loaded, in mJ."""
        h = self.gpus.handle(args.gpu)
        with self._errors.served("read the energy counter", f"GPU {args.gpu}"):
            return {"energy_mj": int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h))}

    @operation(GpuArgs, changes=False)
    def read_power_limit(self, args: GpuArgs, client: Any) -> dict[str, int]:
        """A GPU's power limit and the range it accepts, in mW."""
        h = self.gpus.handle(args.gpu)
        nvml = self._nvml
        with self._errors.served("read the power limit", f"GPU {args.gpu}"):
            lo, hi = nvml.nvmlDeviceGetPowerManagementLimitConstraints(h)
            return {
                "power_limit_mw": int(nvml.nvmlDeviceGetPowerManagementLimit(h)),
                "min_power_limit_mw": int(lo),
                "max_power_limit_mw": int(hi),
            }

    @operation(GpuArgs, changes=False)
    def read_persistence_mode(self, args: GpuArgs, client: Any) -> dict[str, bool]:
        """Whether a GPU's persistence mode is on."""
        h = self.gpus.handle(args.gpu)
        with self._errors.served("read the persistence mode", f"GPU {args.gpu}"):
            return {"enabled": bool(self._nvml.nvmlDeviceGetPersistenceMode(h))}

    @operation(ProcessesSince, changes=False)
    def read_processes(self, args: ProcessesSince, client: Any) -> dict[str, Any]:
        """A GPU's energy counter (mJ) and who ran on it since ``since`` (Unix seconds): its compute
        processes with their SM weights, for the daemon's energy attribution
        (:mod:`zeus_core.daemon.accounting`)."""
        h = self.gpus.handle(args.gpu)
        nvml = self._nvml
        sampler = self._samplers.get(args.gpu)
        if sampler is None:
            sampler = self._samplers[args.gpu] = ProcessSampler(nvml, [_ServedGpu(args.gpu, h, nvml)])
        with self._errors.served("read the processes", f"GPU {args.gpu}"):
            energy = int(nvml.nvmlDeviceGetTotalEnergyConsumption(h))
            activity = sampler.activity(args.since)[args.gpu]
        return {"energy_mj": energy, "activity": attrs.asdict(activity)}


class _ServedGpu:
    """A served GPU as :class:`~zeus_plugins_nvml.processes.ProcessSampler` reads one."""

    def __init__(self, uuid: str, handle: Any, nvml: Any) -> None:
        self.name, self.handle, self._nvml = uuid, handle, nvml

    def read_power(self) -> float:
        return float(self._nvml.nvmlDeviceGetPowerUsage(self.handle)) / 1000.0

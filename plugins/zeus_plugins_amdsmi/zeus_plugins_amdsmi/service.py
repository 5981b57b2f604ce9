"""The ``amdsmi`` service of ``zeus daemon``: AMD GPU power caps for unprivileged clients.

The daemon (root) builds :class:`AmdsmiService` once from ``[serve.amdsmi]``: it
starts amdsmi and resolves the served GPUs (``gpus = "all"``, or amd-smi's GPU
indices and device UUIDs) to UUIDs, so that a typo fails the daemon's start
with the field's path. Clients name a GPU by its amdsmi device UUID, which
means the same in every process whatever its visibility variables.

A cap is checked against the GPU's range before amdsmi is asked. Changes go
through ``client.change`` (journaled under the ``amdsmi`` restorer, the same
:func:`~zeus_plugins_amdsmi.control.restore_setting` a local run uses after a
crash), so the daemon puts them back when the client leaves. An amdsmi failure
is returned with its status code (``detail.amdsmi_error``) and the client
raises the same amdsmi exception a local call would have.

The read operations (``read_info``, ``read_power``, ``read_energy``, ``read_power_limit``,
``read_persistence_mode``) are what the daemon's HTTP API (upstream zeusd's) serves AMD GPUs
with, as the ``nvml`` service's serve NVIDIA ones, in the API's units (mW, mJ); and
``set_power_limit`` / ``reset_power_limit`` (mW) are the HTTP API's power-limit routes on an AMD
GPU, the same caps as ``set_power_cap`` (µW). ``read_processes`` is the energy counter and who ran
on a GPU since the last call, by GFX engine time (:mod:`zeus_plugins_amdsmi.processes`), for the
daemon's energy accounting (``GET /gpu/get_attributed_energy``). Persistence mode is NVML's alone: reading it is
refused (400), as upstream zeusd answers for AMD GPUs.

``lock_clocks`` / ``lock_memory_clocks`` (MHz) set the GFX or memory clock's soft limits
(``amdsmi_set_gpu_clk_range``), the HTTP API's ``set_gpu_locked_clocks`` and
``set_mem_locked_clocks`` on an AMD GPU; ``reset_clocks`` / ``reset_memory_clocks`` put back
the limits that stood before this client's change (journaled under the same restorer). amdsmi
takes a range, never one frequency: a range whose minimum is not below its maximum, or that
leaves the GPU's hardware range, is refused (400) before amdsmi is asked. The hardware range is
read once per GPU and clock, before this daemon's first lock of it (amdsmi reads back the
limits in force, so a lock hides the hardware's).
"""

from __future__ import annotations

from typing import Any

import attrs

from zeus_core.daemon import Refused, operation
from zeus_core.devicekit import GpuArgs, GpuService, all_or_list, select_gpus
from zeus_plugins_amdsmi.control import (
    OWNER,
    acquire,
    clock_range,
    driver_errors,
    key_for,
    release,
    set_cap,
    set_clock_range,
    smi_module,
)
from zeus_plugins_amdsmi.processes import GfxTimeSampler


@attrs.define
class AmdsmiServeOptions:
    """``[serve.amdsmi]`` in the daemon's configuration. ``gpus``: the GPUs clients may change:
    ``"all"`` or a list of amd-smi GPU indices (PCI order, as ``amd-smi list`` numbers them),
    amdsmi device UUIDs and PCI addresses."""

    gpus: Any = attrs.field(default="all", validator=all_or_list("amd-smi GPU indices, device UUIDs and PCI addresses"))


@attrs.define
class PowerCap:
    gpu: str
    microwatts: int


@attrs.define
class PowerLimit:
    gpu: str
    milliwatts: int


@attrs.define
class ProcessesSince:
    gpu: str
    since: float  # Unix seconds (the accountant's last reading: this service counts from its own last one)


@attrs.define
class ClockRange:
    gpu: str
    min_mhz: int
    max_mhz: int


def _number(value: Any) -> float | None:
    """An amdsmi reading, or None where it says ``"N/A"``."""
    return float(value) if isinstance(value, (int, float)) else None


class AmdsmiService(GpuService):
    """Set and reset power caps, on the served GPUs only (named by amdsmi device UUID)."""

    section = "serve.amdsmi"

    def start_library(self) -> None:
        self._hardware_clocks: dict[tuple[str, str], list[int]] = {}  # (UUID, setting) -> the hardware range (MHz)
        self._smi = smi = smi_module()
        self._errors = driver_errors(smi)
        self._samplers: dict[str, GfxTimeSampler] = {}  # per GPU, for read_processes (each keeps its readings and learned idle power)
        try:
            acquire(smi)
        except smi.AmdSmiLibraryException as e:
            raise RuntimeError(f"amdsmi cannot start ({e.get_error_info()}); is the amdgpu driver loaded?") from None

    def stop_library(self) -> None:
        release(self._smi)

    def gpu_table(self, wanted: Any) -> dict[str, tuple[int, Any]]:
        """UUID -> (amd-smi index, handle) of each served GPU; an entry may be an amd-smi index, a
        device UUID or a PCI address (``0000:0c:00.0``, as ``amd-smi list`` shows them)."""
        smi = self._smi
        everything: dict[str, tuple[int, Any]] = {}
        names: dict[Any, str] = {}  # index, UUID or PCI address -> UUID
        for i, h in enumerate(smi.amdsmi_get_processor_handles()):
            uuid = smi.amdsmi_get_gpu_device_uuid(h)
            everything[uuid] = (i, h)
            names.update({i: uuid, uuid: uuid, smi.amdsmi_get_gpu_device_bdf(h).lower(): uuid})

        def missing(entry: Any) -> str:
            what = "amd-smi index" if isinstance(entry, int) else "device UUID or PCI address"
            return f"no AMD GPU here has the {what} {entry!r}; `amd-smi list` shows the {len(everything)} GPU(s)"

        return select_gpus(wanted, everything, lambda e: names.get(e.lower() if isinstance(e, str) and ":" in e else e), missing)

    @operation(PowerCap)
    def set_power_cap(self, args: PowerCap, client: Any) -> dict[str, Any]:
        """Set a GPU's power cap (µW), inside its range."""
        h = self.gpus.handle(args.gpu)
        smi = self._smi
        with self._errors.served("set the power cap", f"GPU {args.gpu}"):
            caps = smi.amdsmi_get_power_cap_info(h)
            lo, hi = caps["min_power_cap"], caps["max_power_cap"]
            if not lo <= args.microwatts <= hi:
                raise Refused(
                    f"{args.microwatts} µW is outside the power-cap range of GPU {args.gpu}: {lo} to {hi} µW "
                    f"({lo / 1e6:g} to {hi / 1e6:g} W)"
                )
            current = caps["power_cap"]
            # Even at the same value: the client now holds the cap, so another client leaving
            # cannot put it back under it.
            client.change(OWNER, key_for(args.gpu), current, lambda: set_cap(smi, h, args.microwatts))
        return {"microwatts": args.microwatts, "previous": current}

    @operation(GpuArgs)
    def reset_power_cap(self, args: GpuArgs, client: Any) -> dict[str, Any]:
        """Put back the cap the GPU had before this client changed it."""
        self.gpus.handle(args.gpu)
        with self._errors.served("reset the power cap", f"GPU {args.gpu}"):
            return {"outcome": client.release(OWNER, key_for(args.gpu), None)}

    @operation(PowerLimit)
    def set_power_limit(self, args: PowerLimit, client: Any) -> dict[str, Any]:
        """Set a GPU's power cap in mW (the HTTP API's unit), inside its range."""
        return self.set_power_cap(PowerCap(args.gpu, args.milliwatts * 1000), client)

    @operation(GpuArgs)
    def reset_power_limit(self, args: GpuArgs, client: Any) -> dict[str, Any]:
        """Put back the cap the GPU had before this client changed it."""
        return self.reset_power_cap(args, client)

    def _lock(self, args: ClockRange, client: Any, setting: str, what: str) -> dict[str, Any]:
        """Set ``setting``'s soft limits to ``args``' range, inside the GPU's hardware range."""
        h = self.gpus.handle(args.gpu)
        smi = self._smi
        with self._errors.served(f"lock the {what}", f"GPU {args.gpu}"):
            hardware = self._hardware_clocks.get((args.gpu, setting))
            if hardware is None:  # before this daemon's first lock of it: what amdsmi reads is the hardware's
                hardware = self._hardware_clocks[(args.gpu, setting)] = clock_range(smi, h, setting)
            lo, hi = hardware
            if not lo <= args.min_mhz < args.max_mhz <= hi:
                raise Refused(
                    f"{what} {args.min_mhz}..{args.max_mhz} MHz is not a range AMD GPU {args.gpu} takes: the minimum below "
                    f"the maximum, both within {lo}..{hi} MHz (amdsmi sets a clock's limits; it cannot hold one frequency)"
                )
            current = clock_range(smi, h, setting)
            client.change(OWNER, key_for(args.gpu, setting), current, lambda: set_clock_range(smi, h, setting, args.min_mhz, args.max_mhz))
        return {"min_mhz": args.min_mhz, "max_mhz": args.max_mhz}

    def _unlock(self, args: GpuArgs, client: Any, setting: str, what: str) -> dict[str, Any]:
        """Put back the limits this client's lock replaced; for a client that holds none, the hardware range
        (where this daemon has read it)."""
        h = self.gpus.handle(args.gpu)
        hardware = self._hardware_clocks.get((args.gpu, setting))
        reset = (lambda: set_clock_range(self._smi, h, setting, *hardware)) if hardware else None
        with self._errors.served(f"reset the {what}", f"GPU {args.gpu}"):
            return {"outcome": client.release(OWNER, key_for(args.gpu, setting), reset)}

    @operation(ClockRange)
    def lock_clocks(self, args: ClockRange, client: Any) -> dict[str, Any]:
        """Set a GPU's GFX clock limits (MHz): the minimum below the maximum, inside the hardware range."""
        return self._lock(args, client, "locked_clocks", "GFX clock")

    @operation(GpuArgs)
    def reset_clocks(self, args: GpuArgs, client: Any) -> dict[str, Any]:
        """Put back the GFX clock limits the GPU had before this client changed them."""
        return self._unlock(args, client, "locked_clocks", "GFX clock")

    @operation(ClockRange)
    def lock_memory_clocks(self, args: ClockRange, client: Any) -> dict[str, Any]:
        """Set a GPU's memory clock limits (MHz): the minimum below the maximum, inside the hardware range."""
        return self._lock(args, client, "locked_memory_clocks", "memory clock")

    @operation(GpuArgs)
    def reset_memory_clocks(self, args: GpuArgs, client: Any) -> dict[str, Any]:
        """Put back the memory clock limits the GPU had before this client changed them."""
        return self._unlock(args, client, "locked_memory_clocks", "memory clock")

    # -- reads (the HTTP API's /gpu/get_* and stream_power; zeus_core.daemon.http) --

    @operation(GpuArgs, changes=False)
    def read_info(self, args: GpuArgs, client: Any) -> dict[str, Any]:
        """A GPU's amd-smi index, model, PCI address and whether its energy accumulator reads."""
        index, h = self.gpus.gpus[args.gpu][0], self.gpus.handle(args.gpu)
        smi = self._smi
        with self._errors.served("describe", f"GPU {args.gpu}"):
            name = str(smi.amdsmi_get_gpu_asic_info(h)["market_name"])
            pci = str(smi.amdsmi_get_gpu_device_bdf(h)).lower()
            try:
                smi.amdsmi_get_energy_count(h)
                energy = True
            except smi.AmdSmiLibraryException:
                energy = False
        return {"index": index, "name": name, "pci_address": pci, "cumulative_energy_available": energy}

    @operation(GpuArgs, changes=False)
    def read_power(self, args: GpuArgs, client: Any) -> dict[str, int]:
        """A GPU's socket power now, in mW (the instant reading where the GPU has one, else the average)."""
        h = self.gpus.handle(args.gpu)
        with self._errors.served("read the power", f"GPU {args.gpu}"):
            info = self._smi.amdsmi_get_power_info(h)
        watts = next(
            (w for key in ("current_socket_power", "average_socket_power", "socket_power") if (w := _number(info.get(key))) is not None),
            None,
        )
        if watts is None:
            raise Refused(f"GPU {args.gpu} reports no socket power (amdsmi says N/A)")
        return {"power_mw": int(watts * 1000)}

    @operation(GpuArgs, changes=False)
    def read_energy(self, args: GpuArgs, client: Any) -> dict[str, int]:
        """A GPU's energy accumulator in mJ (counts times its resolution; a 32-bit one wraps, as the driver's does)."""
        h = self.gpus.handle(args.gpu)
        with self._errors.served("read the energy counter", f"GPU {args.gpu}"):
            count = self._smi.amdsmi_get_energy_count(h)
        return {"energy_mj": int(count["energy_accumulator"] * count["counter_resolution"] / 1000)}

    @operation(GpuArgs, changes=False)
    def read_power_limit(self, args: GpuArgs, client: Any) -> dict[str, int]:
        """A GPU's power cap and the range it accepts, in mW."""
        h = self.gpus.handle(args.gpu)
        with self._errors.served("read the power cap", f"GPU {args.gpu}"):
            caps = self._smi.amdsmi_get_power_cap_info(h)
        return {
            "power_limit_mw": caps["power_cap"] // 1000,
            "min_power_limit_mw": caps["min_power_cap"] // 1000,
            "max_power_limit_mw": caps["max_power_cap"] // 1000,
        }

    @operation(ProcessesSince, changes=False)
    def read_processes(self, args: ProcessesSince, client: Any) -> dict[str, Any]:
        """A GPU's energy counter (mJ) and who ran on it since the last call: its processes with their GFX
        engine time, for the daemon's energy attribution (:mod:`zeus_core.daemon.accounting`)."""
        h = self.gpus.handle(args.gpu)
        smi = self._smi
        with self._errors.served("read the processes", f"GPU {args.gpu}"):
            sampler = self._samplers.get(args.gpu)
            if sampler is None:  # its first reading is the baseline of the next call
                sampler = self._samplers[args.gpu] = GfxTimeSampler(smi, [_ServedGpu(args.gpu, h, smi)])
            count = smi.amdsmi_get_energy_count(h)
            activity = sampler.activity(None)[args.gpu]
        return {"energy_mj": int(count["energy_accumulator"] * count["counter_resolution"] / 1000), "activity": attrs.asdict(activity)}

    @operation(GpuArgs, changes=False)
    def read_persistence_mode(self, args: GpuArgs, client: Any) -> dict[str, bool]:
        """Refused: persistence mode is an NVML setting; AMD GPUs have none (upstream zeusd answers 400 too)."""
        self.gpus.handle(args.gpu)
        raise Refused(f"GPU {args.gpu} is an AMD GPU: persistence mode is an NVIDIA (NVML) setting")


class _ServedGpu:
    """A served GPU as :class:`~zeus_plugins_amdsmi.processes.GfxTimeSampler` reads one."""

    def __init__(self, uuid: str, handle: Any, smi: Any) -> None:
        self.name, self.handle, self._smi = uuid, handle, smi

    def read_power(self) -> float | None:
        info = self._smi.amdsmi_get_power_info(self.handle)
        return _number(info.get("current_socket_power")) or _number(info.get("average_socket_power"))

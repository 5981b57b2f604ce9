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

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from zeus_core.daemon import OperationFailed, Refused, ServiceConfigError, operation
from zeus_plugins_nvml.control import OWNER, apply, key_for, nvml_module


def _gpus(_inst, _attr, value):
    if value == "all":
        return
    if not isinstance(value, list) or not value:
        raise ValueError(f'gpus must be "all" or a list of NVML indices and GPU UUIDs (e.g. [0, "GPU-8f2e..."]), got {value!r}')


@attrs.define
class NvmlServeOptions:
    """``[serve.nvml]`` in the daemon's configuration. ``gpus``: the GPUs clients may change:
    ``"all"`` or a list of NVML indices (as ``nvidia-smi`` numbers them) and ``GPU-`` UUIDs."""

    gpus: Any = attrs.field(default="all", validator=_gpus)


@attrs.define
class Gpu:
    """Arguments that name one GPU."""

    gpu: str


@attrs.define
class PowerLimit:
    gpu: str
    milliwatts: int


@attrs.define
class ClockRange:
    gpu: str
    min_mhz: int
    max_mhz: int


class NvmlService:
    """Set and reset power limits, lock and reset SM and memory clocks, on the served GPUs only."""

    def __init__(self, options: NvmlServeOptions, ctx: Any) -> None:
        self._nvml = nvml = nvml_module()
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as e:
            raise RuntimeError(f"NVML cannot start ({e}); is the NVIDIA driver loaded?") from None
        try:
            self._handles = self._resolve(options.gpus)
        except BaseException:
            nvml.nvmlShutdown()
            raise
        ctx.log.info("nvml: serving %s", ", ".join(f"{i}:{u}" for u, (i, _) in self._handles.items()))

    def _resolve(self, wanted: Any) -> dict[str, tuple[int, Any]]:
        """UUID -> (NVML index, handle) of each served GPU."""
        nvml = self._nvml
        everything = {}
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            everything[nvml.nvmlDeviceGetUUID(h)] = (i, h)
        if wanted == "all":
            return everything
        out: dict[str, tuple[int, Any]] = {}
        by_index = {i: u for u, (i, _) in everything.items()}
        for pos, entry in enumerate(wanted):
            if isinstance(entry, int) and not isinstance(entry, bool):
                uuid = by_index.get(entry)
                if uuid is None:
                    raise ServiceConfigError(f"no GPU has NVML index {entry}; this machine has {len(everything)} (0..{len(everything) - 1})", ("gpus", pos))
            elif isinstance(entry, str) and entry in everything:
                uuid = entry
            else:
                known = ", ".join(everything) or "none"
                raise ServiceConfigError(f"{entry!r} is neither an NVML index nor the UUID of a GPU here (`nvidia-smi -L`: {known})", ("gpus", pos))
            if uuid in out:
                raise ServiceConfigError(f"GPU {uuid} is listed twice", ("gpus", pos))
            out[uuid] = everything[uuid]
        return out

    def _handle(self, uuid: str) -> Any:
        got = self._handles.get(uuid)
        if got is None:
            raise Refused(f"GPU {uuid} is not served by this daemon (it serves {', '.join(self._handles)}); the administrator lists it in [serve.nvml] gpus")
        return got[1]

    @contextmanager
    def _driver(self, action: str, uuid: str) -> Iterator[None]:
        try:
            yield
        except self._nvml.NVMLError as e:
            raise OperationFailed(f"cannot {action} of GPU {uuid}: NVML: {e}", {"nvml_error": e.value}) from None

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
        h = self._handle(args.gpu)
        nvml = self._nvml
        with self._driver(f"lock the {what}", args.gpu):
            mems = list(nvml.nvmlDeviceGetSupportedMemoryClocks(h))
            supported = mems if setting == "locked_memory_clocks" else list(nvml.nvmlDeviceGetSupportedGraphicsClocks(h, max(mems)))
            self._clocks_in(args, supported, what)
            client.change(OWNER, key_for(args.gpu, setting), None, lambda: apply(nvml, h, setting, [args.min_mhz, args.max_mhz]))
        return {"min_mhz": args.min_mhz, "max_mhz": args.max_mhz}

    def _release(self, args: Gpu, client: Any, setting: str, resettable: bool) -> dict[str, Any]:
        h = self._handle(args.gpu)
        reset = (lambda: apply(self._nvml, h, setting, None)) if resettable else None
        with self._driver(f"reset the {setting.replace('_', ' ')}", args.gpu):
            return {"outcome": client.release(OWNER, key_for(args.gpu, setting), reset)}

    @operation(PowerLimit)
    def set_power_limit(self, args: PowerLimit, client: Any) -> dict[str, Any]:
        """Set a GPU's power limit (mW), inside its constraints."""
        h = self._handle(args.gpu)
        nvml = self._nvml
        with self._driver("set the power limit", args.gpu):
            lo, hi = nvml.nvmlDeviceGetPowerManagementLimitConstraints(h)
            if not lo <= args.milliwatts <= hi:
                raise Refused(f"{args.milliwatts / 1000:g} W is outside the power-limit range of GPU {args.gpu}: {lo / 1000:g} to {hi / 1000:g} W")
            current = nvml.nvmlDeviceGetPowerManagementLimit(h)
            # Even at the same value: the client now holds the limit, so another client leaving
            # cannot put it back under it.
            client.change(OWNER, key_for(args.gpu, "power_limit"), current, lambda: apply(nvml, h, "power_limit", args.milliwatts))
        return {"milliwatts": args.milliwatts, "previous": current}

    @operation(Gpu)
    def reset_power_limit(self, args: Gpu, client: Any) -> dict[str, Any]:
        """Put back the power limit the GPU had before this client changed it."""
        return self._release(args, client, "power_limit", resettable=False)

    @operation(ClockRange)
    def lock_clocks(self, args: ClockRange, client: Any) -> dict[str, Any]:
        """Lock a GPU's SM clock to a range of its supported clocks (at its highest memory clock)."""
        return self._lock(args, client, "locked_clocks", "SM clock")

    @operation(Gpu)
    def reset_clocks(self, args: Gpu, client: Any) -> dict[str, Any]:
        """Unlock a GPU's SM clock."""
        return self._release(args, client, "locked_clocks", resettable=True)

    @operation(ClockRange)
    def lock_memory_clocks(self, args: ClockRange, client: Any) -> dict[str, Any]:
        """Lock a GPU's memory clock to a range of its supported memory clocks."""
        return self._lock(args, client, "locked_memory_clocks", "memory clock")

    @operation(Gpu)
    def reset_memory_clocks(self, args: Gpu, client: Any) -> dict[str, Any]:
        """Unlock a GPU's memory clock."""
        return self._release(args, client, "locked_memory_clocks", resettable=True)

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass

"""What every device group needs: a ``with`` block, and what a group of GPUs does with all of them.
(The factory that loads a device's code only when a device is opened, ``deferred_factory``, lives in
:mod:`zeus_core.loading`, so that a plugin's entry point that names one loads no more.)"""

from __future__ import annotations

from typing import Any

from zeus_core.errors import DeviceError


class ClosedOnExit:
    """A device group usable as ``with Group(...) as g:``, closed (its settings put back) at the
    end of the block. The group defines ``close()``."""

    def close(self) -> None:  # pragma: no cover - every group defines its own
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class GpuGroup(ClosedOnExit):
    """What a device group of GPUs does with all of them at once.

    ``gpus`` holds one object per GPU (a :class:`~zeus_core.devicekit.DriverDevice`
    with ``power_limit_range()``, ``power_limit()``, ``set_power_limit(watts)``,
    ``read_power()``, ``power_domains()`` and ``temperature()``, the last three
    None or empty where the GPU does not report them); ``names`` their device
    names. ``limit_name`` is what the vendor calls a power limit (``"power cap"`` on
    AMD), for messages; ``settings`` the group's
    :class:`~zeus_core.devicekit.SettingsPath`; ``release()`` what closing does after
    the settings are back. The group then offers
    :class:`~zeus_core.device.PowerLimitControl` (one value on every GPU; the
    range they all accept), :class:`~zeus_core.device.PerDevicePowerLimits`
    (every value checked before any is set), the readings, the models, and the
    identity (the GPU models: a limit learned on one model means nothing on another).
    """

    gpus: list[Any]
    names: list[str]
    limit_name = "power limit"
    #: the group's setting changes (None until the group got that far in opening)
    settings: Any = None
    _closed = False

    # -- lifetime --

    def release(self) -> None:
        """Stop what the group runs (pollers) and let go of the vendor library; called by :meth:`close`
        after the settings are put back, and by a constructor that fails half-way."""

    def close(self) -> None:
        """Put back every setting this group changed, then :meth:`release`; a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.settings is not None:
                self.settings.close()
        finally:
            self.release()

    @property
    def control_paths(self) -> dict[str, str]:
        """How each GPU's settings change (:class:`~zeus_core.device.ControlPaths`): ``local``, ``local,
        read-only`` (without the capability the driver checks, and no daemon) or ``daemon``."""
        return dict.fromkeys(self.names, self.settings.access if self.settings is not None else "local")

    # -- readings --

    def read_power(self) -> dict[str, float]:
        """Power (W) per GPU, where the GPU reports it."""
        return {g.name: w for g in self.gpus if (w := g.read_power()) is not None}

    def read_power_domains(self) -> dict[str, dict[str, float]]:
        """``{gpu: {domain: W}}``, each domain where the GPU reports it."""
        return {g.name: g.power_domains() for g in self.gpus}

    def read_temperatures(self) -> dict[str, float]:
        """Temperature (°C) per GPU; a GPU without the sensor is absent."""
        return {g.name: c for g in self.gpus if (c := g.temperature()) is not None}

    @property
    def device_models(self) -> dict[str, str]:
        """Each GPU's product name."""
        return {g.name: g.model for g in self.gpus}

    def identity(self) -> dict[str, Any]:
        """The GPU models behind the group (:class:`~zeus_core.HasIdentity`)."""
        return {"gpu_models": [g.model for g in self.gpus]}

    # -- power limits --

    def _ranges(self) -> dict[str, tuple[float, float]]:
        return {g.name: g.power_limit_range() for g in self.gpus}

    def power_limit_range(self) -> tuple[float, float]:
        """The range every GPU accepts (the intersection of their ranges), in W."""
        ranges = self._ranges()
        lo, hi = max(lo for lo, _ in ranges.values()), min(hi for _, hi in ranges.values())
        if lo > hi:
            raise DeviceError(
                f"the GPUs' {self.limit_name} ranges do not overlap: {ranges}; give each GPU its own {self.limit_name} (set_power_limits)"
            )
        return lo, hi

    def power_limits(self) -> dict[str, float]:
        return {g.name: g.power_limit() for g in self.gpus}

    def power_limit(self) -> float:
        """The GPUs' power limit (W); their mean when they differ."""
        values = list(self.power_limits().values())
        return values[0] if len(set(values)) == 1 else sum(values) / len(values)

    def set_power_limit(self, watts: float) -> None:
        """One value on every GPU (each checked against its GPU's range before any is set)."""
        self.set_power_limits(dict.fromkeys(self.names, watts))

    def set_power_limits(self, watts: dict[str, float]) -> None:
        """A value per GPU (by name). Every one is checked against its GPU's range before any is set,
        so a bad one changes nothing."""
        unknown = sorted(set(watts) - set(self.names))
        if unknown:
            raise ValueError(f"no GPU named {', '.join(unknown)}; this device has {', '.join(self.names)}")
        ranges = self._ranges()
        outside = {n: w for n, w in watts.items() if not ranges[n][0] <= w <= ranges[n][1]}
        if outside:
            raise ValueError(
                f"{self.limit_name}s outside their GPU's range: "
                + "; ".join(f"{n} {w:g} W (range {ranges[n][0]:g} to {ranges[n][1]:g} W)" for n, w in outside.items())
            )
        for g in self.gpus:
            if g.name in watts:
                g.set_power_limit(watts[g.name])


def check_clock(mhz: int, supported: list[int], what: str, note: str = "") -> None:
    """A ``ValueError`` naming the nearest supported clocks unless ``mhz`` is one of ``supported``;
    ``what`` names the clock and its GPU ("SM clock of gpu0 (...)"), ``note`` adds how the list is made."""
    if mhz not in supported:
        near = sorted(supported, key=lambda c: abs(c - mhz))[:3]
        raise ValueError(
            f"{mhz} MHz is not a supported {what}; nearest: {', '.join(map(str, sorted(near)))} MHz "
            f"(range {min(supported)}..{max(supported)}{note})"
        )


class GpuClocks:
    """:class:`~zeus_core.device.ClockControl` for a :class:`GpuGroup` whose GPUs each lock their SM clock
    (``supported_clocks()``, ``lock_clocks(mhz)``, ``reset_clocks()`` per GPU): the clocks every GPU
    supports, one lock on every GPU; and :class:`~zeus_core.device.ClockReadings` from each GPU's
    ``clocks()`` (``{"sm": MHz, "memory": MHz}``, each where the GPU reports it). A mixin, so that only
    groups that can lock and read clocks declare it."""

    gpus: list[Any]

    def supported_clocks(self) -> list[int]:
        """SM clocks (MHz, highest first) that every GPU supports."""
        common = set(self.gpus[0].supported_clocks())
        for g in self.gpus[1:]:
            common &= set(g.supported_clocks())
        return sorted(common, reverse=True)

    def lock_clocks(self, mhz: int) -> None:
        for g in self.gpus:
            g.lock_clocks(mhz)

    def reset_clocks(self) -> None:
        for g in self.gpus:
            g.reset_clocks()

    def read_clocks(self) -> dict[str, dict[str, float]]:
        """The current SM (GFX) and memory clocks (MHz) per GPU; a GPU that reports neither is absent."""
        return {g.name: c for g in self.gpus if (c := g.clocks())}


class GpuClockRanges(GpuClocks):
    """:class:`GpuClocks` and clock ranges and memory clocks, every GPU at once (what zeus-compat's
    upstream clock API calls): each GPU offers ``supported_memory_clocks()``,
    ``supported_graphics_clocks(memory_mhz)``, ``lock_clock_range``, ``lock_memory_clock_range``,
    ``reset_sm_clocks()`` and ``reset_memory_clocks()``."""

    def supported_memory_clocks(self) -> list[int]:
        """Memory clocks (MHz) every GPU supports, in the first GPU's order."""
        common = set.intersection(*(set(g.supported_memory_clocks()) for g in self.gpus))
        return [m for m in self.gpus[0].supported_memory_clocks() if m in common]

    def supported_graphics_clocks(self, memory_mhz: int) -> list[int]:
        """SM clocks (MHz) every GPU supports at memory clock ``memory_mhz``, in the first GPU's order."""
        common = set.intersection(*(set(g.supported_graphics_clocks(memory_mhz)) for g in self.gpus))
        return [c for c in self.gpus[0].supported_graphics_clocks(memory_mhz) if c in common]

    def lock_clock_range(self, min_mhz: int, max_mhz: int) -> None:
        for g in self.gpus:
            g.lock_clock_range(min_mhz, max_mhz)

    def lock_memory_clock_range(self, min_mhz: int, max_mhz: int) -> None:
        for g in self.gpus:
            g.lock_memory_clock_range(min_mhz, max_mhz)

    def reset_sm_clocks(self) -> None:
        for g in self.gpus:
            g.reset_sm_clocks()

    def reset_memory_clocks(self) -> None:
        for g in self.gpus:
            g.reset_memory_clocks()

"""The ``power-sweep`` profiler: time and energy per (local batch, power limit) on one device group.

It produces the input of the allocator. For each batch size it asks the user's
step factory for a step function, then for each power limit sets the limit,
runs ``warmup_steps`` untimed iterations (the clock and power settle after a
limit change) and measures ``profile_steps`` iterations in one window. The
result is written in the published format, so a profile taken here and one
from the prototype's scripts are interchangeable.

The step factory is named in ``job.toml`` as ``"module:function"`` or
``"file.py:function"`` (a file relative to the job file's folder). It is called
as ``function(batch_size)`` or, when it takes two arguments,
``function(batch_size, devices)`` and returns a callable that runs one training
iteration. Energy is summed over the group's devices (or over ``devices`` when
given), so profile one GPU type with a group holding only those GPUs.

With ``thermally_stable`` each batch size's limits are measured as
:class:`zeus_core.profiling.ThermalProfiler` measures (``trials`` rounds in a balanced
seeded order, a cooldown to the temperature band before each trial, a warm-up past
``warmup_steps`` until power and temperature settle), and each figure is the mean of
its trials. Off by default: the sweep, and the profiles it writes, are as before.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from zeus_core import BuildContext, DeviceGroup, JobSummary, Monitor, PowerLimitControl, RunFailed, load_callable
from zeus_core.profiling import Cooldown, Sample, Settling, ThermalProfiler, device_probe
from zeus_plugins_hetero.options import PowerSweepOptions
from zeus_plugins_hetero.profile import Profile


def _takes_devices(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


def sweep_limits(devices: Any, step_w: float) -> list[float]:
    """Highest to lowest limit in ``step_w`` steps over the device's range (both ends included)."""
    low, high = (float(x) for x in devices.power_limit_range())
    limits = list(np.arange(high, low - 1e-9, -step_w))
    if limits[-1] - low > 1e-9:
        limits.append(low)
    return [float(x) for x in limits]


class PowerSweep:
    """Profiler part: sweeps batch sizes x power limits on the job's device group."""

    needs_device = (PowerLimitControl,)

    def __init__(self, options: PowerSweepOptions, context: BuildContext, step_factory: Callable[..., Any] | None = None) -> None:
        self.options = options
        devices: DeviceGroup | None = context.parts.get("device")
        if devices is None:
            raise ValueError("power-sweep needs a [device] section: the device group to profile")
        if not isinstance(devices, PowerLimitControl):
            raise ValueError("power-sweep needs a device that can set power limits (PowerLimitControl)")
        self.devices = devices
        self.context = context
        self.step_factory = step_factory or load_callable(options.step, context.job_dir)
        if options.power_limits:
            self.limits = sorted((float(p) for p in options.power_limits), reverse=True)
        else:
            self.limits = sweep_limits(self.devices, options.limit_step_w)
        names = list(self.devices.names)
        unknown = [n for n in options.devices if n not in names]
        if unknown:
            raise ValueError(f"devices {unknown} are not in the device group (it has {', '.join(names)})")
        self.names = list(options.devices) or names
        self.profile: Profile | None = None
        self.saved: Path | None = None

    def plan(self, ctx: BuildContext) -> None:
        """Run the sweep; restore the power limit the devices had before it."""
        o = self.options
        devices = self.devices
        current = devices.power_limit()
        before = max(self.limits) if current is None else float(current)
        monitor = Monitor(devices)
        batches = sorted(o.batch_sizes)
        time = np.empty((len(batches), len(self.limits)))
        energy = np.empty_like(time)
        try:
            for i, b in enumerate(batches):
                try:
                    step = self.step_factory(b, devices) if _takes_devices(self.step_factory) else self.step_factory(b)
                except Exception as exc:
                    raise RunFailed(f"power-sweep: the step factory failed for batch size {b}: {type(exc).__name__}: {exc}") from exc
                if o.thermally_stable:
                    time[i], energy[i] = self._stable(b, step, monitor)
                    continue
                for j, limit in enumerate(self.limits):
                    devices.set_power_limit(limit)
                    try:
                        for _ in range(o.warmup_steps):
                            step()
                        monitor.begin_window("power-sweep")
                        for _ in range(o.profile_steps):
                            step()
                        m = monitor.end_window("power-sweep")
                    except Exception as exc:
                        monitor.reset_windows()
                        raise RunFailed(f"power-sweep: a step failed at batch size {b}, {limit:g} W: {type(exc).__name__}: {exc}") from exc
                    time[i, j] = m.time
                    energy[i, j] = sum(m.energy[n] for n in self.names)
        finally:
            devices.set_power_limit(before)
        source = o.save_to or "power-sweep"
        self.profile = Profile(batches, self.limits, time, energy, o.profile_steps, source=source)
        if o.save_to:
            self.saved = self.profile.save(self.context.resolve_path(o.save_to))

    def _stable(self, batch: int, step: Callable[[], Any], monitor: Monitor) -> tuple[list[float], list[float]]:
        """One batch size's window time and energy at each limit, thermally stable (the means of the trials)."""
        o, devices = self.options, self.devices
        assert isinstance(devices, PowerLimitControl)

        def prepare(limit: float) -> None:
            devices.set_power_limit(limit)
            for _ in range(o.warmup_steps):
                step()

        def measure(limit: float) -> Sample:
            monitor.begin_window("power-sweep")
            for _ in range(o.profile_steps):
                step()
            m = monitor.end_window("power-sweep")
            return Sample(m.time, sum(m.energy[n] for n in self.names))

        profiler = ThermalProfiler(
            trials=o.trials, settling=Settling(), cooldown=Cooldown(band_c=o.cooldown_band_c, timeout_s=o.cooldown_timeout_s), seed=o.seed
        )
        try:
            results = profiler.run(self.limits, prepare, measure, work=lambda _limit: step(), probe=device_probe(devices))
        except Exception as exc:
            monitor.reset_windows()
            raise RunFailed(f"power-sweep: a step failed at batch size {batch}: {type(exc).__name__}: {exc}") from exc
        return [r.time_s.mean for r in results], [r.energy_j.mean for r in results]

    def write_outputs(self, out_dir: Path, job: JobSummary) -> list[Path]:
        if self.profile is None:
            return []
        return [self.profile.save(Path(out_dir) / "profile.json")]

    def summary(self, job: JobSummary) -> dict:
        if self.profile is None:
            return {}
        return {
            "batch_sizes": [int(b) for b in self.profile.batch_sizes],
            "power_limits": self.limits,
            "profile_steps": self.profile.profile_steps,
            "saved_to": None if self.saved is None else str(self.saved),
        }

    def report(self, console: Console, job: JobSummary) -> None:
        if self.profile is None:
            return
        p = self.profile
        table = Table(title=f"power sweep: ms and J per iteration ({p.profile_steps} measured per point)")
        table.add_column("batch", justify="right")
        for limit in self.limits:
            table.add_column(f"{limit:g} W", justify="right")
        t, e = p.per_iteration(p.batch_sizes)
        for i, b in enumerate(p.batch_sizes):
            table.add_row(str(int(b)), *[f"{t[i, j] * 1e3:,.1f} ms / {e[i, j]:,.2f} J" for j in range(len(self.limits))])
        console.print(table)

"""Named measurement windows over :class:`~zeus_core.device.DeviceGroup` s.

A window records the devices' clock and cumulative energy when it begins and
when it ends; the difference is a :class:`~zeus_core.measurement.Measurement`.
Windows are named, may overlap and nest, and cost one energy read per device
group per edge, so a window around every training step is affordable.

Before each timestamp the accelerator is synchronised (``torch`` by default),
so that kernels launched asynchronously inside a window are paid for by that
window and not by the next one.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, cast

from zeus_core.attribution import Attribution, DeviceActivity, ProcessActivityReadings, attribute_all
from zeus_core.device import DeviceGroup, EnergyPrecision, GpuSync, PowerReadings, Precision
from zeus_core.measurement import Measurement, default_scope, format_joules
from zeus_core.scheduler import context as scheduler_context

# --------------------------------------------------------------------------- device sets


class DeviceSet:
    """Several device groups measured as one (``nvml`` GPUs plus ``rapl`` CPUs).

    The first group's clock times the windows; the groups of one machine all
    use ``time.monotonic``. ``sync_indices`` are the CUDA indices of the groups
    that have GPUs.
    """

    def __init__(self, groups: Sequence[DeviceGroup]) -> None:
        if not groups:
            raise ValueError("a DeviceSet needs at least one device group")
        seen: dict[str, int] = {}
        for i, g in enumerate(groups):
            for n in g.names:
                if n in seen:
                    raise ValueError(f"device name {n!r} is provided by two device groups (#{seen[n]} and #{i})")
                seen[n] = i
        self.groups = list(groups)
        self.names = [n for g in groups for n in g.names]
        self.energy_sources = {n: s for g in groups for n, s in g.energy_sources.items()}
        #: each device's :class:`~zeus_core.device.Precision`, from the groups that say it (the
        #: groups' own dicts are read at each window, so a source a group changes is seen)
        self._precisions = [g.energy_precision for g in groups if isinstance(g, EnergyPrecision)]
        self.max_power_w = float(sum(g.max_power_w for g in groups))
        self.clock = groups[0].clock
        idx = [i for g in groups if isinstance(g, GpuSync) for i in (g.sync_indices or ())]
        self.sync_indices = idx or None

    def read_energy(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for g in self.groups:
            out.update(g.read_energy())
        return out

    @property
    def energy_precision(self) -> dict[str, Precision]:
        out: dict[str, Precision] = {}
        for p in self._precisions:
            out.update(p)
        return out

    def read_power(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for g in self.groups:
            if isinstance(g, PowerReadings):
                out.update(g.read_power())
        return out

    def read_process_activity(self, since: float) -> dict[str, DeviceActivity]:
        """Who ran on each device since ``since`` (:class:`~zeus_core.attribution.ProcessActivityReadings`),
        from the groups that can say."""
        out: dict[str, DeviceActivity] = {}
        for g in self.groups:
            if isinstance(g, ProcessActivityReadings):
                out.update(g.read_process_activity(since))
        return out

    def close(self) -> None:
        errors = []
        for g in reversed(self.groups):
            try:
                g.close()
            except Exception as e:  # noqa: BLE001 - close the others, then report
                errors.append(f"{type(g).__name__}: {e}")
        if errors:
            raise RuntimeError("closing devices failed: " + "; ".join(errors))


def as_device_group(devices: DeviceGroup | Sequence[DeviceGroup]) -> DeviceGroup:
    """One group as it is; a list or tuple of groups as a :class:`DeviceSet`."""
    if isinstance(devices, (list, tuple)):
        return devices[0] if len(devices) == 1 else DeviceSet(devices)
    return cast(DeviceGroup, devices)


# --------------------------------------------------------------------------- synchronisation


class TorchSync:
    """``torch.cuda.synchronize`` on the measured GPUs, free when there is nothing to wait for.

    Torch is never imported here: if the program has not imported it, or has
    not initialised CUDA, no torch kernel can be in flight, so the call costs a
    dictionary look-up. Only the measured GPUs are synchronised (synchronising
    an unused GPU would create a CUDA context on it).
    """

    def __init__(self, indices: Iterable[int] | None = None) -> None:
        self.indices = None if indices is None else list(indices)

    def __call__(self) -> None:
        torch = sys.modules.get("torch")
        if torch is None:
            return
        cuda = torch.cuda
        if not cuda.is_initialized():
            return
        for i in self.indices if self.indices is not None else [cuda.current_device()]:
            cuda.synchronize(i)


class CupySync(TorchSync):
    """``cupy`` device synchronisation on the measured GPUs (only if cupy is imported)."""

    def __call__(self) -> None:
        cupy = sys.modules.get("cupy")
        if cupy is None:
            return
        for i in self.indices if self.indices is not None else [cupy.cuda.Device().id]:
            cupy.cuda.Device(i).synchronize()


class JaxSync(TorchSync):
    """Block until a tiny array put on each measured JAX GPU is ready (JAX has no device sync)."""

    def __call__(self) -> None:
        jax = sys.modules.get("jax")
        if jax is None:
            return
        devices = jax.devices("gpu")
        for i in self.indices if self.indices is not None else range(len(devices)):
            jax.device_put(0.0, device=devices[i]).block_until_ready()


def _no_sync() -> None:
    return None


def make_sync(sync: str | Callable[[], Any] | None, indices: Iterable[int] | None = None) -> Callable[[], Any]:
    """The synchronisation hook: ``"torch"`` (default, also for ``None``), ``"jax"``,
    ``"cupy"``, ``"none"``, or any callable taking no arguments."""
    if callable(sync):
        return sync
    kinds = {"torch": TorchSync, "jax": JaxSync, "cupy": CupySync}
    if sync is None:
        sync = "torch"
    if sync == "none":
        return _no_sync
    if sync not in kinds:
        raise ValueError(f"sync must be one of torch, jax, cupy, none or a callable, got {sync!r}")
    return kinds[sync](indices)


# --------------------------------------------------------------------------- the monitor


class WindowLog:
    """CSV log of every window: ``start_time,window_name,elapsed_time,<device>_energy...,sources``.

    Upstream ``ZeusMonitor`` names GPU columns ``gpu<i>_energy``; this log does
    the same for every device name. ``start_time`` is Unix time. Under a
    scheduler, its context (``context``: :func:`zeus_core.scheduler.context`,
    ``slurm_job_id``, ``k8s_pod``, ...) follows in columns of its own after
    ``sources``. An existing log with the same header is appended to
    (recurrences of one job share a log); one with another header is an error
    rather than a silently mixed file.
    """

    def __init__(self, path: str | os.PathLike[str], names: Sequence[str], context: dict[str, str] | None = None) -> None:
        self.path = Path(path)
        self.names = list(names)
        self.context = dict(context or {})
        self._context_cells = list(self.context.values())
        self.header = ["start_time", "window_name", "elapsed_time", *(f"{n}_energy" for n in names), "sources", *self.context]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existing = None
        if self.path.exists() and self.path.stat().st_size > 0:
            with self.path.open(newline="") as f:
                existing = next(csv.reader(f), None)
            if existing != self.header:
                raise ValueError(
                    f"{self.path}: existing window log has columns {existing}, this monitor writes "
                    f"{self.header}; pass another log file or remove this one"
                )
        self._f = self.path.open("a", newline="")
        self._w = csv.writer(self._f)
        if existing is None:
            self._w.writerow(self.header)
            self._f.flush()

    def write(self, start_wall: float, name: str, m: Measurement) -> None:
        sources = ";".join(f"{n}={m.sources.get(n, '')}" for n in self.names)
        cells = [f"{start_wall:.6f}", name, f"{m.time:.6f}", *(repr(m.energy[n]) for n in self.names), sources]
        self._w.writerow(cells + self._context_cells)
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def _precision_reader(devices: Any) -> Callable[[], dict[str, Precision]]:
    """What reads ``devices``' precisions (none where it declares none)."""
    if isinstance(devices, EnergyPrecision):
        group = devices
        return lambda: group.energy_precision
    return dict


class Monitor:
    """Named measurement windows over one or more device groups.

    ``sync``: ``"torch"`` (default; also ``None``), ``"jax"``, ``"cupy"``,
    ``"none"`` or a callable run before every timestamp. ``on_measurement(name,
    measurement)`` is called when a window ends (not when it is cancelled).
    ``log_file`` appends one CSV row per window. ``approx_instant_energy``
    replaces a counter's exact 0 J over a short window (shorter than the
    counter's update period) with instant power x time, marked ``estimate``.
    ``scheduler`` is the scheduler's context the monitor runs in (read once,
    when it is made: :func:`zeus_core.scheduler.context`), written with every
    window of the log. Each window carries per device its scope and a +/- bound
    in joules (:attr:`Measurement.errors`) from the device's
    :class:`~zeus_core.device.Precision` (NaN where the device says none).
    ``target_error`` is the bound asked of a window, as a fraction of its energy
    (default 1 %): a window whose bound is larger warns, once per device for each
    monitor, naming the shortest window that meets it (None: never warn).
    ``attribute``: attach to each window's measurement the
    split of each device's energy among the processes on it
    (:mod:`zeus_core.attribution`, an estimate), where the devices can say who
    ran on them (:class:`~zeus_core.attribution.ProcessActivityReadings`); on
    by default there, the device's process queries (NVML: two per GPU) at the
    end of each window of at least ``attribute_min_s`` seconds. A shorter window carries none: the
    drivers sample per-process activity every 1/6 s to 1 s (NVML), so a window
    of a few milliseconds almost never holds a sample and its split would be a
    guess, while the query would cost more than the rest of the window's end.
    The default, 0.1 s, spares per-step windows; 0 attributes every window.
    Not thread-safe: use one monitor per thread.
    """

    def __init__(
        self,
        devices: DeviceGroup | Sequence[DeviceGroup],
        sync: str | Callable[[], Any] | None = None,
        on_measurement: Callable[[str, Measurement], Any] | None = None,
        log_file: str | os.PathLike[str] | None = None,
        approx_instant_energy: bool = False,
        attribute: bool = True,
        target_error: float | None = 0.01,
        attribute_min_s: float = 0.1,
    ) -> None:
        if target_error is not None and not target_error > 0:
            raise ValueError(f"target_error must be a positive fraction of a window's energy (0.01 for 1 %) or None, got {target_error!r}")
        if not (isinstance(attribute_min_s, (int, float)) and 0 <= attribute_min_s < math.inf):
            raise ValueError(f"attribute_min_s must be a duration in seconds, 0 or more (0: every window), got {attribute_min_s!r}")
        self.attribute_min_s = float(attribute_min_s)
        self.devices = as_device_group(devices)
        self.target_error = target_error
        self._warned: set[str] = set()  # devices already warned of a window too short for target_error
        self._sync = make_sync(sync, self.devices.sync_indices if isinstance(self.devices, GpuSync) else None)
        # Capability checks once here, not per window (end_window is the per-step hot path).
        self._read_power = self.devices.read_power if isinstance(self.devices, PowerReadings) else None
        self._on_measurement = on_measurement
        self.approx_instant_energy = approx_instant_energy
        self._names = list(self.devices.names)
        self._sources = dict(self.devices.energy_sources)
        self._scopes = {n: default_scope(n) for n in self._names}
        # a runtime protocol check costs tens of microseconds: made once (the precisions themselves are read
        # at each window's end, since a device's may change, as a counter confirmed after the open)
        self._precision = _precision_reader(self.devices)
        precision = self._precision()
        self._scopes.update({n: p.scope for n, p in precision.items() if n in self._scopes})
        # name -> (clock at begin, Unix time at begin or 0.0 without a log, energy at begin)
        self._open: dict[str, tuple[float, float, dict[str, float]]] = {}
        self.scheduler = scheduler_context()
        self._log = WindowLog(log_file, self._names, self.scheduler) if log_file is not None else None
        self._read_activity = self._activity_reader() if attribute else None

    # -- windows --

    @property
    def open_windows(self) -> list[str]:
        return list(self._open)

    @property
    def sync(self) -> Callable[[], Any]:
        """What runs before each timestamp (the ``sync`` given: ``sync_execution_with`` of ``ZeusMonitor``)."""
        return self._sync

    def begin_window(self, name: str, sync_execution: bool = True, restart: bool = False) -> None:
        """Open window ``name``; ``restart=True`` replaces an open window of that name."""
        if name in self._open and not restart:
            raise ValueError(f"Measurement window {name!r} already exists; end it first or pass restart=True")
        if sync_execution:
            self._sync()
        wall = time.time() if self._log is not None or self._read_activity is not None else 0.0
        t = self.devices.clock()
        self._open[name] = (t, wall, self.devices.read_energy())

    def end_window(self, name: str, sync_execution: bool = True, cancel: bool = False) -> Measurement:
        """Close window ``name`` and return what it measured; ``cancel=True`` drops it
        (a zero measurement, nothing logged, no ``on_measurement``)."""
        try:
            t0, wall0, e0 = self._open.pop(name)
        except KeyError:
            opened = ", ".join(repr(n) for n in self._open) or "none"
            raise ValueError(f"Measurement window {name!r} does not exist (open windows: {opened})") from None
        sources = dict(self._sources)
        if cancel:
            return Measurement(0.0, dict.fromkeys(self._names, 0.0), sources)
        power = self._instant_power() if self.approx_instant_energy else None
        if sync_execution:
            self._sync()
        devices = self.devices
        t1 = devices.clock()
        e1 = devices.read_energy()
        elapsed = t1 - t0
        energy = {}
        for k in self._names:  # a loop, not a comprehension: this is the per-step hot path
            energy[k] = e1[k] - e0[k]
        zero = None
        if 0.0 in energy.values():
            zero = [k for k, v in energy.items() if v == 0.0 and sources.get(k) == "counter" and elapsed > 0]
        if zero:
            if power is not None:
                for k in zero:
                    if k in power:
                        energy[k] = power[k] * elapsed
                        sources[k] = "estimate"
            else:
                # No duration in the text: a window repeated every step warns once, not every step.
                warnings.warn(
                    f"window {name!r} measured exactly 0 J on {', '.join(zero)}: it was shorter than the "
                    "energy counter's update period; make the window longer or pass approx_instant_energy=True",
                    stacklevel=2,
                )
        attribution: dict[str, Attribution] = {}
        if self._read_activity is not None and elapsed >= self.attribute_min_s:
            attribution = self._attribution(energy, elapsed, wall0)
        errors = self._errors(name, elapsed, energy, sources)
        m = Measurement(elapsed, energy, sources, scopes=dict(self._scopes), errors=errors, attribution=attribution)
        if self._log is not None:
            self._log.write(wall0, name, m)
        if self._on_measurement is not None:
            self._on_measurement(name, m)
        return m

    def _errors(self, window: str, elapsed: float, energy: dict[str, float], sources: dict[str, str]) -> dict[str, float]:
        """The +/- bound (J) of each device's energy over a window (NaN: the device says none), and
        the warning for a window too short for :attr:`target_error`."""
        precision = self._precision()
        errors = {}
        for k in self._names:
            p = precision.get(k)
            if p is None:
                errors[k] = math.nan
            elif sources.get(k) == "estimate" and p.method != "estimate":  # a short window's instant power x time
                errors[k] = p.max_w * elapsed
            else:
                errors[k] = p.bound_j(elapsed, energy[k])
        target = self.target_error
        if target is not None and elapsed > 0 and len(self._warned) < len(errors):  # each device warns once
            for k, err in errors.items():
                joules = energy[k]
                if k in self._warned or not err > target * abs(joules) or not joules > 0:
                    continue
                self._warned.add(k)
                p = precision[k]
                shortest = p.min_window_s(target, joules / elapsed)
                need = f"windows of at least {shortest:.3g} s meet it" if math.isfinite(shortest) else "no window length meets it"
                warnings.warn(
                    f"window {window!r} on {k}: its energy {format_joules(joules)} is known to +/- {format_joules(err)} "
                    f"({err / joules:.1%}), more than the {target:.1%} asked (target_error); at its draw "
                    f"({joules / elapsed:.0f} W, {p.method}) {need}",
                    stacklevel=3,
                )
        return errors

    def reset_windows(self) -> None:
        """Drop every open window."""
        self._open.clear()

    def _attribution(self, energy: dict[str, float], elapsed: float, since: float) -> dict[str, Attribution]:
        """Each device's energy split among its processes; a device that fails to say who ran on it
        warns once and attribution stops, never the window (an estimate is not worth a lost measurement)."""
        assert self._read_activity is not None
        try:
            return attribute_all(energy, elapsed, self._read_activity(since), os.getpid())  # this process measured it
        except Exception as e:  # noqa: BLE001 - a third party's device: whatever it raises
            warnings.warn(f"energy attribution is off for this monitor: the devices cannot say who ran on them ({e})", stacklevel=3)
            self._read_activity = None
            return {}

    def _activity_reader(self) -> Callable[[float], dict[str, DeviceActivity]] | None:
        devices = self.devices
        if isinstance(devices, DeviceSet) and not any(isinstance(g, ProcessActivityReadings) for g in devices.groups):
            return None
        return devices.read_process_activity if isinstance(devices, ProcessActivityReadings) else None

    def _instant_power(self) -> dict[str, float] | None:
        return self._read_power() if self._read_power is not None else None

    # -- scopes --

    def window(self, name: str, sync_execution: bool = True) -> Window:
        """A window as a context manager or a decorator.

        ``with monitor.window("step") as w: ...`` then ``w.measurement``; an
        exception inside cancels the window. As a decorator each call of the
        function is one window (``w.measurement`` holds the latest).
        """
        return Window(self, name, sync_execution)

    def measure(self, name: str | None = None, sync_execution: bool = True) -> Callable:
        """Decorator: each call of the function is a window named ``name`` (default: its qualified name)."""

        def wrap(fn: Callable) -> Callable:
            return Window(self, name or fn.__qualname__, sync_execution)(fn)

        return wrap

    # -- lifetime --

    def close(self) -> None:
        """Close the log file. The devices belong to the caller."""
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Window(contextlib.ContextDecorator):
    """One named window used as ``with`` block or decorator (see :meth:`Monitor.window`)."""

    def __init__(self, monitor: Monitor, name: str, sync_execution: bool = True) -> None:
        self.monitor = monitor
        self.name = name
        self.sync_execution = sync_execution
        self.measurement: Measurement | None = None

    def __enter__(self) -> Window:
        self.monitor.begin_window(self.name, self.sync_execution)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc_type is not None:
            self.monitor.end_window(self.name, cancel=True)
            return None
        self.measurement = self.monitor.end_window(self.name, self.sync_execution)
        return None


__all__ = ["DeviceSet", "Monitor", "Window", "WindowLog", "as_device_group", "make_sync"]

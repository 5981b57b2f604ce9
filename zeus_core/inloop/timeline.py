"""Power and temperature over time: upstream Zeus's ``PowerMonitor`` and ``TemperatureMonitor`` over zeus's device plugins.

A monitor samples its devices in a background thread and keeps what it read
as timelines, which a script queries after the fact::

    from zeus_core.inloop.timeline import PowerMonitor

    with PowerMonitor(gpu_indices=[0]) as pm:      # GPUs chosen as ZeusMonitor chooses them
        t0 = time.time()
        train_one_epoch()
        t1 = time.time()
        joules = pm.get_energy(t0, t1)[0]           # upstream's methods, keyed by GPU index
        watts = pm.get_power_timeline("instant", 0, t0, t1)[0]   # [(time, W), ...]

Any device plugin that reads power or temperatures can be monitored, through
its capabilities (the core names no plugin): ``device="jetson"`` (with
``options=``) opens a plugin by name, ``device=group`` samples a group the
caller opened (``ZeusMonitor(...).devices``), which it does not close. The
methods keyed by GPU index cover the devices named ``gpu<i>``; the ones keyed
by device name (:meth:`PowerMonitor.timeline`, :meth:`PowerMonitor.energy`,
:meth:`PowerMonitor.power`, :meth:`TemperatureMonitor.timeline`,
:meth:`TemperatureMonitor.temperature`) cover every device, a Jetson's rails too.

Power domains are the device's own (:class:`~zeus_core.device.PowerDomainReadings`):
``instant``, ``average``, ``memory``; upstream's names (``device_instant``,
``device_average``, ``memory_average``) are accepted for them. A device that reads
one power only (:class:`~zeus_core.device.PowerReadings`: a Jetson rail) has the
domain ``power``. Energy integrates a device's ``instant`` power, else its
``average``, else ``power``, by the trapezoid rule; the last power is held from
the last sample until "now" while the monitor runs.

Timestamps are ``time.time()`` seconds (as upstream's): a query's ``start``
and ``end`` are what a script took with ``time.time()``.

Memory is bounded: a timeline keeps at most ``max_samples`` points
(:data:`DEFAULT_MAX_SAMPLES` = 100,000 by default, 24 bytes each: 2.4 MB per
device and domain; a run of equal readings is kept as its first and last
point, so a steady device stays within a few points for hours); when full,
the oldest point goes, and a query that reaches into what was dropped is an
error that says so rather than a wrong number. Where upstream differs: it
polls in spawned processes (one per domain, re-importing the user's
``__main__``) and keeps every sample unless told otherwise; here one thread
(a driver call releases the GIL), bounded by default, stopped on :meth:`stop`,
at ``with``'s end, when the monitor is collected, or at exit.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

import numpy as np
from rich.console import Console

from zeus_core.device import PowerDomainReadings, PowerReadings, TemperatureReadings
from zeus_core.devicekit import Sampler
from zeus_core.engine.assembly import DeviceOpenError
from zeus_core.errors import DeviceError
from zeus_core.inloop.monitor import check_indices, open_gpus, open_named

#: a timeline's points, at most, unless ``max_samples_per_gpu`` says otherwise
DEFAULT_MAX_SAMPLES = 100_000

#: upstream Zeus's power domain names, and the device's domain each stands for
UPSTREAM_DOMAINS = {"device_instant": "instant", "device_average": "average", "memory_average": "memory"}

#: the domain energy integrates, the first a device reads
ENERGY_DOMAINS = ("instant", "average", "power")

_GPU_PREFIX = "gpu"


class Timeline:
    """One quantity of one device over time: ``(t, value)`` points in a ring of at most ``capacity``,
    with the trapezoid integral up to each point.

    A run of equal values keeps its first and its last point only (the last moves
    forward as the run goes on), which loses nothing: between them the value is
    constant. When the ring is full the oldest point is dropped (:attr:`dropped`
    counts them); no answer is made from what was dropped.
    """

    def __init__(self, capacity: int = DEFAULT_MAX_SAMPLES) -> None:
        if capacity < 2:
            raise ValueError(f"a timeline keeps at least 2 points, got max_samples={capacity}")
        self.capacity = capacity
        self._t = np.empty(capacity)
        self._v = np.empty(capacity)
        self._e = np.empty(capacity)
        self._head = 0
        self._n = 0
        #: points dropped from the front to keep within ``capacity``
        self.dropped = 0

    def __len__(self) -> int:
        return self._n

    def _at(self, i: int) -> int:
        return (self._head + i) % self.capacity

    def add(self, t: float, value: float) -> None:
        """A reading ``value`` at time ``t`` (not before the last one)."""
        n = self._n
        if n:
            last = self._at(n - 1)
            if t < self._t[last]:
                raise ValueError(f"a timeline's readings come in time order: {t} is before {self._t[last]}")
            if n >= 2 and value == self._v[last] and value == self._v[prev := self._at(n - 2)]:
                self._t[last] = t  # the run goes on: its last point moves
                self._e[last] = self._e[prev] + value * (t - self._t[prev])
                return
            e = self._e[last] + (self._v[last] + value) * 0.5 * (t - self._t[last])
        else:
            e = 0.0
        if n == self.capacity:
            self._head = self._at(1)
            self._n = n = n - 1
            self.dropped += 1
        i = self._at(n)
        self._t[i], self._v[i], self._e[i] = t, value, e
        self._n = n + 1

    def _ordered(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        idx = (self._head + np.arange(self._n)) % self.capacity
        return self._t[idx], self._v[idx], self._e[idx]

    @property
    def first_t(self) -> float | None:
        return float(self._t[self._head]) if self._n else None

    @property
    def last_t(self) -> float | None:
        return float(self._t[self._at(self._n - 1)]) if self._n else None

    def points(self, start: float | None = None, end: float | None = None) -> list[tuple[float, float]]:
        """The points with ``start <= t <= end`` (either bound None: open), oldest first."""
        t, v, _ = self._ordered()
        keep = np.ones(len(t), dtype=bool)
        if start is not None:
            keep &= t >= start
        if end is not None:
            keep &= t <= end
        return [(float(a), float(b)) for a, b in zip(t[keep], v[keep])]

    def nearest(self, at: float | None = None) -> float | None:
        """The value of the point nearest to time ``at`` (None: the latest); None without points."""
        if not self._n:
            return None
        if at is None:
            return float(self._v[self._at(self._n - 1)])
        t, v, _ = self._ordered()
        i = int(np.searchsorted(t, at))
        if i == 0:
            return float(v[0])
        if i == len(t):
            return float(v[-1])
        return float(v[i - 1] if at - t[i - 1] <= t[i] - at else v[i])

    def _integral_to(self, t: np.ndarray, v: np.ndarray, e: np.ndarray, x: float) -> float:
        if x >= t[-1]:
            return float(e[-1] + v[-1] * (x - t[-1]))
        i = int(np.searchsorted(t, x, side="right")) - 1
        span = t[i + 1] - t[i]
        vx = v[i] + (v[i + 1] - v[i]) * (x - t[i]) / span if span > 0 else v[i]
        return float(e[i] + (v[i] + vx) * 0.5 * (x - t[i]))

    def integral(self, start: float, end: float, held_until: float) -> float | None:
        """The integral (value x seconds: joules for watts) from ``start`` to ``end``: linear between
        points, the last value held until ``held_until``; what lies before the first reading, or after
        ``held_until``, counts nothing. None without points; a ``ValueError`` where ``start`` reaches
        into dropped points."""
        if end < start:
            raise ValueError(f"the end of an interval ({end}) is before its start ({start})")
        if not self._n:
            return None
        t, v, e = self._ordered()
        if self.dropped and start < t[0]:
            raise ValueError(
                f"the readings before {t[0]:.3f} were dropped to keep within max_samples ({self.capacity} points); "
                "ask about a later interval, or give the monitor a larger max_samples_per_gpu"
            )
        a, b = max(start, float(t[0])), min(end, held_until)
        if b <= a:
            return 0.0
        return self._integral_to(t, v, e, b) - self._integral_to(t, v, e, a)


def _gpu_index(name: str) -> int | None:
    rest = name[len(_GPU_PREFIX) :] if name.startswith(_GPU_PREFIX) else ""
    return int(rest) if rest.isdigit() else None


class _Sampling:
    """What the power and temperature monitors share: their devices, the thread, the timelines."""

    #: what the monitor reads, for messages
    what = "readings"

    def __init__(
        self,
        gpu_indices: list[int] | None,
        update_period: float,
        max_samples: int | None,
        device: Any,
        options: dict[str, Any] | None,
        registry: Any,
    ) -> None:
        from zeus_core.engine.registry import get_registry

        if gpu_indices is not None and not gpu_indices:
            raise ValueError("gpu_indices must be None (every GPU) or name at least one GPU")
        gpus = check_indices(gpu_indices, "gpu_indices")
        if not isinstance(update_period, (int, float)) or isinstance(update_period, bool) or not update_period > 0:
            raise ValueError(f"update_period must be a positive number of seconds, got {update_period!r}")
        capacity = DEFAULT_MAX_SAMPLES if max_samples is None else max_samples
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 2:
            raise ValueError(f"max_samples_per_gpu must be an integer of at least 2 (None: {DEFAULT_MAX_SAMPLES}), got {max_samples!r}")
        if options is not None and not isinstance(device, str):
            raise ValueError('options= configures the plugin named by device=; pass device="<plugin>" too')
        self.update_period = float(update_period)
        self.max_samples = capacity
        self._lock = threading.Lock()
        self._owned: list[Any] = []
        console = Console(stderr=True)
        self.plugin: str | None
        if device is None or isinstance(device, str):
            reg = registry if registry is not None else get_registry()
            if device is None:
                choice = open_gpus(reg, gpus, console)
                if choice.opened is None:
                    raise DeviceOpenError(
                        f"no GPU could be opened ({choice.why() or 'no installed device plugin measures GPUs'}); "
                        "name another device plugin with device="
                    )
                opened = choice.opened
            else:
                opened = open_named(reg, device, dict(options or {}), console, gpus)
            self.plugin, group = opened[0], opened[2]
            self._owned.append(group)
            names = list(group.names)
        else:
            self.plugin, group = None, device
            names = list(group.names)
            if gpus is not None:
                missing = [f"gpu{i}" for i in gpus if f"gpu{i}" not in names]
                if missing:
                    raise DeviceError(f"the device group has no {', '.join(missing)}; it has {', '.join(names)}")
                names = [f"gpu{i}" for i in gpus]
        self.devices = group
        try:
            self._check(group)
            now = time.time()
            first = self._read()
            #: the device names monitored, and the quantities of each (power domains; "temperature")
            self.quantities: dict[str, list[str]] = {n: list(first[n]) for n in names if first.get(n)}
            if not self.quantities:
                raise DeviceError(f"{self._label()} gives no {self.what} for {', '.join(names)}")
            self.names = list(self.quantities)
            self._timelines = {(n, q): Timeline(capacity) for n, qs in self.quantities.items() for q in qs}
            self._store(now, first)
            self._until: float | None = None
            self._sampler = Sampler(self.update_period, _weak_tick(weakref.ref(self)), f"zeus-{type(self).__name__.lower()}")
        except BaseException:
            for g in self._owned:
                g.close()
            raise
        self._finalizer = weakref.finalize(self, _shut_down, self._sampler, list(self._owned))

    # -- what subclasses define --

    def _check(self, group: Any) -> None:
        raise NotImplementedError

    def _read(self) -> dict[str, dict[str, float]]:
        """One reading of every monitored quantity: ``{device: {quantity: value}}``."""
        raise NotImplementedError

    # -- sampling --

    def _label(self) -> str:
        return f"device plugin {self.plugin!r}" if self.plugin else f"device group {type(self.devices).__name__}"

    def _store(self, t: float, got: dict[str, dict[str, float]]) -> None:
        with self._lock:
            for (name, q), timeline in self._timelines.items():
                value = got.get(name, {}).get(q)
                last = timeline.last_t
                if value is not None and (last is None or t >= last):  # the wall clock set back: that reading is left out
                    timeline.add(t, float(value))

    def _tick(self) -> None:
        t = time.time()
        self._store(t, self._read())

    @property
    def gpu_indices(self) -> list[int]:
        """The monitored GPUs' indices (devices named ``gpu<i>``), as upstream's attribute."""
        return [i for n in self.names if (i := _gpu_index(n)) is not None]

    @property
    def last_error(self) -> Exception | None:
        """What the last background reading failed with (None after one that did not fail)."""
        return self._sampler.error

    @property
    def running(self) -> bool:
        return self._until is None

    def stop(self) -> None:
        """Stop sampling (one last reading first) and close the devices this monitor opened. The
        timelines stay, for queries; a second call does nothing."""
        if self._until is not None:
            return
        self._sampler.stop()
        try:
            self._tick()
        except Exception:  # noqa: BLE001 - the thread's last reading stands
            pass
        with self._lock:
            ends = [tl.last_t for tl in self._timelines.values() if tl.last_t is not None]
            self._until = max(ends) if ends else time.time()
        self._finalizer()

    def close(self) -> None:
        self.stop()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- queries --

    def _timeline(self, name: str, quantity: str) -> Timeline:
        if name not in self.quantities:
            raise ValueError(f"no monitored device named {name!r}; this monitor has {', '.join(self.names)}")
        got = self._timelines.get((name, quantity))
        if got is None:
            raise ValueError(f"{name} gives no {quantity!r}; it gives {', '.join(self.quantities[name])}")
        return got

    def _held_until(self) -> float:
        return self._until if self._until is not None else time.time()

    def _gpus(self, gpu_index: int | None) -> list[tuple[int, str]]:
        """(index, name) of the GPUs a GPU-keyed query covers."""
        gpus = [(i, n) for n in self.names if (i := _gpu_index(n)) is not None]
        if not gpus:
            raise ValueError(f"this monitor has no GPU (devices named gpu<i>); its devices are {', '.join(self.names)}: query them by name")
        if gpu_index is None:
            return gpus
        chosen = [(i, n) for i, n in gpus if i == gpu_index]
        if not chosen:
            raise ValueError(f"GPU {gpu_index} is not monitored; monitored: {', '.join(str(i) for i, _ in gpus)}")
        return chosen


def _weak_tick(ref: weakref.ref) -> Any:
    """The sampler thread's call: a reading of the monitor, if it still exists. The thread holds no
    reference to the monitor, so a monitor nobody holds is collected (and its finalizer stops the thread)."""

    def tick() -> None:
        monitor = ref()
        if monitor is not None:
            monitor._tick()

    return tick


def _shut_down(sampler: Sampler, owned: list[Any]) -> None:
    """Stop the thread, then close the devices the monitor opened (also when it is collected, or at exit)."""
    sampler.stop()
    for g in reversed(owned):
        try:
            g.close()
        except Exception:  # noqa: BLE001 - an exit path must not raise; the device's own journal restores
            pass


def _domain(value: Any) -> str:
    """A power domain name, ours or upstream's (an upstream ``PowerDomain`` member gives its ``value``)."""
    name = getattr(value, "value", value)
    if not isinstance(name, str):
        raise ValueError(f"a power domain is a name such as 'instant', got {value!r}")
    return UPSTREAM_DOMAINS.get(name, name)


class PowerMonitor(_Sampling):
    """Power of every monitored device, sampled in the background, as timelines per power domain.

    ``gpu_indices``: the GPUs (None: every GPU of the plugin ``ZeusMonitor`` would
    choose; ``[]`` is refused, as upstream). ``update_period``: seconds between
    samples (None: 0.1 s; upstream infers it from the GPU's counter, and never
    polls slower than 0.1 s). ``max_samples_per_gpu``: points kept per device and
    domain (None: :data:`DEFAULT_MAX_SAMPLES`). ``power_domains``: the domains to
    keep (None: every one the devices read); a domain no device reads is an
    error naming those it reads. ``device``, ``options``, ``registry``: as
    :class:`~zeus_core.ZeusMonitor`'s, and ``device`` may also be an open device
    group, which the monitor samples but does not close.
    """

    what = "power readings"

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        update_period: float | None = None,
        max_samples_per_gpu: int | None = None,
        power_domains: list[Any] | None = None,
        *,
        device: Any = None,
        options: dict[str, Any] | None = None,
        registry: Any = None,
    ) -> None:
        if power_domains is not None and (isinstance(power_domains, (str, bytes)) or not list(power_domains)):
            raise ValueError("power_domains must be None (every domain the devices read) or a non-empty list of domains")
        self._wanted = None if power_domains is None else [_domain(d) for d in power_domains]
        super().__init__(gpu_indices, 0.1 if update_period is None else update_period, max_samples_per_gpu, device, options, registry)

    def _check(self, group: Any) -> None:
        if not isinstance(group, (PowerDomainReadings, PowerReadings)):
            raise DeviceError(
                f"{self._label()} cannot give power over time: it reads no power (neither PowerDomainReadings "
                "nor PowerReadings); its energy is measured by ZeusMonitor's windows"
            )
        self._domains = isinstance(group, PowerDomainReadings)
        if self._wanted is not None:  # every domain asked for must be one the devices read
            if isinstance(group, PowerDomainReadings):
                every = group.read_power_domains()
            else:
                every = {n: {"power": w} for n, w in group.read_power().items()}
            read = sorted({d for domains in every.values() for d in domains}, key=_domain_order)
            missing = [d for d in self._wanted if d not in read]
            if missing:
                raise ValueError(f"power domain {', '.join(missing)} is not read by {self._label()}; it reads {', '.join(read) or 'none'}")

    def _read(self) -> dict[str, dict[str, float]]:
        g = self.devices
        got = g.read_power_domains() if self._domains else {n: {"power": w} for n, w in g.read_power().items()}
        if self._wanted is not None:
            got = {n: {d: w for d, w in domains.items() if d in self._wanted} for n, domains in got.items()}
        return got

    @property
    def measurement_domains(self) -> list[str]:
        """Every domain some monitored device reads (upstream's attribute)."""
        return sorted({d for qs in self.quantities.values() for d in qs}, key=_domain_order)

    def _energy_domain(self, name: str, domain: Any) -> str:
        if name not in self.quantities:
            raise ValueError(f"no monitored device named {name!r}; this monitor has {', '.join(self.names)}")
        if domain is not None:
            return _domain(domain)
        for d in ENERGY_DOMAINS:
            if d in self.quantities[name]:
                return d
        raise ValueError(
            f"{name} reads only {', '.join(self.quantities[name])}, not the device's whole power; name the domain to integrate"
        )

    # -- by device name --

    def timeline(self, name: str, domain: Any = None, start: float | None = None, end: float | None = None) -> list[tuple[float, float]]:
        """``[(time, W), ...]`` of device ``name`` in ``domain`` (None: the one energy integrates),
        between ``start`` and ``end`` (``time.time()`` seconds; None: open)."""
        d = self._energy_domain(name, domain)
        with self._lock:
            return self._timeline(name, d).points(start, end)

    def energy(self, start: float, end: float, domain: Any = None) -> dict[str, float]:
        """Joules of every monitored device from ``start`` to ``end`` (``time.time()`` seconds): its power
        in ``domain`` (None: instant, else average, else its one power) integrated by the trapezoid rule."""
        out = {}
        held = self._held_until()
        with self._lock:
            for name in self.names:
                got = self._timeline(name, self._energy_domain(name, domain)).integral(start, end, held)
                if got is not None:
                    out[name] = got
        return out

    def power(self, at: float | None = None, domain: Any = None) -> dict[str, float]:
        """Watts of every monitored device at the reading nearest to ``at`` (None: the latest)."""
        with self._lock:
            return {n: v for n in self.names if (v := self._timeline(n, self._energy_domain(n, domain)).nearest(at)) is not None}

    # -- upstream's, by GPU index --

    def get_power_timeline(
        self, power_domain: Any, gpu_index: int | None = None, start_time: float | None = None, end_time: float | None = None
    ) -> dict[int, list[tuple[float, float]]]:
        """``{gpu index: [(time, W), ...]}`` in ``power_domain``, between the two times (None: open)."""
        d = _domain(power_domain)
        if d not in self.measurement_domains:
            raise ValueError(f"power domain {d} is not being monitored; monitored domains: {self.measurement_domains}")
        with self._lock:
            return {i: self._timelines[(n, d)].points(start_time, end_time) for i, n in self._gpus(gpu_index) if (n, d) in self._timelines}

    def get_all_power_timelines(
        self, gpu_index: int | None = None, start_time: float | None = None, end_time: float | None = None
    ) -> dict[str, dict[int, list[tuple[float, float]]]]:
        """``{domain: {gpu index: [(time, W), ...]}}`` for every monitored domain."""
        return {d: self.get_power_timeline(d, gpu_index, start_time, end_time) for d in self.measurement_domains}

    def get_energy(self, start_time: float, end_time: float) -> dict[int, float] | None:
        """``{gpu index: J}`` from ``start_time`` to ``end_time``; None before any reading."""
        gpus = self._gpus(None)
        energy = self.energy(start_time, end_time)
        got = {i: energy[n] for i, n in gpus if n in energy}
        return got or None

    def get_power(self, time: float | None = None, power_domain: Any = None) -> dict[int, float] | None:
        """``{gpu index: W}`` at the reading nearest to ``time`` (None: the latest); None where a GPU has none."""
        gpus = self._gpus(None)
        watts = self.power(time, power_domain)
        return {i: watts[n] for i, n in gpus} if all(n in watts for _, n in gpus) else None


def _domain_order(d: str) -> tuple[int, str]:
    order = ("instant", "average", "memory", "power")
    return (order.index(d) if d in order else len(order), d)


class TemperatureMonitor(_Sampling):
    """Temperature (°C) of every monitored device that has a sensor, sampled in the background.

    ``gpu_indices``, ``max_samples_per_gpu``, ``device``, ``options``, ``registry``: as
    :class:`PowerMonitor`'s. ``update_period``: seconds between samples (1 s, as
    upstream: temperatures change slowly). Temperatures are floats (°C as the
    vendor gives them; upstream rounds NVIDIA's to integers, which NVML gives anyway).
    """

    what = "temperatures"

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        update_period: float = 1.0,
        max_samples_per_gpu: int | None = None,
        *,
        device: Any = None,
        options: dict[str, Any] | None = None,
        registry: Any = None,
    ) -> None:
        super().__init__(gpu_indices, update_period, max_samples_per_gpu, device, options, registry)

    def _check(self, group: Any) -> None:
        if not isinstance(group, TemperatureReadings):
            raise DeviceError(f"{self._label()} cannot give temperatures: it has no sensor zeus reads (no TemperatureReadings)")

    def _read(self) -> dict[str, dict[str, float]]:
        return {n: {"temperature": c} for n, c in self.devices.read_temperatures().items()}

    # -- by device name --

    def timeline(self, name: str, start: float | None = None, end: float | None = None) -> list[tuple[float, float]]:
        """``[(time, °C), ...]`` of device ``name`` between ``start`` and ``end`` (None: open)."""
        with self._lock:
            return self._timeline(name, "temperature").points(start, end)

    def temperature(self, at: float | None = None) -> dict[str, float]:
        """°C of every monitored device at the reading nearest to ``at`` (None: the latest)."""
        with self._lock:
            return {n: v for n in self.names if (v := self._timelines[(n, "temperature")].nearest(at)) is not None}

    # -- upstream's, by GPU index --

    def get_temperature_timeline(
        self, gpu_index: int | None = None, start_time: float | None = None, end_time: float | None = None
    ) -> dict[int, list[tuple[float, float]]]:
        """``{gpu index: [(time, °C), ...]}`` between the two times (None: open)."""
        with self._lock:
            return {i: self._timelines[(n, "temperature")].points(start_time, end_time) for i, n in self._gpus(gpu_index)}

    def get_temperature(self, time: float | None = None) -> dict[int, float] | None:
        """``{gpu index: °C}`` at the reading nearest to ``time`` (None: the latest); None where a GPU has none."""
        gpus = self._gpus(None)
        got = self.temperature(time)
        return {i: got[n] for i, n in gpus} if all(n in got for _, n in gpus) else None


__all__ = ["DEFAULT_MAX_SAMPLES", "PowerMonitor", "TemperatureMonitor", "Timeline", "UPSTREAM_DOMAINS"]

"""Emissions and energy cost of measurement windows in a script: :class:`CarbonEmissionMonitor`
and :class:`EnergyCostMonitor` (upstream Zeus's names), on zeus's devices and grid signals.

Two lines give a script grams of CO2-equivalent next to its joules::

    from zeus_core.inloop.carbon import CarbonEmissionMonitor
    monitor = CarbonEmissionMonitor(gpu_indices=[0], carbon_intensity="electricitymaps:DE")

    monitor.begin_window("training")
    ...
    m = monitor.end_window("training")
    print(m.time, m.total_energy, m.carbon_g, m.gpu_carbon_emission[0])

The signal is any ``[grid]`` value (a number, a CSV file, a live source; more ``[grid]``
keys such as ``timezone`` go in ``grid=``). Each window's energy is charged against the
signal over time (:mod:`zeus_core.grid`): at every step of the signal (every hour of a
live source, every row of a CSV) a background thread reads the devices' energy counters,
so the energy of each step is charged at that step's value, device by device, and a
window that runs from a dirty night into a clean morning pays each hour at its price.
Without those readings (``poll=False``) a window's energy is spread evenly over its time.

Upstream's monitors poll in a separate process and fetch the intensity themselves; here
the thread only reads counters (the devices are the monitor's own, and must allow reads
from a second thread, as NVML and RAPL do) and the signals are the registered sources,
with their cache and their fallback when a service is down.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import attrs

from zeus_core.grid import CARBON, JOULES_PER_KWH, PRICE, Grid, GridMeter, weighted_mean
from zeus_core.inloop.monitor import ZeusMonitor
from zeus_core.inloop.script import registry_or_default, script_grid
from zeus_core.measurement import Measurement
from zeus_core.windows import Monitor

#: The longest the reading thread sleeps (it wakes early when the monitor closes).
MAX_SLEEP_S = 3600.0


@attrs.frozen
class CarbonEmissionMeasurement:
    """What one window measured and emitted (upstream's ``CarbonEmissionMeasurement``, plus totals).

    ``gpu_energy``/``cpu_energy``/``dram_energy`` (J) and ``gpu_carbon_emission``/
    ``cpu_carbon_emission``/``dram_carbon_emission`` (gCO2eq) are keyed as
    :class:`~zeus_core.Measurement`'s; ``carbon_g`` is the window's emissions over every
    device measured, ``energy_j`` their energy, ``carbon_intensity_g_per_kwh`` the mean
    intensity they were charged at (so ``carbon_g = energy_j * intensity / 3.6e6``).
    """

    time: float
    gpu_energy: dict[int, float]
    gpu_carbon_emission: dict[int, float]
    cpu_energy: dict[int, float] | None = None
    cpu_carbon_emission: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    dram_carbon_emission: dict[int, float] | None = None
    energy_j: float = 0.0
    carbon_g: float = 0.0
    carbon_intensity_g_per_kwh: float = math.nan
    measurement: Measurement | None = attrs.field(default=None, repr=False)

    @property
    def total_energy(self) -> float:
        """Joules over the GPUs (upstream's ``total_energy``)."""
        return float(sum(self.gpu_energy.values()))


@attrs.frozen
class EnergyCostMeasurement:
    """What one window measured and cost (upstream's ``EnergyCostMeasurement``, plus totals): as
    :class:`CarbonEmissionMeasurement` with ``*_energy_cost`` in ``currency`` per device, ``cost``
    over every device and ``price_per_kwh`` the mean price they were charged at."""

    time: float
    gpu_energy: dict[int, float]
    gpu_energy_cost: dict[int, float]
    cpu_energy: dict[int, float] | None = None
    cpu_energy_cost: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    dram_energy_cost: dict[int, float] | None = None
    energy_j: float = 0.0
    cost: float = 0.0
    currency: str = ""
    price_per_kwh: float = math.nan
    measurement: Measurement | None = attrs.field(default=None, repr=False)

    @property
    def total_energy(self) -> float:
        return float(sum(self.gpu_energy.values()))


class _GridWindows:
    """Windows of a :class:`~zeus_core.windows.Monitor` charged against one grid signal, device by device."""

    quantity = CARBON

    def __init__(
        self,
        monitor: Monitor | None,
        grid: dict[str, Any],
        gpu_indices: Any,
        cpu_indices: Any,
        sync_execution_with: Any,
        poll: bool,
        registry: Any,
    ) -> None:
        self._owns = monitor is None
        if monitor is None:
            monitor = ZeusMonitor(
                gpu_indices=gpu_indices, cpu_indices=cpu_indices, sync_execution_with=sync_execution_with, registry=registry
            )
        elif not isinstance(monitor, Monitor):
            raise ValueError(f"monitor must be a zeus_core.ZeusMonitor (or Monitor), got {type(monitor).__name__}")
        self.monitor = monitor
        try:
            self.grid: Grid = script_grid(grid, registry_or_default(registry), monitor.devices)
        except BaseException:
            if self._owns:
                monitor.close()
            raise
        self.signal = self.grid.signals[self.quantity]
        #: window name -> readings (device clock, energy per device) from its begin on
        self._open: dict[str, list[tuple[float, dict[str, float]]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._poll = poll

    # -- readings --

    def _read(self) -> tuple[float, dict[str, float]]:
        devices = self.monitor.devices
        return float(devices.clock()), dict(devices.read_energy())

    def _next_step_s(self) -> float:
        """Seconds until the signal's current step ends (inf: it never does)."""
        now = self.grid.now(self.monitor.devices)
        end = self.signal.steps(now, now)[0].end
        return end - now if math.isfinite(end) else math.inf

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                wait = self._next_step_s()
            except Exception:  # noqa: BLE001 - a reading thread never raises into the script
                wait = 60.0
            if self._stop.wait(min(max(wait, 0.0) + 0.001, MAX_SLEEP_S)):
                return
            if wait > MAX_SLEEP_S:
                continue
            try:
                reading = self._read()
            except Exception:  # noqa: BLE001
                continue
            with self._lock:
                for readings in self._open.values():
                    readings.append(reading)

    # -- windows --

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        """Begin window ``key`` (as :meth:`zeus_core.Monitor.begin_window`)."""
        self.monitor.begin_window(key, sync_execution=sync_execution)
        with self._lock:
            self._open[key] = [self._read()]
        if self._poll and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="zeus-grid-readings", daemon=True)
            self._thread.start()

    def _charged(self, key: str, sync_execution: bool) -> tuple[Measurement, dict[str, float], dict[str, float]]:
        """The window's measurement, and per device the amount charged and the mean value."""
        m = self.monitor.end_window(key, sync_execution=sync_execution)
        end = self._read()
        with self._lock:
            readings = self._open.pop(key, [])
        begin = readings[0] if readings else (end[0] - m.time, end[1])
        cuts = [begin] + [r for r in readings[1:] if begin[0] < r[0] < end[0]] + [end]
        clock = self.grid.clock
        assert clock is not None
        signal = {("carbon" if self.quantity == CARBON else "price"): self.signal}
        amounts: dict[str, float] = {}
        means: dict[str, float] = {}
        for name, joules in m.energy.items():
            meter = GridMeter(Grid(**signal, currency=self.grid.currency))
            deltas = [(a[0], b[0], max(b[1].get(name, 0.0) - a[1].get(name, 0.0), 0.0)) for a, b in zip(cuts, cuts[1:])]
            local = sum(d for _, _, d in deltas)
            span = end[0] - begin[0]
            for a, b, d in deltas:  # each stretch's share: its own energy, or its time when the counter did not move
                share = d / local if local > 0 else ((b - a) / span if span > 0 else 1.0 / len(deltas))
                meter.add(clock.time_of(a), clock.time_of(b), joules * share)
            mean = meter.means().get(self.quantity)
            if mean is not None:
                means[name] = mean
                amounts[name] = joules * mean / JOULES_PER_KWH
        return m, amounts, means

    @staticmethod
    def _keyed(m: Measurement, amounts: dict[str, float]) -> tuple[dict[int, float], dict[int, float] | None, dict[int, float] | None]:
        keyed = Measurement(m.time, amounts)
        return keyed.gpu_energy, keyed.cpu_energy, keyed.dram_energy

    @staticmethod
    def _total(m: Measurement, amounts: dict[str, float], means: dict[str, float]) -> tuple[float, float]:
        """(amount over every device, mean value weighted by energy; exactly the value when one)."""
        weights: dict[float, float] = {}
        for name, mean in means.items():
            weights[mean] = weights.get(mean, 0.0) + max(m.energy.get(name, 0.0), 0.0)
        value = weighted_mean(weights, {v: 1.0 for v in weights})
        if value is None:
            return 0.0, math.nan
        return m.total_system_energy * value / JOULES_PER_KWH, value

    # -- lifetime --

    def close(self) -> None:
        """Stop the reading thread; close the monitor when this object opened it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._owns:
            self.monitor.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CarbonEmissionMonitor(_GridWindows):
    """Time, energy and emissions of named windows (upstream Zeus's ``CarbonEmissionMonitor``).

    ``carbon_intensity``: a ``[grid]`` value (gCO2eq/kWh: a number, a CSV file, a live
    source such as ``"electricitymaps:DE"``); ``grid``: more ``[grid]`` keys
    (``timezone``, ``timeout_s``, ...). ``monitor``: a :class:`~zeus_core.ZeusMonitor`
    to charge (default: one made from ``gpu_indices``, ``cpu_indices`` and
    ``sync_execution_with``, closed with this object). ``poll``: read the counters at
    every step of the signal (see the module).
    """

    quantity = CARBON

    def __init__(
        self,
        monitor: Monitor | None = None,
        *,
        carbon_intensity: Any,
        gpu_indices: list[int] | None = None,
        cpu_indices: list[int] | None = None,
        sync_execution_with: Any = "torch",
        grid: dict[str, Any] | None = None,
        poll: bool = True,
        registry: Any = None,
    ) -> None:
        table = {**dict(grid or {}), "carbon_intensity": carbon_intensity}
        super().__init__(monitor, table, gpu_indices, cpu_indices, sync_execution_with, poll, registry)

    def end_window(self, key: str, sync_execution: bool = True) -> CarbonEmissionMeasurement:
        """End window ``key``: its time, energy and emissions, per device and in total."""
        m, amounts, means = self._charged(key, sync_execution)
        gpu, cpu, dram = self._keyed(m, amounts)
        carbon, mean = self._total(m, amounts, means)
        return CarbonEmissionMeasurement(
            time=m.time,
            gpu_energy=m.gpu_energy,
            gpu_carbon_emission=gpu,
            cpu_energy=m.cpu_energy,
            cpu_carbon_emission=cpu,
            dram_energy=m.dram_energy,
            dram_carbon_emission=dram,
            energy_j=m.total_system_energy,
            carbon_g=carbon,
            carbon_intensity_g_per_kwh=mean,
            measurement=m,
        )


class EnergyCostMonitor(_GridWindows):
    """Time, energy and its cost of named windows (upstream Zeus's ``EnergyCostMonitor``).

    ``price``: a ``[grid]`` value (``currency`` per kWh); otherwise as
    :class:`CarbonEmissionMonitor`.
    """

    quantity = PRICE

    def __init__(
        self,
        monitor: Monitor | None = None,
        *,
        price: Any,
        currency: str,
        gpu_indices: list[int] | None = None,
        cpu_indices: list[int] | None = None,
        sync_execution_with: Any = "torch",
        grid: dict[str, Any] | None = None,
        poll: bool = True,
        registry: Any = None,
    ) -> None:
        table = {**dict(grid or {}), "price": price, "currency": currency}
        super().__init__(monitor, table, gpu_indices, cpu_indices, sync_execution_with, poll, registry)

    def end_window(self, key: str, sync_execution: bool = True) -> EnergyCostMeasurement:
        """End window ``key``: its time, energy and cost, per device and in total."""
        m, amounts, means = self._charged(key, sync_execution)
        gpu, cpu, dram = self._keyed(m, amounts)
        cost, mean = self._total(m, amounts, means)
        return EnergyCostMeasurement(
            time=m.time,
            gpu_energy=m.gpu_energy,
            gpu_energy_cost=gpu,
            cpu_energy=m.cpu_energy,
            cpu_energy_cost=cpu,
            dram_energy=m.dram_energy,
            dram_energy_cost=dram,
            energy_j=m.total_system_energy,
            cost=cost,
            currency=self.grid.currency,
            price_per_kwh=mean,
            measurement=m,
        )


__all__ = ["CarbonEmissionMonitor", "CarbonEmissionMeasurement", "EnergyCostMonitor", "EnergyCostMeasurement"]

"""What a device part is, and the optional abilities a device group may declare.

A ``[device]`` part is a :class:`DeviceGroup`. Everything else a device can do
is a small ``runtime_checkable`` capability protocol with fixed signatures:
a group has it by defining those methods, and the core (and any part) asks
``isinstance(devices, PowerLimitControl)`` rather than probing for names. A
power policy that needs one says so with
:class:`~zeus_core.parts.NeedsDevice`, and the job is refused before it runs
on a device without it.

This module imports nothing from the rest of the core, so anything may import
it. Outside a job, a device plugin is opened by name with
:func:`zeus_core.engine.assembly.open_device`. The reference in ``docs/parts.md`` is
generated from this module and :mod:`zeus_core.parts`.
"""

from __future__ import annotations

import time
from typing import NamedTuple, Protocol, runtime_checkable

from zeus_core.attribution import ProcessActivityReadings


@runtime_checkable
class DeviceGroup(Protocol):
    """One or more devices measured (and maybe steered) together: ``[device]``.

    ``names`` label the devices: ``gpu<i>`` (CUDA-visible index),
    ``cpu<i>-package``, ``cpu<i>-dram``, anything else for other devices.
    ``read_energy()`` returns one cumulative, never-decreasing joule count per
    name; ``clock()`` is the time source of windows over these devices
    (``time.monotonic`` for real hardware, a virtual clock for simulated ones).
    ``energy_sources`` says per name where energy comes from: ``counter``,
    ``polling`` or ``estimate``. ``max_power_w`` is the sum of the devices'
    maximum power limits (MAXPOWER of the cost metric). ``close()`` puts back
    every setting the group changed.

    Example::

        class OneFakeGpu:
            names = ["gpu0"]
            energy_sources = {"gpu0": "estimate"}
            max_power_w = 300.0

            def clock(self) -> float:
                return time.monotonic()

            def read_energy(self) -> dict[str, float]:
                return {"gpu0": 250.0 * time.monotonic()}

            def close(self) -> None:
                pass
    """

    names: list[str]
    energy_sources: dict[str, str]
    max_power_w: float

    def clock(self) -> float: ...

    def read_energy(self) -> dict[str, float]: ...

    def close(self) -> None: ...


@runtime_checkable
class PowerLimitControl(Protocol):
    """A device group whose power limit can be read and set (every device at once).

    ``set_power_limit`` journals the original limit first
    (:class:`~zeus_core.journal.SettingsGuard`), so it is put back on exit, on
    signals and after a crash, and raises :class:`~zeus_core.errors.DeviceError`
    naming the fix when the process lacks the privilege. ``power_limit()`` is
    None while nothing was set on a device that cannot read its limit.

    Example::

        def power_limit_range(self) -> tuple[float, float]:
            return (100.0, 300.0)

        def power_limit(self) -> float | None:
            return self._limit

        def set_power_limit(self, watts: float) -> None:
            self._guard.record("limit", self._limit)
            self._limit = watts
    """

    def power_limit_range(self) -> tuple[float, float]: ...

    def power_limit(self) -> float | None: ...

    def set_power_limit(self, watts: float) -> None: ...


@runtime_checkable
class PerDevicePowerLimits(Protocol):
    """A device group that can hold a different limit on each device (Zeus^2 allocations).

    Example::

        def power_limits(self) -> dict[str, float]:
            return {"gpu0": 250.0, "gpu1": 150.0}

        def set_power_limits(self, watts: dict[str, float]) -> None:
            for name, w in watts.items():
                self._gpus[name].set_power_limit(w)
    """

    def power_limits(self) -> dict[str, float]: ...

    def set_power_limits(self, watts: dict[str, float]) -> None: ...


@runtime_checkable
class ClockControl(Protocol):
    """A device group whose SM clock can be locked (Perseus frequency plans).

    ``lock_clocks`` may also lock clocks the SM clock depends on (the ``nvml``
    device holds the memory clock at its maximum where the GPU allows it),
    journaled like the SM clock; ``reset_clocks`` unlocks them all.

    Example::

        def supported_clocks(self) -> list[int]:
            return [1410, 1395, 1380]

        def lock_clocks(self, mhz: int) -> None:
            self._guard.record("sm_clock", None)
            self._driver.lock(mhz)

        def reset_clocks(self) -> None:
            self._driver.unlock()
    """

    def supported_clocks(self) -> list[int]: ...

    def lock_clocks(self, mhz: int) -> None: ...

    def reset_clocks(self) -> None: ...


@runtime_checkable
class PowerReadings(Protocol):
    """A device group that reads instant power, in watts per device name (``zeus monitor``,
    and short windows with ``approx_instant_energy``).

    Example::

        def read_power(self) -> dict[str, float]:
            return {"gpu0": self._driver.power_mw() / 1000}
    """

    def read_power(self) -> dict[str, float]: ...


@runtime_checkable
class PowerDomainReadings(Protocol):
    """A device group that reads power in more than one domain per device, in watts:
    ``{device name: {domain: watts}}``. Domains are the vendor's: ``instant`` (the
    sensor's current reading), ``average`` (the driver's moving average), ``memory``
    (the memory rail, where the vendor reports it apart). A domain the device does
    not report is absent, never zero.

    Example::

        def read_power_domains(self) -> dict[str, dict[str, float]]:
            info = self._driver.power_info(0)
            return {"gpu0": {"instant": info.current_w, "average": info.average_w}}
    """

    def read_power_domains(self) -> dict[str, dict[str, float]]: ...


@runtime_checkable
class TemperatureReadings(Protocol):
    """A device group that reads temperatures, in degrees Celsius per device name (the
    vendor's main sensor of each device: the GPU die or edge; a board's thermal zone).

    Example::

        def read_temperatures(self) -> dict[str, float]:
            return {"gpu0": self._driver.temperature_c(0)}
    """

    def read_temperatures(self) -> dict[str, float]: ...


@runtime_checkable
class ClockReadings(Protocol):
    """A device group that reads its devices' current clocks, in MHz: ``{device name: {clock: MHz}}``.
    Clocks are ``sm`` (NVIDIA's SM clock, AMD's GFX clock) and ``memory``; a clock the device does not
    report is absent, never zero (what exporters serve as ``DCGM_FI_DEV_SM_CLOCK`` and ``..._MEM_CLOCK``).

    Example::

        def read_clocks(self) -> dict[str, dict[str, float]]:
            return {"gpu0": {"sm": self._driver.sm_mhz(0), "memory": self._driver.memory_mhz(0)}}
    """

    def read_clocks(self) -> dict[str, dict[str, float]]: ...


@runtime_checkable
class GpuSync(Protocol):
    """A device group with GPUs: the CUDA indices a measurement window synchronises
    before each timestamp, so that kernels in flight are paid for by their window.

    Example::

        sync_indices = [0, 1]
    """

    sync_indices: list[int] | None


@runtime_checkable
class SupportedPowerLimits(Protocol):
    """A device group that offers a discrete set of power limits (a replayed trace), which
    power policies profile instead of steps over ``power_limit_range()``.

    Example::

        def supported_power_limits(self) -> list[float]:
            return [300.0, 250.0, 200.0, 150.0]
    """

    def supported_power_limits(self) -> list[float]: ...


@runtime_checkable
class ControlPaths(Protocol):
    """A device group whose settings may change in this process or through ``zeus daemon``
    (a training process without the privilege): per device name, ``"local"``,
    ``"local, read-only"`` (this process lacks the privilege the setters need and no
    daemon is configured, so a real driver refuses changes) or ``"daemon"``. ``zeus monitor``
    shows it as ``via``; ``zeus env`` as whether this process may change settings.

    Example::

        @property
        def control_paths(self) -> dict[str, str]:
            return {name: "daemon" if self._client else "local" for name in self.names}
    """

    control_paths: dict[str, str]


@runtime_checkable
class EnergyIncludes(Protocol):
    """A device group one of whose devices measures energy that others of the group also
    measure: a board's input rail, say, holds every rail behind it. ``energy_includes``
    maps such a device name to the names inside it; a total adds a device once, so it
    leaves out every name that a measured device includes (``zeus monitor``'s total row).

    Example::

        energy_includes = {"vdd_in": ["vdd_gpu_soc", "vdd_cpu_cv"]}
    """

    energy_includes: dict[str, list[str]]


@runtime_checkable
class DeviceModels(Protocol):
    """A device group that names the model of each device (``zeus env``): the GPU's product
    name, the chip, the board a rail is on. Per device name; a device whose model is
    unknown is absent.

    Example::

        @property
        def device_models(self) -> dict[str, str]:
            return {g.name: g.model for g in self.gpus}
    """

    device_models: dict[str, str]


@runtime_checkable
class DriverVersions(Protocol):
    """A device group that says which vendor software it runs on, by name, each with its
    version (``zeus env``): the driver, the library, the runtime API the driver offers.

    Example::

        @property
        def driver_versions(self) -> dict[str, str]:
            return {"NVIDIA driver": self._nvml.nvmlSystemGetDriverVersion()}
    """

    driver_versions: dict[str, str]


#: What a device's energy covers (:attr:`Precision.scope`): the GPU alone; a module whose counter
#: includes its CPU and memory (GH200/GB200 superchips report module power); one SoC rail (a
#: Jetson's); a CPU package (RAPL ``package``); DRAM (RAPL ``dram``); any other device.
SCOPES = ("gpu", "module", "soc_rail", "cpu_package", "dram", "device")


class Precision(NamedTuple):
    """How one device's energy is measured, enough to bound a window's error in joules (:meth:`bound_j`).

    ``method``: ``counter`` (a hardware energy counter), ``polling`` (power polled and
    integrated) or ``estimate`` (a model). ``scope``: one of :data:`SCOPES`. ``max_w``: the
    most the device can draw (W), what the worst case assumes between readings.

    A counter: ``period_s`` is its update period (inferred when the device opens; NVIDIA's is
    about 100 ms) and ``resolution_j`` its step. Each edge of a window reads it up to one
    period late and truncated to a step, and both edges err the same way, so a window's error
    is at most ``max_w * period_s + resolution_j`` whatever its length.

    Polled power: ``period_s`` is the polling period; ``sensor_period_s`` how often the power
    reading refreshes; ``coverage`` the part of each refresh period the reading covers (A100
    and H100: 25 ms of 100 ms, Yang et al., SC'24); ``average_s`` > 0 says the reading is a
    trailing average over that long (GA100's default reading; 1 s on other Ampere-and-later
    boards), 0 that it is instant. The bound adds the power held at each edge over a polling
    period and the sensor's refresh (``2 * max_w * (period_s + sensor_period_s)``), the lag of
    an averaged reading (``max_w * average_s / 2``), and the draw the reading never saw: the
    uncovered part of each refresh period, or of each polling period when the polls are
    further apart than the refreshes, at up to ``max_w`` (``(1 - covered) * max_w * seconds``).
    An instant reading without a ``sensor_period_s`` is taken to follow the draw between polls.

    An estimate: ``relative`` is its declared relative error (a fraction of the energy); NaN
    where it declares none (its error is unknown, never claimed small).

    ``scale``: a counter's known unit error, the fraction by which it may count too much or too
    little whatever the window (AMD: the library multiplies counts of 2**-16 J by 15.3 µJ, 0.27 %
    too much); it adds ``scale * |joules|`` to a counter's bound. 0 for a counter whose unit is exact.
    """

    method: str
    scope: str
    max_w: float
    period_s: float = 0.0
    resolution_j: float = 0.0
    sensor_period_s: float = 0.0
    coverage: float = 1.0
    average_s: float = 0.0
    relative: float = float("nan")
    scale: float = 0.0

    def covered(self) -> float:
        """The part of a window's time the polled readings saw (1.0 for a counter)."""
        if self.method != "polling":
            return 1.0
        if self.average_s > 0:  # each poll reports the trailing average_s, of which the sensor saw coverage
            return self.coverage * min(1.0, self.average_s / self.period_s) if self.period_s > 0 else self.coverage
        if self.sensor_period_s > 0:  # each poll reports the latest refresh: coverage of one sensor period
            return self.coverage * min(1.0, self.sensor_period_s / self.period_s) if self.period_s > 0 else self.coverage
        return 1.0

    def bound_j(self, seconds: float, joules: float) -> float:
        """The most a window of ``seconds`` that measured ``joules`` can be off (J, a +/- bound)."""
        if self.method == "counter":
            return self.max_w * self.period_s + self.resolution_j + self.scale * abs(joules)
        if self.method == "polling":
            edges = 2.0 * self.max_w * (self.period_s + self.sensor_period_s)
            return edges + self.max_w * self.average_s / 2.0 + (1.0 - self.covered()) * self.max_w * max(seconds, 0.0)
        return abs(joules) * self.relative

    def min_window_s(self, relative: float, watts: float) -> float:
        """The shortest window whose bound is at most ``relative`` of its energy at a mean draw of
        ``watts``; inf where no window length meets it (the uncovered draw grows with the window)."""
        if not relative > 0 or not watts > 0:
            return float("inf")
        if self.method == "counter":
            per_j = relative - self.scale  # what is left of the bound asked for the edges, per joule
            return self.bound_j(0.0, 0.0) / (per_j * watts) if per_j > 0 else float("inf")
        if self.method == "polling":
            fixed = self.bound_j(0.0, 0.0)
            per_s = relative * watts - (1.0 - self.covered()) * self.max_w
            return fixed / per_s if per_s > 0 else float("inf")
        return 0.0 if self.relative <= relative else float("inf")


@runtime_checkable
class EnergyPrecision(Protocol):
    """A device group that says, per device name, how its energy is measured (a :class:`Precision`):
    its method, its scope and what bounds a window's error. Windows carry the bound
    (:attr:`~zeus_core.measurement.Measurement.errors`); a device without it gets NaN (unknown).

    Example::

        @property
        def energy_precision(self) -> dict[str, Precision]:
            return {"gpu0": Precision("counter", "gpu", max_w=400.0, period_s=0.1, resolution_j=0.001)}
    """

    energy_precision: dict[str, Precision]


class EpochPrediction(NamedTuple):
    """One epoch at one power limit, predicted before it runs."""

    power_limit: float
    time_s: float
    energy_j: float


@runtime_checkable
class EpochPredictor(Protocol):
    """A device group that knows, before a run, what one epoch costs at a batch size and
    each power limit (the ``trace`` device). Batch-size policies may plan with it; a
    real GPU does not offer it.

    Example::

        def predict_epoch(self, batch_size: int) -> list[EpochPrediction] | None:
            if batch_size not in self.table:
                return None
            return [EpochPrediction(p, t, e) for p, t, e in self.table[batch_size]]
    """

    def predict_epoch(self, batch_size: int) -> list[EpochPrediction] | None: ...


@runtime_checkable
class SimulatedClock(Protocol):
    """A device group whose ``clock()`` is simulated time (a replay), not the machine's. Grid signals
    (:mod:`zeus_core.grid`) then place its readings at ``[grid].start`` plus the simulated seconds
    the job has run, instead of at the wall clock.

    Example::

        def clock_is_simulated(self) -> bool:
            return True
    """

    def clock_is_simulated(self) -> bool: ...


class NoDevices:
    """A device group with no device: windows over it still time (a ``ZeusMonitor`` given no GPU
    and no CPU, as upstream's), and a service stands in with it for a client's devices, of
    which it knows only the maximum power (``max_power_w``)."""

    names: list[str] = []
    energy_sources: dict[str, str] = {}

    def __init__(self, max_power_w: float = 0.0) -> None:
        self.max_power_w = float(max_power_w)

    def clock(self) -> float:
        return time.monotonic()

    def read_energy(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        pass


#: Every device capability, in the order the docs list them.
DEVICE_CAPABILITIES: tuple[type, ...] = (
    PowerLimitControl,
    PerDevicePowerLimits,
    ClockControl,
    PowerReadings,
    PowerDomainReadings,
    TemperatureReadings,
    ClockReadings,
    GpuSync,
    SupportedPowerLimits,
    EpochPredictor,
    ControlPaths,
    EnergyIncludes,
    DeviceModels,
    DriverVersions,
    SimulatedClock,
    EnergyPrecision,
    ProcessActivityReadings,  # defined with energy attribution (zeus_core.attribution); a view forwards it like the others
)


def capability_members(capability: type) -> list[str]:
    """The names a capability protocol asks for: its methods and its data members."""
    return [n for n in (*vars(capability), *getattr(capability, "__annotations__", {})) if not n.startswith("_")]


def copy_capabilities(view: object, sources: dict[type, object]) -> None:
    """Give ``view`` (a group standing for others) each capability in ``sources`` as instance
    attributes bound to that capability's source group.

    A view that forwarded through ``__getattr__`` would fail ``isinstance`` on Python
    3.12+ (runtime-checkable protocols look attributes up with ``inspect.getattr_static``);
    copied attributes answer ``isinstance`` on every Python, and a capability the view
    withholds is simply absent.
    """
    for cap, source in sources.items():
        for name in capability_members(cap):
            setattr(view, name, getattr(source, name))


__all__ = [
    "DeviceGroup",
    "PowerLimitControl",
    "PerDevicePowerLimits",
    "ClockControl",
    "PowerReadings",
    "PowerDomainReadings",
    "TemperatureReadings",
    "ClockReadings",
    "GpuSync",
    "SupportedPowerLimits",
    "ControlPaths",
    "EnergyIncludes",
    "DeviceModels",
    "DriverVersions",
    "EpochPrediction",
    "EpochPredictor",
    "SimulatedClock",
    "EnergyPrecision",
    "Precision",
    "SCOPES",
    "NoDevices",
    "DEVICE_CAPABILITIES",
    "capability_members",
    "copy_capabilities",
]

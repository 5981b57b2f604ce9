"""Grid signals (carbon intensity, electricity price) over time, and how energy is charged against them.

A job's ``[grid]`` table (:class:`GridOptions`, in :mod:`zeus_core.job`) names a source
for each quantity: a number (a constant), the path of a CSV time series, or a live
source such as ``"electricitymaps:DE"``. Sources are registered by plugins through
``zeus_register_grid_signals`` (by scheme: ``constant``, ``csv``, ``electricitymaps``,
...), and each becomes a :class:`GridSignal`: a step function of Unix time.

**Time.** Signals speak Unix seconds (UTC). A device's readings are placed on that
axis by a :class:`GridClock`: the wall clock for real devices, and for a device whose
clock is simulated (:class:`zeus_core.device.SimulatedClock`, the ``trace`` device)
``[grid].start`` plus the simulated seconds the job has run (tries of earlier
``zeus run`` invocations included, so a job split over many invocations sits where one
long run would).

**The integration rule.** Energy is charged against a signal interval by interval: the
energy of an interval between two readings is spread evenly over its time (its power
is taken as constant), and each part is charged at the value of the step it falls in.
Readings are taken at every epoch's start and end, and wherever a power policy acts on
time (:class:`zeus_core.TimedControl`, e.g. at every period of the grid), so a job that
runs from a dirty night into a clean morning pays each hour at that hour's intensity
and at the power it drew then. A try's figures are its energy times the
energy-weighted mean value of the signal over it::

    carbon_g = energy_j * carbon_intensity_g_per_kwh / 3.6e6
    cost_<currency> = energy_j * price_<currency>_per_kwh / 3.6e6

where the mean is exactly the value when the signal held one value throughout (so a
constant intensity ``I`` gives ``carbon_g = energy_j * I / 3.6e6`` exactly, for a try
and for a whole job alike). A reading past either end of a series, or while a live
service does not answer, is charged at the nearest known value (the source warns once);
those seconds are counted (``held_s``) and shown in ``summary.json``.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:  # annotations only
    from zeus_core.results import TryRecord

#: Joules in one kilowatt-hour: signals are per kWh.
JOULES_PER_KWH = 3.6e6

#: The quantities a ``[grid]`` table names a source for.
CARBON, PRICE = "carbon_intensity", "price"
QUANTITIES = (CARBON, PRICE)

#: Column (and ``summary.json`` key) of a job's emissions, and of the mean intensity they were charged at.
CARBON_COLUMN, INTENSITY_COLUMN = "carbon_g", "carbon_intensity_g_per_kwh"


def cost_column(currency: str) -> str:
    """``cost_eur``: the column of a job's energy cost in ``currency``."""
    return f"cost_{currency.lower()}"


def price_column(currency: str) -> str:
    """``price_eur_per_kwh``: the column of the mean price a try's energy was charged at."""
    return f"price_{currency.lower()}_per_kwh"


# =========================================================================== signals


class Step(NamedTuple):
    """One step of a signal: ``value`` from ``start`` to ``end`` (Unix seconds). ``held``: the
    value was carried past what the source knows (beyond a series' end, a service that is down);
    a NaN ``value``: nothing is known yet (a live service that never answered), nothing is charged."""

    start: float
    end: float
    value: float
    held: bool = False


@runtime_checkable
class GridSignal(Protocol):
    """A quantity of the grid over time (gCO2eq/kWh, or money per kWh): a step function.

    ``source`` says where it comes from (``"csv:de_2020.csv"``), for messages and
    ``summary.json``. ``steps(start, end)`` returns the steps covering ``[start, end]``
    in order, clipped to it (one step when ``start == end``). It never raises for a
    time the source does not know: it holds the nearest known value (``Step.held``)
    and warns once, so a training job never stops on a signal.

    Example::

        class Flat:
            source = "flat"

            def steps(self, start: float, end: float) -> list[Step]:
                return [Step(start, end, 300.0)]
    """

    source: str

    def steps(self, start: float, end: float) -> list[Step]: ...


@runtime_checkable
class TimeSeries(Protocol):
    """A signal that is known over a span of time (a CSV file): ``span()`` is (first, last)
    Unix seconds it has values for. A trace replay then needs ``[grid].start`` inside it.

    Example::

        def span(self) -> tuple[float, float]:
            return float(self.times[0]), float(self.ends[-1])
    """

    def span(self) -> tuple[float, float]: ...


@runtime_checkable
class Forecasts(Protocol):
    """A signal that predicts its values: ``forecast(at)`` is the step containing ``at`` with
    its value predicted from what was known before that step began (what a policy deciding
    at the step's start can know). A carbon-aware policy acts on it.

    Example::

        def forecast(self, at: float) -> Step:
            i = self.index(at)  # the row whose step contains ``at``
            return Step(self.starts[i], self.ends[i], self.values[max(i - 1, 0)])  # the same as the step before
    """

    def forecast(self, at: float) -> Step: ...


#: Every grid capability, in the order the docs list them.
GRID_PROTOCOLS: tuple[type, ...] = (GridSignal, TimeSeries, Forecasts)


# =========================================================================== times


_OFFSET = re.compile(r"^(?:UTC)?([+-])(\d{2}):?(\d{2})$")


def parse_zone(name: str) -> tzinfo:
    """A time zone by IANA name (``Europe/Berlin``), ``UTC``, or a fixed offset (``+01:00``).

    Raises ValueError naming the accepted forms."""
    name = name.strip()
    if name.upper() in ("UTC", "Z", "GMT"):
        return UTC
    m = _OFFSET.match(name)
    if m:
        sign = 1 if m.group(1) == "+" else -1
        return timezone(sign * timedelta(hours=int(m.group(2)), minutes=int(m.group(3))))
    try:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
    except ImportError:  # pragma: no cover - Python 3.11 has it
        raise ValueError(f"time zone {name!r}: only UTC and fixed offsets (+01:00) here") from None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}: give an IANA name (Europe/Berlin), UTC, or an offset "
                         "such as +01:00") from None


def parse_time(text: str, zone: tzinfo | None, what: str = "time") -> float:
    """An ISO 8601 date-time as Unix seconds. A time with an offset (``Z``, ``+01:00``) is what it
    says; a naive one is read in ``zone``, and is an error without one (time zones are explicit).
    A naive local time that does not exist (the hour skipped when clocks go forward) is an error.
    ``what`` names the value in messages."""
    text = text.strip()
    try:
        dt = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise ValueError(f"{what} {text!r} is not an ISO 8601 date-time (such as 2020-06-01T00:00:00Z)") from None
    if dt.tzinfo is not None:
        return dt.timestamp()
    if zone is None:
        raise ValueError(f"{what} {text!r} has no time zone: write it with an offset (2020-06-01T00:00:00Z, "
                         "...+01:00) or set [grid] timezone")
    local = dt.replace(tzinfo=zone)
    back = datetime.fromtimestamp(local.timestamp(), zone).replace(tzinfo=None)
    if back != dt:
        raise ValueError(f"{what} {text!r} does not exist in time zone {zone} (the clocks skip it); times "
                         "without a zone must be wall-clock times of [grid] timezone")
    return local.timestamp()


def show_time(t: float) -> str:
    """Unix seconds as an ISO date-time in UTC, for messages."""
    if not math.isfinite(t):
        return str(t)
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# =========================================================================== sources


@attrs.frozen
class SourceRequest:
    """What a source's opener is asked for: ``opener(spec, request)`` returns a :class:`GridSignal`.

    ``spec`` is the ``[grid]`` value after the scheme (``"DE"`` of
    ``"electricitymaps:DE"``, a path, or the number of a constant, as text).
    ``quantity`` is ``carbon_intensity`` or ``price``; ``currency`` the job's (price
    only); ``job_dir`` the folder relative paths are read from; ``zone`` the zone of
    naive times (None: none given); ``max_gap_s`` the longest step a time series may
    have; ``timeout_s`` and ``refresh_s`` how long a live source waits for an answer
    and how long it keeps one."""

    quantity: str
    job_dir: Path
    zone: tzinfo | None = None
    currency: str = ""
    max_gap_s: float = 3600.0
    timeout_s: float = 5.0
    refresh_s: float = 300.0


def source_of(value: Any, schemes: Iterable[str], file_schemes: Mapping[str, str]) -> tuple[str, str]:
    """(scheme, spec) of a ``[grid]`` value: a number is ``constant``; ``"scheme:spec"`` with a
    registered scheme is that source; any other text is a path, read by the source registered for
    its suffix (``file_schemes``: ``".csv"`` -> ``"csv"``). Raises ValueError naming the forms."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a number, a CSV path or a source such as \"electricitymaps:DE\", got {value!r}")
    if not isinstance(value, str):
        return "constant", repr(float(value))
    schemes = set(schemes)
    head, sep, rest = value.partition(":")
    if sep and head.lower() in schemes and not (len(head) == 1 and rest.startswith(("\\", "/"))):  # not C:\ on Windows
        return head.lower(), rest
    suffix = Path(value).suffix.lower()
    if suffix in file_schemes:
        return file_schemes[suffix], value
    known = ", ".join(f'"{s}:..."' for s in sorted(schemes - {"constant"})) or "none installed"
    raise ValueError(f"{value!r} is neither a number, nor a file this installation reads "
                     f"({', '.join(sorted(file_schemes)) or 'no file source installed'}), nor a source it knows "
                     f"(sources: {known})")


# =========================================================================== the clock


@attrs.define
class GridClock:
    """Places a device clock's readings on Unix time: ``time_of(clock) = clock + offset``."""

    offset: float
    simulated: bool = False

    @classmethod
    def wall(cls, device_clock: float) -> GridClock:
        """For a device whose clock runs with real time: its reading now is the wall clock now."""
        return cls(time.time() - device_clock)

    @classmethod
    def replay(cls, start: float, elapsed_s: float, device_clock: float) -> GridClock:
        """For a simulated clock: its reading now is ``start`` plus the ``elapsed_s`` simulated seconds
        the job has run before."""
        return cls(start + elapsed_s - device_clock, simulated=True)

    def time_of(self, clock: float) -> float:
        return clock + self.offset

    def clock_of(self, t: float) -> float:
        """The device-clock reading at Unix time ``t``."""
        return t - self.offset


@attrs.define
class Grid:
    """A job's grid: its signals (None where ``[grid]`` names none), its currency, and where a
    replay starts. :meth:`bind` gives it the clock of the devices it measures."""

    carbon: GridSignal | None = None
    price: GridSignal | None = None
    currency: str = ""
    #: Unix time where a replay's simulated clock starts (None: not given).
    start: float | None = None
    clock: GridClock | None = None

    @property
    def signals(self) -> dict[str, GridSignal]:
        out = {}
        if self.carbon is not None:
            out[CARBON] = self.carbon
        if self.price is not None:
            out[PRICE] = self.price
        return out

    def bind(self, devices: Any, elapsed_s: float = 0.0) -> GridClock:
        """Place ``devices``' clock on Unix time: the wall clock, or for a simulated clock
        (:class:`~zeus_core.device.SimulatedClock`) ``start`` + ``elapsed_s`` (the simulated seconds
        of the job's earlier tries). Raises ValueError when a replay of a time series has no start."""
        from zeus_core.device import SimulatedClock

        now = float(devices.clock())
        if isinstance(devices, SimulatedClock):
            start = self.start
            if start is None:
                series = [s for s in self.signals.values() if isinstance(s, TimeSeries)]
                if series:
                    first, last = series[0].span()
                    raise ValueError(
                        f"the device's clock is simulated, so the replay needs a place on {series[0].source}: set "
                        f"[grid] start (the series runs from {show_time(first)} to {show_time(last)})")
                start = time.time()
            self.clock = GridClock.replay(start, elapsed_s, now)
        else:
            self.clock = GridClock.wall(now)
        return self.clock

    def now(self, devices: Any) -> float:
        """Unix time of ``devices``' clock now (bind first)."""
        assert self.clock is not None, "bind the grid to the devices first"
        return self.clock.time_of(float(devices.clock()))

    def describe(self) -> dict[str, Any]:
        """The ``grid`` section of ``summary.json``: where each signal comes from."""
        out: dict[str, Any] = {k: s.source for k, s in self.signals.items()}
        if self.price is not None:
            out["currency"] = self.currency
        if self.start is not None:
            out["start"] = show_time(self.start)
        return out


# =========================================================================== the integration rule


class _Charge:
    """Energy charged against one signal: joules (and seconds) per distinct value."""

    __slots__ = ("joules", "seconds", "held_s")

    def __init__(self) -> None:
        self.joules: dict[float, float] = {}
        self.seconds: dict[float, float] = {}
        self.held_s = 0.0

    def add(self, value: float, joules: float, seconds: float, held: bool) -> None:
        if held:
            self.held_s += seconds
        if math.isnan(value):  # nothing known yet: nothing to charge at
            return
        self.joules[value] = self.joules.get(value, 0.0) + joules
        self.seconds[value] = self.seconds.get(value, 0.0) + seconds

    def mean(self) -> float | None:
        """The energy-weighted mean value (time-weighted when no energy was drawn); exactly the value
        when only one was seen; None when nothing was charged."""
        return weighted_mean(self.joules, self.seconds)


def weighted_mean(weights: Mapping[float, float], fallback: Mapping[float, float] | None = None) -> float | None:
    """Mean of the keys of ``weights`` weighted by its values; exactly the key when there is one
    (so a constant is charged exactly), ``fallback``'s weights when every weight is zero."""
    if not weights:
        return None
    if len(weights) == 1:
        return next(iter(weights))
    total = math.fsum(weights.values())
    if total <= 0:
        return weighted_mean(fallback) if fallback else None
    return math.fsum(v * w for v, w in weights.items()) / total


class GridMeter:
    """Charges energy over time against a job's signals (the integration rule of this module).

    ``add(start, end, joules)`` charges ``joules`` spent evenly from ``start`` to ``end``
    (Unix seconds); :meth:`figures` gives a try's columns for its ``energy_j``.
    """

    def __init__(self, grid: Grid) -> None:
        self.grid = grid
        self._charges = {quantity: _Charge() for quantity in grid.signals}

    def add(self, start: float, end: float, joules: float) -> None:
        joules = float(joules)
        if not math.isfinite(joules):
            return
        span = end - start
        for quantity, signal in self.grid.signals.items():
            charge = self._charges[quantity]
            if span <= 0:
                step = signal.steps(end, end)[0]
                charge.add(float(step.value), joules, 0.0, step.held)
                continue
            for step in signal.steps(start, end):
                seconds = min(step.end, end) - max(step.start, start)
                if seconds > 0:
                    charge.add(float(step.value), joules * (seconds / span), seconds, step.held)

    @property
    def held_s(self) -> float:
        """Seconds charged at a held value (beyond a series, a service that did not answer)."""
        return max((c.held_s for c in self._charges.values()), default=0.0)

    def means(self) -> dict[str, float]:
        """The mean value each signal charged at (only signals that charged anything)."""
        out = {}
        for quantity, charge in self._charges.items():
            m = charge.mean()
            if m is not None:
                out[quantity] = m
        return out

    def figures(self, energy_j: float) -> dict[str, float]:
        """A try's columns: ``carbon_g`` and the intensity it was charged at, ``cost_<currency>`` and
        the price (only for the job's signals; empty before anything was charged)."""
        return columns(self.means(), energy_j, self.grid.currency)


def columns(means: Mapping[str, float], energy_j: float, currency: str) -> dict[str, float]:
    """The columns of ``energy_j`` charged at mean values ``means`` (by quantity), in column order."""
    out: dict[str, float] = {}
    if CARBON in means:
        out[CARBON_COLUMN] = float(energy_j) * means[CARBON] / JOULES_PER_KWH
        out[INTENSITY_COLUMN] = float(means[CARBON])
    if PRICE in means:
        out[cost_column(currency)] = float(energy_j) * means[PRICE] / JOULES_PER_KWH
        out[price_column(currency)] = float(means[PRICE])
    return out


def job_totals(records: Sequence[TryRecord], energy_j: float, currency: str) -> dict[str, float]:
    """A job's columns over its tries: ``energy_j`` (the job's total) charged at the energy-weighted
    mean of the tries' mean values (exactly the value when every try was charged at one), over the
    tries that were charged at all. Empty when none was."""
    means: dict[str, float] = {}
    for quantity, column in ((CARBON, INTENSITY_COLUMN), (PRICE, price_column(currency) if currency else "")):
        weights: dict[float, float] = {}
        seconds: dict[float, float] = {}
        charged = [r for r in records if column and column in r.grid]
        for r in charged:
            v = float(r.grid[column])
            weights[v] = weights.get(v, 0.0) + max(float(r.energy_j), 0.0)
            seconds[v] = seconds.get(v, 0.0) + max(float(r.time_s), 0.0)
        m = weighted_mean(weights, seconds)
        if m is not None:
            means[quantity] = m
    if not means:
        return {}
    charged_energy = energy_j
    if any(not r.grid for r in records):  # only the tries that were charged
        charged_energy = math.fsum(r.energy_j for r in records if r.grid)
    return columns(means, charged_energy, currency)


def record_currency(records: Sequence[TryRecord]) -> str:
    """The currency of the tries' ``cost_<currency>`` column (upper case), or "" when none has one."""
    for r in records:
        for key in r.grid:
            if key.startswith("cost_"):
                return key[len("cost_"):].upper()
    return ""


__all__ = [
    "CARBON", "PRICE", "QUANTITIES", "JOULES_PER_KWH", "CARBON_COLUMN", "INTENSITY_COLUMN",
    "Step", "GridSignal", "TimeSeries", "Forecasts", "GRID_PROTOCOLS",
    "SourceRequest", "source_of", "parse_zone", "parse_time", "show_time",
    "GridClock", "Grid", "GridMeter", "weighted_mean", "columns", "job_totals", "record_currency", "cost_column", "price_column",
]

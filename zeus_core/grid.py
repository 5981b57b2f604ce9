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

The rule is computed in one place, over many intervals at once: :func:`split` cuts
intervals at a signal's steps and :func:`charged_means` gives each owner's mean; the
:class:`GridMeter` of ``zeus run`` charges through them, and so do the fast trace replays
(:func:`replay_columns`, every try of a simulated job in one call). A replay knows its
whole span before it reports, so it refuses a time a signal does not know
(:class:`BeyondSignal`, naming the time and the try) instead of holding a value.
"""

from __future__ import annotations

import math
import re
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

import attrs
import numpy as np

from zeus_core.errors import BadInput

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
        raise ValueError(f"unknown time zone {name!r}: give an IANA name (Europe/Berlin), UTC, or an offset such as +01:00") from None


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
        raise ValueError(
            f"{what} {text!r} has no time zone: write it with an offset (2020-06-01T00:00:00Z, ...+01:00) or set [grid] timezone"
        )
    local = dt.replace(tzinfo=zone)
    back = datetime.fromtimestamp(local.timestamp(), zone).replace(tzinfo=None)
    if back != dt:
        raise ValueError(
            f"{what} {text!r} does not exist in time zone {zone} (the clocks skip it); times "
            "without a zone must be wall-clock times of [grid] timezone"
        )
    return local.timestamp()


def show_time(t: float) -> str:
    """Unix seconds as an ISO date-time in UTC, for messages."""
    if not math.isfinite(t):
        return str(t)
    try:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, ValueError, OSError):  # past the years a date can show
        return f"{t:g} s (Unix time)"


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
        raise ValueError(f'expected a number, a CSV path or a source such as "electricitymaps:DE", got {value!r}')
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
    raise ValueError(
        f"{value!r} is neither a number, nor a file this installation reads "
        f"({', '.join(sorted(file_schemes)) or 'no file source installed'}), nor a source it knows "
        f"(sources: {known})"
    )


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
                        f"[grid] start (the series runs from {show_time(first)} to {show_time(last)})"
                    )
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


class Pieces(NamedTuple):
    """Intervals of energy cut at a signal's steps (:func:`split`): piece ``k`` belongs to owner
    ``owner[k]`` (its interval's, or the owner the caller gave that interval), lies from ``start[k]``
    to ``end[k]`` (Unix seconds; equal for an interval of no time) and draws ``joules[k]`` at the
    step value ``value[k]`` (NaN: nothing known, nothing charged); ``held[k]``: the value was held
    past what the signal knows (:attr:`Step.held`)."""

    owner: np.ndarray
    start: np.ndarray
    end: np.ndarray
    value: np.ndarray
    joules: np.ndarray
    held: np.ndarray

    @property
    def seconds(self) -> np.ndarray:
        return self.end - self.start

    @classmethod
    def concat(cls, parts: Sequence[Pieces]) -> Pieces:
        return cls(*(np.concatenate([p[i] for p in parts]) for i in range(len(cls._fields))))


def split(signal: GridSignal, starts: Any, ends: Any, joules: Any, owners: Any = None) -> Pieces:
    """The integration rule, over many intervals at once: interval ``i`` drew ``joules[i]`` evenly
    from ``starts[i]`` to ``ends[i]`` (Unix seconds); each part of it is charged at the value of the
    step it falls in (an interval of no time: at the step of its instant). ``owners[i]`` (default
    ``i``) is what each piece is summed under by :func:`charged_means`.

    The signal is asked once, for the steps of the whole span (``signal.steps(first, last)``); a
    replay of a year asks for a year of steps."""
    starts = np.asarray(starts, dtype=float).reshape(-1)
    ends = np.maximum(np.asarray(ends, dtype=float).reshape(-1), starts)
    joules = np.asarray(joules, dtype=float).reshape(-1)
    owners = np.arange(len(starts)) if owners is None else np.asarray(owners, dtype=np.int64).reshape(-1)
    span = ends - starts
    timed = span > 0
    parts: list[Pieces] = []
    if timed.any():
        i = np.flatnonzero(timed)
        table = signal.steps(float(starts[i].min()), float(ends[i].max()))
        s = np.array([st.start for st in table], dtype=float)
        e = np.array([st.end for st in table], dtype=float)
        v = np.array([st.value for st in table], dtype=float)
        h = np.array([st.held for st in table], dtype=bool)
        first = np.searchsorted(e, starts[i], side="right")  # the first step that ends after the interval starts
        last = np.searchsorted(s, ends[i], side="left") - 1  # the last step that starts before it ends
        count = np.maximum(last - first + 1, 0)
        which = np.repeat(np.arange(len(i)), count)  # (interval, step) pairs, interval by interval
        k = first[which] + (np.arange(len(which)) - np.repeat(np.cumsum(count) - count, count))
        a, b = np.maximum(s[k], starts[i][which]), np.minimum(e[k], ends[i][which])
        keep = b > a
        which, k, a, b = which[keep], k[keep], a[keep], b[keep]
        interval = i[which]
        parts.append(Pieces(owners[interval], a, b, v[k], joules[interval] * ((b - a) / span[interval]), h[k]))
    for j in np.flatnonzero(~timed):  # an instant: the step that holds then
        step = signal.steps(float(ends[j]), float(ends[j]))[0]
        t = np.array([ends[j]])
        parts.append(Pieces(owners[j : j + 1], t, t, np.array([float(step.value)]), joules[j : j + 1], np.array([bool(step.held)])))
    if not parts:
        empty = np.zeros(0)
        return Pieces(np.zeros(0, dtype=np.int64), empty, empty, empty, empty, np.zeros(0, dtype=bool))
    return parts[0] if len(parts) == 1 else Pieces.concat(parts)


def charged_means(pieces: Pieces, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per owner ``0..n-1``: the energy-weighted mean value its pieces were charged at (time-weighted
    where they drew no energy; exactly the value where they met one value, so a constant is charged
    exactly; NaN where nothing was charged), and the seconds charged at a held value."""
    o, v, j, sec = pieces.owner, pieces.value, pieces.joules, pieces.seconds
    held_s = np.bincount(o[pieces.held], weights=sec[pieces.held], minlength=n)
    ok = ~np.isnan(v)
    o, v, j, sec = o[ok], v[ok], j[ok], sec[ok]
    count = np.bincount(o, minlength=n)
    low, high = np.full(n, np.inf), np.full(n, -np.inf)
    np.minimum.at(low, o, v)
    np.maximum.at(high, o, v)
    weight, weighted = np.bincount(o, weights=j, minlength=n), np.bincount(o, weights=j * v, minlength=n)
    time_s, timed = np.bincount(o, weights=sec, minlength=n), np.bincount(o, weights=sec * v, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(weight > 0, weighted / weight, np.where(time_s > 0, timed / time_s, np.nan))
    mean = np.where(low == high, low, mean)
    return np.where(count > 0, mean, np.nan), held_s


class GridMeter:
    """Charges energy over time against a job's signals (the integration rule of this module).

    ``add(start, end, joules)`` charges ``joules`` spent evenly from ``start`` to ``end``
    (Unix seconds); :meth:`figures` gives a try's columns for its ``energy_j``. It keeps, per
    signal, the joules and seconds charged at each distinct value (and the held seconds), so a
    meter that runs for days stays small.
    """

    def __init__(self, grid: Grid) -> None:
        self.grid = grid
        self._charges: dict[str, Pieces | None] = dict.fromkeys(grid.signals)

    def add(self, start: float, end: float, joules: float) -> None:
        joules = float(joules)
        if not math.isfinite(joules):
            return
        for quantity, signal in self.grid.signals.items():
            pieces = split(signal, [start], [end], [joules])
            kept = self._charges[quantity]
            self._charges[quantity] = _compact(pieces if kept is None else Pieces.concat([kept, pieces]))

    @property
    def held_s(self) -> float:
        """Seconds charged at a held value (beyond a series, a service that did not answer)."""
        return max((float(charged_means(p, 1)[1][0]) for p in self._charges.values() if p is not None), default=0.0)

    def means(self) -> dict[str, float]:
        """The mean value each signal charged at (only signals that charged anything)."""
        out = {}
        for quantity, pieces in self._charges.items():
            if pieces is not None:
                m = float(charged_means(pieces, 1)[0][0])
                if not math.isnan(m):
                    out[quantity] = m
        return out

    def figures(self, energy_j: float) -> dict[str, float]:
        """A try's columns: ``carbon_g`` and the intensity it was charged at, ``cost_<currency>`` and
        the price (only for the job's signals; empty before anything was charged)."""
        return columns(self.means(), energy_j, self.grid.currency)


def _compact(p: Pieces) -> Pieces:
    """One owner's pieces summed per (value, held): what :func:`charged_means` needs of them."""
    if len(p.value) <= 2:
        return p
    keys = np.where(np.isnan(p.value), np.inf, p.value)  # NaN charges nothing; its seconds may still be held
    nan = np.isnan(p.value)
    table = np.stack([keys, p.held.astype(float), nan.astype(float)], axis=1)
    rows, inverse = np.unique(table, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    n = len(rows)
    seconds = np.bincount(inverse, weights=p.seconds, minlength=n)
    joules = np.bincount(inverse, weights=p.joules, minlength=n)
    value = np.where(rows[:, 2] > 0, np.nan, rows[:, 0])
    return Pieces(np.zeros(n, dtype=np.int64), np.zeros(n), seconds, value, joules, rows[:, 1] > 0)


class BeyondSignal(BadInput):
    """A replay runs at times a signal does not know (past a series' end): exit 2."""


def replay_columns(
    grid: Grid,
    starts: Any,
    ends: Any,
    joules: Any,
    energy_j: Any,
    owners: Any = None,
    name: Callable[[int], str] = lambda i: f"interval {i + 1}",
) -> dict[str, np.ndarray]:
    """The grid columns of a trace replay's tries at once: try ``o`` drew ``joules[i]`` evenly over
    ``[starts[i], ends[i]]`` for each interval ``i`` with ``owners[i] == o`` (default: one interval
    per try), and its columns are its ``energy_j[o]`` charged at their energy-weighted mean value,
    as :class:`GridMeter` charges a try of ``zeus run`` (:func:`columns`, column by column).

    A replay knows its whole span before it reports, so it does not hold a value past what a
    signal knows (``zeus run`` does, and warns): it raises :class:`BeyondSignal` naming the first
    such time and ``name(owner)`` of the try that runs then."""
    energy = np.asarray(energy_j, dtype=float).reshape(-1)
    n = len(energy)
    means: dict[str, np.ndarray] = {}
    for quantity, signal in grid.signals.items():
        with warnings.catch_warnings():  # a held value is this function's error, not a source's warning
            warnings.simplefilter("ignore")
            pieces = split(signal, starts, ends, joules, owners)
        if pieces.held.any():
            k = int(np.flatnonzero(pieces.held)[np.argmin(pieces.start[pieces.held])])
            span = f" (it covers {show_time(signal.span()[0])} to {show_time(signal.span()[1])})" if isinstance(signal, TimeSeries) else ""
            raise BeyondSignal(
                f"[grid] {quantity}: {signal.source} has no value for {show_time(float(pieces.start[k]))}, when "
                f"{name(int(pieces.owner[k]))} runs{span}; a replay is charged only at known values: set [grid] start "
                "earlier, or give a series that covers the whole replay"
            )
        means[quantity] = charged_means(pieces, n)[0]
    out: dict[str, np.ndarray] = {}
    if CARBON in means:
        out[CARBON_COLUMN] = energy * means[CARBON] / JOULES_PER_KWH
        out[INTENSITY_COLUMN] = means[CARBON]
    if PRICE in means:
        out[cost_column(grid.currency)] = energy * means[PRICE] / JOULES_PER_KWH
        out[price_column(grid.currency)] = means[PRICE]
    return out


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
                return key[len("cost_") :].upper()
    return ""


__all__ = [
    "CARBON",
    "PRICE",
    "QUANTITIES",
    "JOULES_PER_KWH",
    "CARBON_COLUMN",
    "INTENSITY_COLUMN",
    "Step",
    "GridSignal",
    "TimeSeries",
    "Forecasts",
    "GRID_PROTOCOLS",
    "SourceRequest",
    "source_of",
    "parse_zone",
    "parse_time",
    "show_time",
    "GridClock",
    "Grid",
    "GridMeter",
    "Pieces",
    "split",
    "charged_means",
    "BeyondSignal",
    "replay_columns",
    "weighted_mean",
    "columns",
    "job_totals",
    "record_currency",
    "cost_column",
    "price_column",
]

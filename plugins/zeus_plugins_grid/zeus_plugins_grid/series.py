"""The ``csv`` source: a time series read from a CSV file, and the step function over it.

Layout (the README has it with examples): a header row, then one row per step.

* The time column is the one named ``time``, ``datetime``, ``timestamp`` or ``date``
  (any case; the shared files' ``Time``), else the first column. A time is ISO 8601
  (``2020-06-01T00:00:00Z``, ``2020-06-01 02:00:00+02:00``) or a number of Unix seconds.
  Times without an offset are wall-clock times of ``[grid] timezone`` (there is no
  default: a file of naive times without it is an error naming its first row). In a
  zone with daylight saving time, a naive time the clocks skip is an error naming the
  row; one they repeat (the hour after clocks go back) is read as the later one when
  the row before it was already past it.
* The value column: the only other column; else the one named after the quantity
  (``carbon_intensity``, ``Carbon Intensity``, ``price``, ``value``).
* Each row's value holds from its time until the next row's; the last row's for the
  file's usual step (its median). Times must increase strictly (a duplicated or an
  earlier time is an error naming both rows), and no step may be longer than
  ``[grid] max_gap_s`` (a gap is an error naming both rows and the fix). A value must
  be a finite number; a carbon intensity must not be negative (a price may).
"""

from __future__ import annotations

import math
import warnings
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from zeus_core.datafiles import csv_table, data_limit, parse_number, read_data_text
from zeus_core.grid import CARBON, SourceRequest, Step, show_time
from zeus_core.job import grid_bound_problem

if TYPE_CHECKING:
    from zeus_plugins_grid.forecast import Forecaster

TIME_NAMES = ("time", "datetime", "timestamp", "date")
#: The largest CSV series read, in bytes, unless :data:`CSV_LIMIT_ENV` (MiB) raises it: the shared
#: 2020 series are at most 1.4 MiB (a year at 15 minutes); 16 MiB is about ten years at 15 minutes.
CSV_LIMIT = 16 << 20
CSV_LIMIT_ENV = "ZEUS_MAX_GRID_MB"
#: The times a series may hold (Unix seconds): 1900-01-01 to 2200-01-01 UTC, so that every time and
#: every step after it can be shown as a date.
FIRST_TIME, LAST_TIME = -2208988800.0, 7258118400.0
VALUE_NAMES = {CARBON: ("carbon_intensity", "carbon intensity", "carbonintensity", "value"), "price": ("price", "value")}


class GridWarning(UserWarning):
    """A signal charged a held value (past a series' end, a service that does not answer)."""


def warn_once(seen: set[str], key: str, message: str) -> None:
    """Warn ``message`` once per ``key`` of ``seen`` (a signal's own set)."""
    if key not in seen:
        seen.add(key)
        warnings.warn(message, GridWarning, stacklevel=3)


class StepSeries:
    """A step function of Unix time: ``values[i]`` from ``starts[i]`` to ``ends[i]`` (contiguous)."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray, values: np.ndarray, source: str) -> None:
        self.starts = np.asarray(starts, dtype=float)
        self.ends = np.asarray(ends, dtype=float)
        self.values = np.asarray(values, dtype=float)
        self.source = source
        self._warned: set[str] = set()
        self._forecaster: Forecaster | None = None

    def __len__(self) -> int:
        return len(self.values)

    def span(self) -> tuple[float, float]:
        return float(self.starts[0]), float(self.ends[-1])

    def index(self, t: float) -> int:
        """The row whose step contains ``t`` (-1 before the first, len after the last)."""
        if t >= self.ends[-1]:
            return len(self.values)
        return int(np.searchsorted(self.starts, t, side="right")) - 1

    def _held(self, start: float, end: float, before: bool) -> Step:
        i = 0 if before else -1
        where = "begins" if before else "ends"
        edge = self.starts[0] if before else self.ends[-1]
        warn_once(
            self._warned,
            where,
            f"{self.source} {where} at {show_time(edge)}; the time from {show_time(start)} is "
            f"charged at its {'first' if before else 'last'} value, {self.values[i]:g} "
            "(held; see summary.json grid.held_s)",
        )
        return Step(float(start), float(end), float(self.values[i]), True)

    def steps(self, start: float, end: float) -> list[Step]:
        end = max(start, end)
        first, last = self.span()
        if end == start:  # a point in time
            if not first <= start < last:
                return [self._held(start, start, start < first)]
            return [Step(start, start, float(self.values[self.index(start)]))]
        out: list[Step] = []
        if start < first:
            out.append(self._held(start, min(end, first), True))
        a, b = max(start, first), min(end, last)
        if b > a:
            i = self.index(a)
            j = self.index(b) if b < last else len(self.values) - 1
            for k in range(i, j + 1):
                s, e = max(a, float(self.starts[k])), min(b, float(self.ends[k]))
                if e > s:
                    out.append(Step(s, e, float(self.values[k])))
        if end > last:
            out.append(self._held(max(start, last), end, False))
        return out

    def forecast(self, at: float) -> Step:
        """The step containing ``at``, its value predicted from the rows before it (the README's method)."""
        i = self.index(at)
        if i < 0 or i >= len(self.values):
            return self.steps(at, at)[0]
        if self._forecaster is None:
            from zeus_plugins_grid.forecast import Forecaster

            self._forecaster = Forecaster(self.starts, self.values)
        return Step(float(self.starts[i]), float(self.ends[i]), self._forecaster.at(i))


# --------------------------------------------------------------------------- reading


_CACHE: dict[tuple, StepSeries] = {}


def read_csv(spec: str, request: SourceRequest) -> StepSeries:
    """The time series of CSV file ``spec`` (relative to the job's folder); ValueError naming the row."""
    path = Path(spec).expanduser()
    path = path if path.is_absolute() else request.job_dir / path
    try:
        st = path.stat()
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    limit = data_limit(CSV_LIMIT, CSV_LIMIT_ENV)  # a file read under a higher limit is refused under a lower one
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size, request.quantity, str(request.zone), request.max_gap_s, limit)
    got = _CACHE.get(key)
    if got is None:
        got = _CACHE[key] = parse_csv(path, request)
    # each job's warnings are its own
    return StepSeries(got.starts, got.ends, got.values, got.source)


def _column(header: list[str], names: tuple[str, ...]) -> int | None:
    low = [h.strip().lower() for h in header]
    return next((low.index(n) for n in names if n in low), None)


def parse_csv(path: Path, request: SourceRequest) -> StepSeries:
    name = path.name
    what = f"a {request.quantity.replace('_', ' ')} CSV"
    limit = data_limit(CSV_LIMIT, CSV_LIMIT_ENV)
    text = read_data_text(path, what=what, limit=limit, env=CSV_LIMIT_ENV)
    if not text.strip():
        raise ValueError(f"{name}: the file is empty; it needs a header row (Time,Carbon Intensity) and one row per step")
    header, data = csv_table(text, path, what=what, header_hint="a time and a value column (Time,Carbon Intensity)")
    t_col = _column(header, TIME_NAMES)
    t_col = 0 if t_col is None else t_col
    others = [i for i in range(len(header)) if i != t_col]
    v_col: int | None
    if len(others) == 1:
        v_col = others[0]
    else:
        v_col = _column(header, VALUE_NAMES.get(request.quantity, ("value",)))
        if v_col is None or v_col == t_col:
            raise ValueError(
                f"{name}: which column holds the {request.quantity}? The header has {header}; name one "
                f"{VALUE_NAMES.get(request.quantity, ('value',))[0]!r}, or keep only the time and one value column"
            )
    if not data:
        raise ValueError(f"{name}: no rows after the header")
    zone = request.zone
    times: list[float] = []
    values: list[float] = []
    naive_seen: int | None = None
    aware_seen: int | None = None
    prev_naive: datetime | None = None
    for line, r in data:
        text, raw = r[t_col].strip(), r[v_col].strip()
        t, naive = _time(text, zone, name, line, prev_naive)
        if not FIRST_TIME <= t < LAST_TIME:
            what = "not a finite number" if not math.isfinite(t) else "before 1900" if t < FIRST_TIME else "after 2200"
            raise ValueError(
                f"{name}:{line}: time {text!r} is {what}; a series' times are between 1900 and 2200 "
                "(Unix seconds, or ISO 8601 such as 2020-06-01T00:00:00Z)"
            )
        if naive is not None:
            naive_seen = naive_seen or line
            prev_naive = naive
        else:
            aware_seen = aware_seen or line
        if naive_seen and aware_seen:
            raise ValueError(
                f"{name}:{max(naive_seen, aware_seen)}: times with and without a zone are mixed (row "
                f"{min(naive_seen, aware_seen)} is the other kind); write every time the same way"
            )
        if not raw:
            raise ValueError(f"{name}:{line}: {request.quantity} '' is not a number (an empty value is a gap: fill it or remove the row)")
        if raw.lower() in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity", "+infinity"):
            raise ValueError(f"{name}:{line}: {request.quantity} is {raw}; every value must be a finite number")
        v = parse_number(raw, f"{name}:{line}: {request.quantity}", what=f"a {request.quantity.replace('_', ' ')}")
        if request.quantity == CARBON and v < 0:
            raise ValueError(f"{name}:{line}: carbon intensity {v:g} is negative; gCO2eq/kWh cannot be")
        problem = grid_bound_problem(request.quantity, v)
        if problem:
            raise ValueError(f"{name}:{line}: {request.quantity} {problem}")
        if times and t <= times[-1]:
            prev = data[len(times) - 1][0]
            what = "repeats" if t == times[-1] else "is earlier than"
            raise ValueError(
                f"{name}:{line}: time {text} {what} row {prev} ({show_time(times[-1])}); times must "
                "increase strictly (sort the file and remove duplicates)"
            )
        if times and t - times[-1] > request.max_gap_s:
            prev = data[len(times) - 1][0]
            raise ValueError(
                f"{name}:{line}: {(t - times[-1]) / 60:g} minutes after row {prev}, longer than "
                f"[grid] max_gap_s = {request.max_gap_s:g} s: fill the gap, or raise max_gap_s to let row "
                f"{prev}'s value hold until row {line}"
            )
        times.append(t)
        values.append(v)
    starts = np.array(times)
    step = float(np.median(np.diff(starts))) if len(starts) > 1 else 3600.0
    ends = np.append(starts[1:], starts[-1] + step)
    return StepSeries(starts, ends, np.array(values), f"csv:{path}")


def _time(text: str, zone, name: str, line: int, prev_naive: datetime | None) -> tuple[float, datetime | None]:
    """(Unix seconds, the naive wall-clock time or None) of one time cell."""
    try:
        return float(text), None  # Unix seconds
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{name}:{line}: time {text!r} is not ISO 8601 (2020-06-01 00:00:00, with an offset such as "
            "+01:00 or Z where the file has one) nor Unix seconds"
        ) from None
    if dt.tzinfo is not None:
        return dt.timestamp(), None
    if zone is None:
        raise ValueError(
            f"{name}:{line}: time {text!r} has no time zone: set [grid] timezone to the zone the file's "
            'times are in ("UTC", "Europe/Berlin", "+01:00"), or write times with an offset'
        )
    local = dt.replace(tzinfo=zone)
    t = local.timestamp()
    if datetime.fromtimestamp(t, zone).replace(tzinfo=None) != dt:
        raise ValueError(
            f"{name}:{line}: time {text} does not exist in {zone} (the clocks skip it when they go "
            'forward): are the file\'s times in another zone? set [grid] timezone ("UTC", "+01:00")'
        )
    if prev_naive is not None and dt <= prev_naive:  # the repeated hour after clocks go back: the later one
        later = dt.replace(tzinfo=zone, fold=1).timestamp()
        if later != t:
            return later, dt
    return t, dt

"""Choosing the power limit to hold from profiled ones: upstream Zeus's optimum selectors.

A profile is one :class:`PowerLimitMeasurement` per limit (its window's energy and time); a
selector returns the limit (W) to hold. Shared by every power policy that takes upstream's
``optimum_selector`` (the ``jit`` policy's upstream front end, the ``zeus`` compatibility
package); a user's own rule subclasses :class:`OptimumSelector`::

    class Coolest(OptimumSelector):
        def select(self, measurements):
            return min(m.power_limit for m in measurements)

The messages of the errors are upstream's, which scripts written for it may match.
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping

import attrs

from zeus_core.cost import zeus_cost
from zeus_core.datafiles import DataFileError, check_range, data_limit, json_document, read_data_text

#: The keys of one profiled power limit in a profile file (upstream's ``profile_path`` JSON, Zeus^2's
#: per-GPU profiles): ``{"power_limit": W, "energy": J, "time": s}`` of one profiling window.
MEASUREMENT_FIELDS = ("power_limit", "energy", "time")
#: The plausible largest value of each field of a profiled limit, with its unit and what it is: a value
#: past it is refused before any arithmetic on it could overflow.
MEASUREMENT_BOUNDS = {
    "power_limit": (1e4, "W", "a GPU's power limit"),
    "energy": (1e10, "J", "a profiling window's energy"),
    "time": (1e6, "s", "a profiling window's time"),
}


@attrs.frozen
class PowerLimitMeasurement:
    """One profiled limit: ``power_limit`` (W), and the ``energy`` (J) and ``time`` (s) of its window."""

    power_limit: int
    energy: float
    time: float


def check_measurement(record: object, at: str, *, milliwatts: bool = False) -> tuple[dict[str, float] | None, list[str]]:
    """One profiled limit read from a profile file: its fields as floats (None when it has a
    problem), and its problems, each a line beginning with ``at`` (the record's place, e.g. a
    JSON path): a missing field, a value that is not a finite number or past its plausible
    bound (:data:`MEASUREMENT_BOUNDS`), a power limit or time that is not positive, a negative
    energy. ``milliwatts``: the power limit is in mW (upstream Zeus's own profile files)."""
    if not isinstance(record, Mapping):
        return None, [f"{at}: expected an object with keys {', '.join(MEASUREMENT_FIELDS)}"]
    values: dict[str, float] = {}
    problems: list[str] = []
    for name in MEASUREMENT_FIELDS:
        if name not in record:
            problems.append(f"{at}: missing key {name!r}")
            continue
        value = record[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            shown = repr(value)
            shown = shown if len(shown) <= 60 else f"{shown[:40]}... ({len(shown)} characters)"
            problems.append(f"{at}.{name}: expected a number, got {shown}")
        elif isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
            problems.append(f"{at}.{name}: is {value}; re-profile this point or drop the record")
        else:
            high, unit, what = MEASUREMENT_BOUNDS[name]
            if name == "power_limit" and milliwatts:
                high, unit = high * 1000, "mW"
            try:
                values[name] = float(check_range(value, f"{at}.{name}", high=high, unit=unit, what=what))
            except DataFileError as e:
                problems.append(str(e))
    if problems:
        return None, problems
    if values["power_limit"] <= 0:
        return None, [f"{at}.power_limit: must be positive, got {values['power_limit']:g}"]
    if values["time"] <= 0:
        return None, [f"{at}.time: must be positive, got {values['time']:g}"]
    if values["energy"] < 0:
        return None, [f"{at}.energy: must not be negative, got {values['energy']:g}"]
    return values, []


def check_measurements(
    records: list[object], where: str, *, milliwatts: bool = False
) -> tuple[list[tuple[int, dict[str, float]]], list[str]]:
    """The profiled limits of one list of records (``where``: the list's place, e.g. a JSON path),
    each checked by :func:`check_measurement`, a limit listed twice refused: (index, fields) of
    every good record, and every problem."""
    measured: list[tuple[int, dict[str, float]]] = []
    problems: list[str] = []
    seen: set[float] = set()
    for i, record in enumerate(records):
        at = f"{where}[{i}]"
        values, found = check_measurement(record, at, milliwatts=milliwatts)
        problems += found
        if values is None:
            continue
        if values["power_limit"] in seen:
            problems.append(f"{at}.power_limit: {values['power_limit']:g} {'mW' if milliwatts else 'W'} appears twice in this list")
            continue
        seen.add(values["power_limit"])
        measured.append((i, values))
    return measured, problems


#: The largest power-limit profile file read, in bytes, unless :data:`POWER_PROFILE_LIMIT_ENV` (MiB)
#: raises it: one holds a record per profiled limit, a few KiB.
POWER_PROFILE_LIMIT = 4 << 20
POWER_PROFILE_LIMIT_ENV = "ZEUS_MAX_POWER_PROFILE_MB"


def read_power_profile(path: str | os.PathLike[str], *, milliwatts: bool = False) -> list[PowerLimitMeasurement]:
    """The profiled limits of upstream Zeus's power-limit profile file (``GlobalPowerLimitOptimizer``'s
    ``profile_path``: ``{"measurements": [{"power_limit", "energy", "time"}, ...]}``), read through the
    core's data-file reader (size limit, UTF-8, nesting) and checked record by record
    (:func:`check_measurement`); every problem at once in one :class:`~zeus_core.datafiles.DataFileError`
    that names the file and each record. ``milliwatts``: the limits are in mW (upstream's), else W."""
    limit = data_limit(POWER_PROFILE_LIMIT, POWER_PROFILE_LIMIT_ENV)
    text = read_data_text(path, what="a power-limit profile (JSON)", limit=limit, env=POWER_PROFILE_LIMIT_ENV)
    data = json_document(text, path, max_depth=4)
    records = data.get("measurements") if isinstance(data, dict) else None
    if not isinstance(records, list):
        raise DataFileError(
            f"{path}: expected an object with a list of measurements: "
            + '{"measurements": [{"power_limit": ..., "energy": J, "time": s}, ...]}'
        )
    if not records:
        raise DataFileError(f"{path}: $.measurements: no measurements")
    measured, problems = check_measurements(records, "$.measurements", milliwatts=milliwatts)
    rows: list[PowerLimitMeasurement] = []
    for i, values in measured:
        if not values["power_limit"].is_integer():
            problems.append(f"$.measurements[{i}].power_limit: {values['power_limit']:g} is not a whole number (limits are whole units)")
        else:
            rows.append(PowerLimitMeasurement(int(values["power_limit"]), values["energy"], values["time"]))
    if len(problems) == 1:
        raise DataFileError(f"{path}: {problems[0]}")
    if problems:
        raise DataFileError(f"{len(problems)} problems in {path}:\n" + "\n".join(f"  {path}: {e}" for e in problems))
    return rows


class OptimumSelector(ABC):
    """Chooses the limit to hold from the profiled ones (upstream's extension point)."""

    @abstractmethod
    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        """The optimal power limit (W) among ``measurements``."""


class Energy(OptimumSelector):
    """The limit whose window spent the least energy."""

    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        return min(measurements, key=lambda m: m.energy).power_limit


class Time(OptimumSelector):
    """The limit whose window was the shortest."""

    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        return min(measurements, key=lambda m: m.time).power_limit


class ZeusCost(OptimumSelector):
    """The limit of the least Zeus cost ``eta x energy + (1 - eta) x MAXPOWER x time``.

    MAXPOWER is the highest profiled limit times ``world_size``: the GPUs whose time the cost
    weighs (upstream's default 1: the one GPU of a rank under data parallelism).
    """

    def __init__(self, eta_knob: float = 0.5, world_size: int = 1) -> None:
        if not 0.0 <= eta_knob <= 1.0:
            raise ValueError("eta_knob must be between 0 and 1, inclusive both sides.")
        if world_size < 1:
            raise ValueError("world_size must be greater than or equal to 1.")
        self.eta_knob = float(eta_knob)
        self.world_size = int(world_size)

    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        top = max(m.power_limit for m in measurements) * self.world_size
        return min(measurements, key=lambda m: float(zeus_cost(m.energy, m.time, self.eta_knob, top))).power_limit


class MaxSlowdownConstraint(OptimumSelector):
    """The lowest limit whose window took at most ``factor`` x the time at the highest limit."""

    def __init__(self, factor: float) -> None:
        if not (isinstance(factor, (int, float)) and factor >= 1.0):
            raise ValueError(f"max_slowdown_factor must be greater than or equal to 1.0. Got {factor}.")
        self.factor = float(factor)

    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        fastest = max(measurements, key=lambda m: m.power_limit).time
        return min(m.power_limit for m in measurements if m.time <= self.factor * fastest)


__all__ = [
    "Energy",
    "MaxSlowdownConstraint",
    "OptimumSelector",
    "PowerLimitMeasurement",
    "Time",
    "ZeusCost",
    "check_measurements",
    "read_power_profile",
]

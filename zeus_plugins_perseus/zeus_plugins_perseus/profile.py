"""Reading instruction profiles: per (stage, instruction, SM clock), one microbatch's time and energy.

The CSV header names at least ``stage,instruction,frequency,time,energy`` (extra
columns, such as Zeus' ``rank,dp_rank,pp_rank,tp_rank``, are ignored, but for ``simulated``: the
simulated drivers a row was measured on, which the plan's report names). Every
bad value is reported with the file and its line number so that a user fixes the file
instead of guessing which of hundreds of rows broke the plan. The file is read through
the core's :mod:`zeus_core.datafiles`: UTF-8, at most :data:`PROFILE_LIMIT` bytes, every
row as wide as the header (a decimal comma is named), every number finite and within
:data:`BOUNDS`.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

import attrs
import numpy as np

from zeus_core.datafiles import csv_table, data_limit, parse_number, read_data_text

REQUIRED_COLUMNS = ("stage", "instruction", "frequency", "time", "energy")


class ProfileError(ValueError):
    """A profile that cannot be planned on; the message names the file, line and fix."""


@attrs.frozen
class InstructionOptions:
    """All measured clocks of one (stage, instruction): parallel arrays, fastest clock first."""

    stage: int
    instruction: str
    frequency: np.ndarray  # int MHz
    time: np.ndarray  # seconds per microbatch
    energy: np.ndarray  # joules per microbatch

    def at(self, frequency: int) -> tuple[float, float]:
        """(time, energy) measured at ``frequency``; KeyError if that clock was not profiled."""
        hit = np.flatnonzero(self.frequency == frequency)
        if hit.size == 0:
            raise KeyError(f"stage {self.stage} {self.instruction} was not profiled at {frequency} MHz")
        return float(self.time[hit[0]]), float(self.energy[hit[0]])


@attrs.frozen
class InstructionProfile:
    """A whole profile: ``options[(stage, instruction)]`` plus where it came from."""

    options: dict[tuple[int, str], InstructionOptions]
    source: str = "<memory>"
    #: the simulated drivers it was measured on (their variables, ``ZEUS_FAKE_NVML``); empty: real hardware,
    #: or not said (column ``simulated`` of the CSV, written only by a profile measured on one)
    simulated: tuple[str, ...] = ()

    @property
    def stages(self) -> list[int]:
        return sorted({s for s, _ in self.options})

    @property
    def instructions(self) -> list[str]:
        return sorted({i for _, i in self.options})

    def get(self, stage: int, instruction: str) -> InstructionOptions:
        try:
            return self.options[(stage, instruction)]
        except KeyError:
            raise ProfileError(
                f"{self.source}: no rows for stage {stage} instruction {instruction!r}; "
                f"the profile has stages {self.stages} and instructions {self.instructions}"
            ) from None

    def check_stages(self, stages: int, instructions: Iterable[str]) -> None:
        """Raise ProfileError unless every stage 0..stages-1 has every instruction and no more stages exist."""
        have = self.stages
        if have != list(range(len(have))):
            raise ProfileError(f"{self.source}: stages must be numbered 0..N-1, found {have}")
        if len(have) != stages:
            raise ProfileError(
                f"{self.source}: the profile has {len(have)} stage(s) but the job asks for {stages}; "
                f"set stages = {len(have)} or profile the {stages}-stage partitioning"
            )
        for s in range(stages):
            for inst in instructions:
                self.get(s, inst)

    @classmethod
    def from_rows(
        cls, rows: Iterable[tuple[int, str, int, float, float]], source: str = "<memory>", simulated: Iterable[str] = ()
    ) -> InstructionProfile:
        """Build from ``(stage, instruction, frequency, time, energy)`` tuples (already validated)."""
        groups: dict[tuple[int, str], list[tuple[int, float, float]]] = {}
        for stage, inst, freq, t, e in rows:
            groups.setdefault((int(stage), str(inst)), []).append((int(freq), float(t), float(e)))
        options = {}
        for key, items in groups.items():
            items.sort(key=lambda r: -r[0])
            arr = np.array(items, dtype=float)
            options[key] = InstructionOptions(
                stage=key[0],
                instruction=key[1],
                frequency=arr[:, 0].astype(int),
                time=arr[:, 1].copy(),
                energy=arr[:, 2].copy(),
            )
        return cls(options=options, source=source, simulated=tuple(sorted(set(simulated))))

    def to_csv(self, path: Path) -> Path:
        """Write in the reader's format (used by the online profiler)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        with tmp.open("w", newline="") as fh:
            w = csv.writer(fh)
            # a profile measured on a simulated driver says so on every row (rows of stages are merged by cat)
            extra = [" ".join(self.simulated)] if self.simulated else []
            w.writerow([*REQUIRED_COLUMNS, *(["simulated"] if extra else [])])
            for (stage, inst), o in sorted(self.options.items()):
                for f, t, e in zip(o.frequency, o.time, o.energy):
                    w.writerow([stage, inst, int(f), repr(float(t)), repr(float(e)), *extra])
        tmp.replace(path)
        return path


#: The largest profile read, in bytes, unless :data:`PROFILE_LIMIT_ENV` (MiB) raises it: the published
#: SOSP'24 profiles are at most 51 KiB.
PROFILE_LIMIT = 16 << 20
PROFILE_LIMIT_ENV = "ZEUS_MAX_PERSEUS_PROFILE_MB"
#: The plausible largest value of each column (unit, what it is): past it a value is refused, naming
#: the bound, before the planner's arithmetic on it could overflow.
BOUNDS = {
    "stage": (10_000, "", "a pipeline stage's index"),
    "frequency": (100_000, "MHz", "an SM clock"),
    "time": (3600.0, "s", "one microbatch's time"),
    "energy": (1e8, "J", "one microbatch's energy"),
}
#: The most time units (``unit_time_s``) one instruction's time may quantise to: the planner counts
#: in 64-bit integers of units over the whole pipeline.
MAX_TIME_UNITS = 1e9


def _number(text: str | None, column: str, where: str, integer: bool) -> float:
    high, unit, what = BOUNDS[column]
    value = parse_number(text, f"{where}: column {column!r}", integer=integer, high=high, unit=unit, what=what, error=ProfileError)
    if value < 0:
        raise ProfileError(f"{where}: column {column!r} is negative ({(text or '').strip()}); it must be >= 0")
    return value


def check_units(profile: InstructionProfile, unit_time_s: float) -> None:
    """Raise ProfileError when an instruction's time is more than :data:`MAX_TIME_UNITS` units of
    ``unit_time_s`` (the planner's integers would overflow), naming the instruction and the fix."""
    for (stage, inst), o in sorted(profile.options.items()):
        longest = float(o.time.max())
        if longest / unit_time_s > MAX_TIME_UNITS:
            raise ProfileError(
                f"{profile.source}: stage {stage} {inst} takes {longest:g} s, {longest / unit_time_s:.3g} units of "
                f"unit_time_s = {unit_time_s:g} s; the planner counts at most {MAX_TIME_UNITS:g} units per "
                f"instruction: raise unit_time_s to at least {longest / MAX_TIME_UNITS:.3g}"
            )


def read_profile(path: str | Path) -> InstructionProfile:
    """Read and validate a profile CSV; raise ProfileError naming the file and line of the first bad value."""
    path = Path(path)
    if not path.is_file():
        raise ProfileError(f"profile {str(path)!r} does not exist; give the path of a profile CSV")
    limit = data_limit(PROFILE_LIMIT, PROFILE_LIMIT_ENV, error=ProfileError)
    text = read_data_text(path, what="a Perseus profile CSV", limit=limit, env=PROFILE_LIMIT_ENV, error=ProfileError)
    header, table = csv_table(text, path, what="a Perseus profile CSV", header_hint=",".join(REQUIRED_COLUMNS), error=ProfileError)
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise ProfileError(f"{path}:1: header lacks column(s) {', '.join(missing)}; the header must include {','.join(REQUIRED_COLUMNS)}")
    index = {c: header.index(c) for c in REQUIRED_COLUMNS}
    simulated_at = header.index("simulated") if "simulated" in header else None
    simulated: set[str] = set()
    rows = []
    seen: dict[tuple[int, str, int], int] = {}
    for line, cells in table:
        row = {c: cells[i] for c, i in index.items()}
        where = f"{path}:{line}"
        stage = int(_number(row["stage"], "stage", where, integer=True))
        inst = row["instruction"].strip()
        if not inst:
            raise ProfileError(f"{where}: column 'instruction' is empty; use forward or backward")
        freq = int(_number(row["frequency"], "frequency", where, integer=True))
        t = _number(row["time"], "time", where, integer=False)
        e = _number(row["energy"], "energy", where, integer=False)
        if t == 0:
            raise ProfileError(f"{where}: column 'time' is 0; an instruction takes positive time")
        key = (stage, inst, freq)
        if key in seen:
            raise ProfileError(
                f"{where}: stage {stage} {inst} at {freq} MHz already appeared on line {seen[key]}; "
                "keep one row per (stage, instruction, frequency)"
            )
        seen[key] = line
        rows.append((stage, inst, freq, t, e))
        if simulated_at is not None:
            simulated.update(cells[simulated_at].split())
    if not rows:
        raise ProfileError(f"{path}: no data rows below the header")
    return InstructionProfile.from_rows(rows, source=str(path), simulated=simulated)

"""Reading instruction profiles: per (stage, instruction, SM clock), one microbatch's time and energy.

The CSV header names at least ``stage,instruction,frequency,time,energy`` (extra
columns, such as Zeus' ``rank,dp_rank,pp_rank,tp_rank``, are ignored). Every
bad value is reported with its line number so that a user fixes the file
instead of guessing which of hundreds of rows broke the plan.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from pathlib import Path

import attrs
import numpy as np

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
    def from_rows(cls, rows: Iterable[tuple[int, str, int, float, float]], source: str = "<memory>") -> InstructionProfile:
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
        return cls(options=options, source=source)

    def to_csv(self, path: Path) -> Path:
        """Write in the reader's format (used by the online profiler)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        with tmp.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(REQUIRED_COLUMNS)
            for (stage, inst), o in sorted(self.options.items()):
                for f, t, e in zip(o.frequency, o.time, o.energy):
                    w.writerow([stage, inst, int(f), repr(float(t)), repr(float(e))])
        tmp.replace(path)
        return path


def _number(text: str, column: str, where: str, integer: bool) -> float:
    text = (text or "").strip()
    if text == "":
        raise ProfileError(f"{where}: column {column!r} is empty; every row needs a {column}")
    try:
        value = float(text)
    except ValueError:
        raise ProfileError(f"{where}: column {column!r} is {text!r}, not a number") from None
    if math.isnan(value) or math.isinf(value):
        raise ProfileError(f"{where}: column {column!r} is {text!r}; it must be a finite number")
    if value < 0:
        raise ProfileError(f"{where}: column {column!r} is negative ({text}); it must be >= 0")
    if integer and value != int(value):
        raise ProfileError(f"{where}: column {column!r} is {text!r}; it must be a whole number")
    return value


def read_profile(path: str | Path) -> InstructionProfile:
    """Read and validate a profile CSV; raise ProfileError naming the line of the first bad value."""
    path = Path(path)
    if not path.is_file():
        raise ProfileError(f"profile {str(path)!r} does not exist; give the path of a profile CSV")
    rows = []
    seen: dict[tuple[int, str, int], int] = {}
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            raise ProfileError(
                f"{path}:1: header lacks column(s) {', '.join(missing)}; "
                f"the header must include {','.join(REQUIRED_COLUMNS)}"
            )
        reader.fieldnames = header
        for row in reader:
            where = f"{path}:{reader.line_num}"
            if None in row:
                raise ProfileError(f"{where}: more values than header columns")
            stage = int(_number(row["stage"], "stage", where, integer=True))
            inst = (row["instruction"] or "").strip()
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
            seen[key] = reader.line_num
            rows.append((stage, inst, freq, t, e))
    if not rows:
        raise ProfileError(f"{path}: no data rows below the header")
    return InstructionProfile.from_rows(rows, source=str(path))

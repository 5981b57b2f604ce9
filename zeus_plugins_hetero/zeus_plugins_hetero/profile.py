"""Time/energy profiles of one GPU type, in the published Zeus^2 JSON format.

The format is a JSON object keyed by the local batch size (as a string); each
value lists one record ``{"power_limit": W, "energy": J, "time": s}`` per
profiled power limit, and each record covers ``profile_steps`` consecutive
iterations. The step count is not in the file, so the caller supplies it; the
allocator divides by it to get per-iteration values.

Between profiled batch sizes the model interpolates piecewise-linearly, per
power limit. It never extrapolates: the published prototype fitted quadratics
and evaluated them up to 4x past the largest profiled batch, where they predict
negative or absurd power; a batch outside the profile is an error here.

Every problem in a file is reported at once, each with the file and a JSON key
path (``cifar_a10.json: $["64"][2].energy: ...``), so that a bad measurement can
be found and re-profiled without guessing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from zeus_core import write_atomic
from zeus_core.datafiles import data_limit, json_document, read_data_text
from zeus_core.selection import check_measurements

#: The largest profile file read, in bytes, unless :data:`PROFILE_LIMIT_ENV` (MiB) raises it: the
#: published ones are at most 2.5 KiB.
PROFILE_LIMIT = 4 << 20
PROFILE_LIMIT_ENV = "ZEUS_MAX_HETERO_PROFILE_MB"
#: How deep a profile's arrays and objects may nest (the format nests 3).
MAX_DEPTH = 8
#: The largest batch size a profile may name.
MAX_BATCH = 10_000_000


class HeteroError(ValueError):
    """Base of every error this plugin raises about its inputs."""


class ProfileError(HeteroError):
    """A profile file or table is malformed, or a lookup leaves its range."""


class Profile:
    """Per-window time and energy of one GPU type over batch sizes x power limits.

    ``time[i, j]`` and ``energy[i, j]`` are the window totals at
    ``batch_sizes[i]`` and ``power_limits[j]`` (every batch size is profiled at the
    same limits). ``profile_steps`` is the number of iterations in one window.
    """

    def __init__(
        self,
        batch_sizes: Sequence[int],
        power_limits: Sequence[float],
        time: np.ndarray,
        energy: np.ndarray,
        profile_steps: int,
        source: str = "<profile>",
    ) -> None:
        self.batch_sizes = np.asarray(batch_sizes, dtype=np.int64)
        self.power_limits = np.asarray(power_limits, dtype=float)
        self.time = np.asarray(time, dtype=float)
        self.energy = np.asarray(energy, dtype=float)
        self.profile_steps = int(profile_steps)
        self.source = source
        shape = (len(self.batch_sizes), len(self.power_limits))
        if self.time.shape != shape or self.energy.shape != shape:
            raise ProfileError(f"{source}: time and energy must have shape {shape}")
        if self.profile_steps < 1:
            raise ProfileError(f"{source}: profile_steps must be at least 1, got {profile_steps}")
        if len(self.batch_sizes) == 0 or len(self.power_limits) == 0:
            raise ProfileError(f"{source}: a profile needs at least one batch size and one power limit")
        if np.any(np.diff(self.batch_sizes) <= 0):
            raise ProfileError(f"{source}: batch sizes must be strictly increasing")

    # --- reading and writing the published format -----------------------------

    @classmethod
    def load(cls, path: str | Path, profile_steps: int) -> Profile:
        """Read a published-format JSON file; errors name the file and key path."""
        path = Path(path)
        if not path.exists():
            raise ProfileError(f"profile file not found: {path}")
        limit = data_limit(PROFILE_LIMIT, PROFILE_LIMIT_ENV, error=ProfileError)
        text = read_data_text(path, what="a profile (JSON)", limit=limit, env=PROFILE_LIMIT_ENV, error=ProfileError)
        data = json_document(text, path, max_depth=MAX_DEPTH, error=ProfileError)
        return cls.from_dict(data, profile_steps, source=str(path))

    @classmethod
    def from_dict(cls, data: object, profile_steps: int, source: str = "<profile>") -> Profile:
        """Validate a decoded published-format object and build a profile.

        Collects every problem before raising, one line each.
        """
        errors: list[str] = []
        if not isinstance(data, Mapping):
            raise ProfileError(f"{source}: $: expected an object keyed by batch size, got {type(data).__name__}")
        if not data:
            raise ProfileError(f"{source}: $: the profile has no batch sizes")
        rows: dict[int, dict[float, tuple[float, float]]] = {}
        for key, records in data.items():
            where = f"$[{json.dumps(key)}]"
            try:
                batch = int(key) if len(str(key)) <= 20 else 0
                if str(batch) != str(key).strip() or batch < 1:
                    raise ValueError
            except ValueError:
                errors.append(f"{where}: batch-size key must be a positive integer")
                continue
            if batch > MAX_BATCH:
                errors.append(f"{where}: batch size {batch} is above {MAX_BATCH:,}, the most a batch size can plausibly be")
                continue
            if batch in rows:
                errors.append(f"{where}: batch size {batch} appears twice")
                continue
            if not isinstance(records, list) or not records:
                errors.append(f"{where}: expected a non-empty list of {{power_limit, energy, time}} records")
                continue
            measured, problems = check_measurements(records, where)
            errors += problems
            rows[batch] = {values["power_limit"]: (values["time"], values["energy"]) for _, values in measured}
        if not errors:
            limit_sets = {b: set(row) for b, row in rows.items()}
            everywhere = set.union(*limit_sets.values())
            for b, present in limit_sets.items():
                missing = everywhere - present
                if missing:
                    errors.append(
                        f"$[{json.dumps(str(b))}]: no record for power limit(s) "
                        f"{', '.join(f'{p:g}' for p in sorted(missing))} W; profile every batch size "
                        "at the same power limits"
                    )
        if len(errors) == 1:
            raise ProfileError(f"{source}: {errors[0]}")
        if errors:
            raise ProfileError(f"{len(errors)} problems in profile {source}:\n" + "\n".join(f"  {source}: {e}" for e in errors))
        batches = sorted(rows)
        limits = sorted(rows[batches[0]], reverse=True)
        time = np.array([[rows[b][p][0] for p in limits] for b in batches])
        energy = np.array([[rows[b][p][1] for p in limits] for b in batches])
        return cls(batches, limits, time, energy, profile_steps, source=source)

    def to_dict(self) -> dict[str, list[dict[str, float]]]:
        """The published format (power limits highest first, as profiled)."""
        out: dict[str, list[dict[str, float]]] = {}
        for i, b in enumerate(self.batch_sizes):
            out[str(int(b))] = [
                {
                    "power_limit": _plain_number(p),
                    "energy": float(self.energy[i, j]),
                    "time": float(self.time[i, j]),
                }
                for j, p in enumerate(self.power_limits)
            ]
        return out

    def save(self, path: str | Path) -> Path:
        """Write the published format; the file appears whole or not at all."""
        path = Path(path)
        write_atomic(path, json.dumps(self.to_dict(), indent=1) + "\n")
        return path

    # --- the per-iteration model -----------------------------------------------

    @property
    def min_batch(self) -> int:
        return int(self.batch_sizes[0])

    @property
    def max_batch(self) -> int:
        return int(self.batch_sizes[-1])

    @property
    def max_power_limit(self) -> float:
        return float(self.power_limits.max())

    def per_iteration(self, batch_sizes: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-iteration (time, energy), each of shape (len(batch_sizes), n_limits).

        Piecewise-linear in the batch size between profiled sizes; a batch size
        outside the profiled range raises instead of extrapolating.
        """
        b = np.asarray(batch_sizes, dtype=float).reshape(-1)
        outside = b[(b < self.min_batch) | (b > self.max_batch)]
        if outside.size:
            if len(self.batch_sizes) == 1:
                raise ProfileError(
                    f"{self.source}: the profile has a single batch size ({self.min_batch}), so batch "
                    f"{int(outside[0])} would need interpolation; profile at least two batch sizes"
                )
            raise ProfileError(
                f"{self.source}: batch {int(outside[0])} is outside the profiled range "
                f"[{self.min_batch}, {self.max_batch}]; the model does not extrapolate"
            )
        xs = self.batch_sizes.astype(float)
        steps = float(self.profile_steps)
        t = np.empty((b.size, len(self.power_limits)))
        e = np.empty_like(t)
        for j in range(len(self.power_limits)):
            t[:, j] = np.interp(b, xs, self.time[:, j]) / steps
            e[:, j] = np.interp(b, xs, self.energy[:, j]) / steps
        return t, e

    def __repr__(self) -> str:
        return (
            f"Profile({self.source!r}, batches {self.min_batch}..{self.max_batch} "
            f"({len(self.batch_sizes)}), limits {[_plain_number(p) for p in self.power_limits]}, "
            f"profile_steps={self.profile_steps})"
        )


def _short(value: object) -> str:
    """``repr(value)``, cut to a length a message can show."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def _plain_number(x: float) -> int | float:
    """An integral float as int, so limits read back as ``300`` and not ``300.0``."""
    return int(x) if float(x).is_integer() else float(x)

"""Reading ``allocation.json``: which local batch and power limit each data-parallel rank runs.

An allocator (``[allocation] plugin = "hetero"``) writes the file; a
data-parallel workload (``[workload] plugin = "torch"`` with
``allocation = "..."``) trains by it. Both are plugins, and a plugin never
imports another, so the contract between them lives here in the core.

The file is a JSON object with either or both of:

* ``ranks``: one entry per rank, in rank order:
  ``{"rank": r, "gpu": "A10", "local_batch": 704, "power_limit": 150}``;
* ``gpus``: one entry per GPU type, expanded type by type into ranks:
  ``{"name": "A10", "count": 1, "local_batch": 704, "power_limit": 150}``;

and optionally ``global_batch_size``, which must equal the sum of the ranks'
local batches. When both lists are present they must describe the same ranks.
Every problem is reported at once, each with the file, its JSON path and the
fix, so that a job using a malformed file stops before anything runs.

Gradients of uneven local batches are weighted by the workload that trains by the plan.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_core.errors import BadInput

__all__ = ["AllocationError", "AllocationPlan", "RankPlan", "read_allocation"]

#: What to do when the file itself is unusable.
_REGENERATE = "write it with an allocator job (`zeus run <job with [allocation]> --output DIR` writes DIR/allocation.json)"


class AllocationError(BadInput):
    """``allocation.json`` is missing, malformed or does not fit the job (bad input: exit 2)."""


@dataclass(frozen=True)
class RankPlan:
    """What one rank runs under an allocation."""

    rank: int
    gpu: str
    local_batch: int
    power_limit: float
    global_batch: int
    offset: int  # where this rank's samples start inside a global batch

    @property
    def share(self) -> float:
        """This rank's weight in the global gradient: ``local_batch / global_batch``."""
        return self.local_batch / self.global_batch

    @property
    def batch_slice(self) -> slice:
        """This rank's samples of a global batch laid out rank after rank."""
        return slice(self.offset, self.offset + self.local_batch)

    @classmethod
    def from_allocation(cls, allocation: str | Path | dict, rank: int) -> RankPlan:
        """Read ``allocation.json`` (path or parsed) and take rank ``rank``'s entry."""
        return read_allocation(allocation).rank(rank)

    def check_device(self, devices: Any, device_name: str = "the device") -> None:
        """Raise :class:`AllocationError` unless ``devices`` can hold this rank's limit.

        Checked before anything is set, so a limit the device cannot take stops
        the job as bad input instead of failing mid-run.
        """
        if not callable(getattr(devices, "set_power_limit", None)):
            raise AllocationError(
                f"the allocation gives rank {self.rank} a power limit of {self.power_limit:g} W, but {device_name} "
                "cannot set power limits; use a device plugin that can (e.g. nvml)"
            )
        rng = getattr(devices, "power_limit_range", None)
        if callable(rng):
            lo, hi = rng()
            if not lo <= self.power_limit <= hi:
                raise AllocationError(
                    f"the allocation gives rank {self.rank} a power limit of {self.power_limit:g} W, outside the "
                    f"range [{lo:g}, {hi:g}] W of {device_name}; allocate with this GPU's profiled limits, or run "
                    "this rank on the GPU type the allocation was made for"
                )

    def apply_power_limit(self, devices: Any) -> None:
        """Set this rank's limit on its device group (a zeus device part with ``set_power_limit``).

        The device plugin journals the old value first and restores it on close.
        """
        setter = getattr(devices, "set_power_limit", None)
        if not callable(setter):
            raise AllocationError(f"the device group {type(devices).__name__} cannot set power limits")
        setter(self.power_limit)


@dataclass(frozen=True)
class AllocationPlan:
    """A whole allocation: every rank's plan, and where it came from."""

    source: str
    ranks: tuple[RankPlan, ...]

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def global_batch(self) -> int:
        return self.ranks[0].global_batch

    @property
    def local_batches(self) -> list[int]:
        return [r.local_batch for r in self.ranks]

    @property
    def power_limits(self) -> list[float]:
        return [r.power_limit for r in self.ranks]

    def rank(self, rank: int) -> RankPlan:
        if not 0 <= rank < len(self.ranks):
            raise AllocationError(
                f"rank {rank} is not in the allocation, which has {len(self.ranks)} GPUs (ranks 0..{len(self.ranks) - 1})"
            )
        return self.ranks[rank]

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.source,
            "global_batch_size": self.global_batch,
            "ranks": [{"rank": r.rank, "gpu": r.gpu, "local_batch": r.local_batch, "power_limit": r.power_limit} for r in self.ranks],
        }


def _path(parts: tuple) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


class _Reader:
    """Collects every problem of one file, each as ``$.path: what is wrong; the fix``."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def problem(self, path: tuple, message: str) -> None:
        self.problems.append(f"{_path(path)}: {message}")

    def positive_int(self, entry: dict, key: str, path: tuple) -> int | None:
        v = entry.get(key)
        if key not in entry:
            self.problem(path, f"missing {key!r}; every entry needs a positive integer {key!r}")
        elif isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            self.problem(path + (key,), f"must be a positive integer, got {v!r}")
        else:
            return v
        return None

    def power(self, entry: dict, path: tuple) -> float | None:
        v = entry.get("power_limit")
        if "power_limit" not in entry:
            self.problem(path, "missing 'power_limit'; every entry needs the power limit in watts")
        elif isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
            self.problem(path + ("power_limit",), f"must be a positive number of watts, got {v!r}")
        else:
            return float(v)
        return None

    def name(self, entry: dict, key: str, path: tuple) -> str:
        v = entry.get(key, "")
        if not isinstance(v, str):
            self.problem(path + (key,), f"must be a GPU name (string), got {v!r}")
            return ""
        return v

    def entries(self, data: dict, key: str) -> list | None:
        v = data.get(key)
        if v is None:
            return None
        if not isinstance(v, list) or not v:
            self.problem((key,), f"must be a non-empty list, got {json.dumps(v)[:60]}")
            return None
        return v

    def ranks(self, items: list) -> list[tuple[str, int | None, float | None]]:
        out: list[tuple[str, int | None, float | None]] = []
        for i, e in enumerate(items):
            if not isinstance(e, dict):
                self.problem(("ranks", i), f'must be an object {{"rank", "gpu", "local_batch", "power_limit"}}, got {e!r}')
                out.append(("", None, None))
                continue
            if "rank" in e and (isinstance(e["rank"], bool) or e["rank"] != i):
                self.problem(("ranks", i, "rank"), f"is {e['rank']!r}, expected {i}: list the ranks in order 0..{len(items) - 1}")
            gpu = self.name(e, "gpu", ("ranks", i))
            out.append((gpu, self.positive_int(e, "local_batch", ("ranks", i)), self.power(e, ("ranks", i))))
        return out

    def gpus(self, items: list) -> list[tuple[str, int | None, float | None]]:
        out = []
        for i, g in enumerate(items):
            if not isinstance(g, dict):
                self.problem(("gpus", i), f'must be an object {{"name", "count", "local_batch", "power_limit"}}, got {g!r}')
                continue
            name = self.name(g, "name", ("gpus", i))
            count = self.positive_int(g, "count", ("gpus", i))
            batch = self.positive_int(g, "local_batch", ("gpus", i))
            limit = self.power(g, ("gpus", i))
            out += [(name, batch, limit)] * (count or 0)
        return out


def read_allocation(allocation: str | Path | dict, source: str | None = None) -> AllocationPlan:
    """Read and check a whole allocation (a path to ``allocation.json``, or the parsed object).

    Raises :class:`AllocationError` naming the file, every bad field's JSON
    path and the fix; nothing is returned half-checked.
    """
    if isinstance(allocation, dict):
        data: Any = allocation
        source = source or "allocation"
    else:
        path = Path(allocation)
        source = source or str(path)
        if not path.is_file():
            what = "is a folder, not a file" if path.is_dir() else "does not exist"
            raise AllocationError(f"allocation file {source} {what}; fix the path, or {_REGENERATE}")
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise AllocationError(f"{source}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); {_REGENERATE}") from None
        except (OSError, UnicodeDecodeError) as e:
            raise AllocationError(f"allocation file {source} cannot be read: {e}") from None
    if not isinstance(data, dict):
        raise AllocationError(f'{source}: $: must be a JSON object with "ranks" or "gpus", got {type(data).__name__}')
    r = _Reader()
    rank_items, gpu_items = r.entries(data, "ranks"), r.entries(data, "gpus")
    if rank_items is None and gpu_items is None and not r.problems:
        r.problem(
            (),
            'has neither "ranks" (one entry per rank) nor "gpus" (one per GPU type with a count); '
            f"this is not an allocation; {_REGENERATE}",
        )
    from_ranks = r.ranks(rank_items) if rank_items is not None else None
    from_gpus = r.gpus(gpu_items) if gpu_items is not None else None
    if from_ranks is not None and from_gpus is not None and not r.problems:
        if len(from_ranks) != len(from_gpus):
            r.problem(
                ("ranks",),
                f"lists {len(from_ranks)} ranks but $.gpus counts {len(from_gpus)} GPUs; "
                "the two must describe the same ranks (regenerate the file)",
            )
        else:
            for i, (a, b) in enumerate(zip(from_ranks, from_gpus)):
                if (a[1], a[2]) != (b[1], b[2]) or (a[0] and b[0] and a[0] != b[0]):
                    r.problem(
                        ("ranks", i),
                        f"is {a[0] or '?'} batch {a[1]} at {a[2]:g} W but $.gpus gives rank {i} "
                        f"{b[0] or '?'} batch {b[1]} at {b[2]:g} W; the two must agree (regenerate the file)",
                    )
    entries = from_ranks if from_ranks is not None else from_gpus
    total = sum(e[1] or 0 for e in entries or [])
    declared = data.get("global_batch_size")
    if declared is not None and not r.problems:
        if isinstance(declared, bool) or not isinstance(declared, int) or declared <= 0:
            r.problem(("global_batch_size",), f"must be a positive integer, got {declared!r}")
        elif declared != total:
            r.problem(
                ("global_batch_size",),
                f"is {declared} but the ranks' local batches "
                f"{[e[1] for e in entries or []]} sum to {total}; fix either (regenerate the file)",
            )
    if r.problems:
        raise AllocationError(f"{source}: " + "; ".join(r.problems))
    plans, offset = [], 0
    for i, (gpu, batch, limit) in enumerate(entries or []):
        assert batch is not None and limit is not None  # every entry checked above
        plans.append(RankPlan(i, gpu, int(batch), float(limit), total, offset))
        offset += int(batch)
    return AllocationPlan(source, tuple(plans))

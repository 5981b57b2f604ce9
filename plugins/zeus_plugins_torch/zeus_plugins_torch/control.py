"""The control channel of a data-parallel job, and combining the ranks' measurements.

Every point where the ranks must agree begins with one broadcast from rank 0
(five float64 numbers: an operation and its arguments) over a gloo group of
its own, whatever backend the training uses; measurements travel by
``gather_object`` and the validation metric by an all-reduce (its mean).
"""

from __future__ import annotations

import math
import traceback
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from zeus_core.engine.ranks import combine_measurements

OP_END, OP_TRY, OP_EPOCH, OP_STOP, OP_ITER, OP_TRY_END = range(6)
_OP_NAMES = {OP_END: "END", OP_TRY: "TRY", OP_EPOCH: "EPOCH", OP_STOP: "STOP", OP_ITER: "ITER", OP_TRY_END: "TRY_END"}
STOP_CODES = {None: 0, "early-stop": 1, "max-epochs": 2, "never-ran": 3}
STOP_NAMES = {v: k for k, v in STOP_CODES.items()}

class ProtocolError(RuntimeError):
    """The ranks' training functions did not make the same calls."""


def try_seed(job_seed: int, recurrence: int, try_index: int) -> int:
    """One seed per try, the same on every rank."""
    return (int(job_seed) * 1_000_003 + int(recurrence) * 1_009 + int(try_index)) % (2**63)


#: All ranks' measurements of one window as one: energy summed, time of the slowest
#: (the core's rule, :func:`zeus_core.engine.ranks.combine_measurements`, shared with the script optimizers).
combine = combine_measurements


class Control:
    """Broadcasts from rank 0, gathers to rank 0, and a mean, over one gloo group."""

    def __init__(self, group: Any, rank: int, world_size: int) -> None:
        self.group = group
        self.rank = rank
        self.world_size = world_size
        self._buf = torch.zeros(5, dtype=torch.float64)

    def send(self, op: int, a: int = 0, b: int = 0, c: int = 0, limit: float | None = None) -> None:
        self._buf.copy_(torch.tensor([op, a, b, c, math.nan if limit is None else float(limit)], dtype=torch.float64))
        dist.broadcast(self._buf, src=0, group=self.group)

    def recv(self, *expected: int) -> tuple[int, int, int, int, float | None]:
        dist.broadcast(self._buf, src=0, group=self.group)
        op, a, b, c, limit = self._buf.tolist()
        op = int(op)
        if expected and op not in expected:
            want = " or ".join(_OP_NAMES[e] for e in expected)
            raise ProtocolError(
                f"rank {self.rank} expected {want} from rank 0 but got {_OP_NAMES.get(op, op)}: the ranks' training "
                "functions diverged; call epochs(), iterate() and report_metric() the same number of times on every rank"
            )
        return op, int(a), int(b), int(c), None if math.isnan(limit) else float(limit)

    def gather(self, obj: Any) -> list[Any] | None:
        out = [None] * self.world_size if self.rank == 0 else None
        dist.gather_object(obj, out, dst=0, group=self.group)
        return out

    def mean(self, value: float) -> float:
        t = torch.tensor([float(value)], dtype=torch.float64)
        dist.all_reduce(t, group=self.group)
        return float(t.item()) / self.world_size


def is_lost_contact(e: BaseException) -> bool:
    """Whether ``e`` only says that another rank went away (not the first failure)."""
    if isinstance(e, ProtocolError):
        return False
    dist_error = getattr(dist, "DistError", None)
    if dist_error is not None and isinstance(e, dist_error):
        return True
    text = str(e).lower()
    return any(s in text for s in ("connection closed", "connection reset", "broken pipe", "gloo", "timed out"))


def describe(e: BaseException) -> str:
    """``Type: message (at file:line)``, the line being the innermost frame of the error."""
    tb = traceback.extract_tb(e.__traceback__) if e.__traceback__ else []
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    return f"{type(e).__name__}: {e}{where}"

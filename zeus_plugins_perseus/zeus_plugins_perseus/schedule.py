"""Pipeline schedules as dependency DAGs of (stage, instruction, microbatch) operations.

A schedule is only the per-stage order of instructions; the DAG follows from
it: program order on each stage, a forward of microbatch j flows from stage s
to s+1, its backward from s+1 back to s. Adding a schedule is adding a function
that returns per-stage orders, so the planner never hard-codes a pipeline shape.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

import attrs
import numpy as np

from zeus_plugins_perseus.options import SCHEDULE_NAMES

FORWARD = "forward"
BACKWARD = "backward"


@attrs.frozen
class Op:
    stage: int
    instruction: str
    microbatch: int

    @property
    def label(self) -> str:
        return f"{self.instruction[0].upper()}{self.microbatch}"


@attrs.frozen
class DagLevels:
    """The DAG cut into antichains, for passes that handle many operations per numpy call.

    ``levels[k]`` holds the ops whose longest chain of predecessors has ``k``
    edges, so no edge joins two ops of one level. A pass over the levels in
    order (or in reverse) therefore finds every predecessor (successor) of an
    op done before the op, exactly as a topological order does, and it does
    all ops of a level at once: about ``2 (stages + microbatches)`` numpy steps
    instead of ``2 stages microbatches`` Python ones. Each op reads the same
    neighbours with the same float operations as in the op-by-op pass, so the
    results are identical to the bit. ``preds[v]`` / ``succs[v]`` list an op's
    neighbours padded with ``n_ops``: the pass gives that extra column a value
    that cannot win the max or min (``0.0`` for finish times, ``inf`` for latest
    finishes).
    """

    levels: tuple[np.ndarray, ...]
    preds: np.ndarray  # int64 [op, max in-degree], padded with n_ops
    succs: np.ndarray  # int64 [op, max out-degree], padded with n_ops
    has_preds: np.ndarray  # bool [op]
    has_succs: np.ndarray  # bool [op]


def _padded(lists: list[list[int]], pad: int) -> np.ndarray:
    width = max((len(x) for x in lists), default=0) or 1
    out = np.full((len(lists), width), pad, dtype=np.int64)
    for i, x in enumerate(lists):
        out[i, : len(x)] = x
    return out


@attrs.frozen
class PipelineDAG:
    """Operations (stage-major, in execution order per stage) and (before, after) edges."""

    schedule: str
    stages: int
    microbatches: int
    ops: tuple[Op, ...]
    edges: np.ndarray  # shape (E, 2), int64

    @property
    def n_ops(self) -> int:
        return len(self.ops)

    def stage_ops(self, stage: int) -> list[int]:
        """Indices of the stage's operations in execution order."""
        return [i for i, op in enumerate(self.ops) if op.stage == stage]

    def index(self) -> dict[tuple[int, str, int], int]:
        return {(o.stage, o.instruction, o.microbatch): i for i, o in enumerate(self.ops)}

    def neighbours(self) -> tuple[list[list[int]], list[list[int]]]:
        """(predecessors, successors) of every op, from the edges."""
        preds: list[list[int]] = [[] for _ in range(self.n_ops)]
        succs: list[list[int]] = [[] for _ in range(self.n_ops)]
        for a, b in self.edges.tolist():
            preds[b].append(a)
            succs[a].append(b)
        return preds, succs

    @cached_property
    def levels(self) -> DagLevels:
        """The DAG as antichains (:class:`DagLevels`), computed once per DAG.

        ValueError if the edges have a cycle (no schedule built here has one).
        """
        preds, succs = self.neighbours()
        n = self.n_ops
        indeg = [len(p) for p in preds]
        level = [0] * n
        ready = [v for v in range(n) if indeg[v] == 0]
        seen = 0
        while ready:
            v = ready.pop()
            seen += 1
            for w in succs[v]:
                level[w] = max(level[w], level[v] + 1)
                indeg[w] -= 1
                if indeg[w] == 0:
                    ready.append(w)
        if seen != n:
            raise ValueError("the dependency graph has a cycle (the schedule deadlocks)")
        lv = np.asarray(level, dtype=np.int64)
        order = np.argsort(lv, kind="stable")
        bounds = np.searchsorted(lv[order], np.arange(int(lv.max(initial=-1)) + 2))
        return DagLevels(
            levels=tuple(order[bounds[k]:bounds[k + 1]] for k in range(len(bounds) - 1)),
            preds=_padded(preds, n),
            succs=_padded(succs, n),
            has_preds=np.array([bool(p) for p in preds], dtype=bool),
            has_succs=np.array([bool(x) for x in succs], dtype=bool),
        )


def one_f_one_b_order(stages: int, microbatches: int, stage: int) -> list[tuple[str, int]]:
    """Synchronous 1F1B: warm-up forwards, then backward/forward pairs, then cool-down backwards."""
    warmup = min(stages - stage, microbatches)
    order = [(FORWARD, j) for j in range(warmup)]
    for k in range(microbatches - warmup):
        order += [(BACKWARD, k), (FORWARD, warmup + k)]
    order += [(BACKWARD, j) for j in range(microbatches - warmup, microbatches)]
    return order


def gpipe_order(stages: int, microbatches: int, stage: int) -> list[tuple[str, int]]:
    """GPipe: every forward, then every backward, last microbatch first (as autograd unwinds them)."""
    return [(FORWARD, j) for j in range(microbatches)] + [(BACKWARD, j) for j in reversed(range(microbatches))]


def gpipe_fifo_order(stages: int, microbatches: int, stage: int) -> list[tuple[str, int]]:
    """GPipe with backwards first microbatch first: the order ``torch.distributed.pipelining.ScheduleGPipe`` runs."""
    return [(FORWARD, j) for j in range(microbatches)] + [(BACKWARD, j) for j in range(microbatches)]


SCHEDULES: dict[str, Callable[[int, int, int], list[tuple[str, int]]]] = {
    "1f1b": one_f_one_b_order,  # also torch.distributed.pipelining's Schedule1F1B
    "gpipe": gpipe_order,
    "gpipe-fifo": gpipe_fifo_order,
}
assert tuple(SCHEDULES) == SCHEDULE_NAMES, "options.SCHEDULE_NAMES must list the schedules defined here"


def build_dag(schedule: str, stages: int, microbatches: int) -> PipelineDAG:
    """The DAG of ``schedule`` for ``stages`` x ``microbatches``; ValueError on unknown names or sizes."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {sorted(SCHEDULES)}, got {schedule!r}")
    if stages < 1 or microbatches < 1:
        raise ValueError(f"stages and microbatches must be >= 1, got {stages} and {microbatches}")
    order_of = SCHEDULES[schedule]
    ops: list[Op] = []
    edges: list[tuple[int, int]] = []
    for s in range(stages):
        first = len(ops)
        ops += [Op(s, inst, j) for inst, j in order_of(stages, microbatches, s)]
        edges += [(i, i + 1) for i in range(first, len(ops) - 1)]
    at = {(o.stage, o.instruction, o.microbatch): i for i, o in enumerate(ops)}
    for s in range(stages - 1):
        for j in range(microbatches):
            edges.append((at[(s, FORWARD, j)], at[(s + 1, FORWARD, j)]))
            edges.append((at[(s + 1, BACKWARD, j)], at[(s, BACKWARD, j)]))
    return PipelineDAG(
        schedule=schedule,
        stages=stages,
        microbatches=microbatches,
        ops=tuple(ops),
        edges=np.asarray(edges, dtype=np.int64).reshape(-1, 2),
    )

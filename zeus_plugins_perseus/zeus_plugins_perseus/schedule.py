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

from zeus_plugins_perseus.dag_times import DagLevels, dag_levels, neighbours
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
        return neighbours(self.n_ops, self.edges)

    @cached_property
    def levels(self) -> DagLevels:
        """The DAG as antichains (:class:`~zeus_plugins_perseus.dag_times.DagLevels`), computed once per DAG.

        :class:`~zeus_plugins_perseus.dag_times.CycleError` (a ValueError) if the edges have a cycle
        (no schedule built here has one).
        """
        return dag_levels(self.n_ops, self.edges)


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

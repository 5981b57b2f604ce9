"""Earliest and latest finish times of the operations of a DAG: the one set of passes every module uses.

The emulator (iteration time of a plan), the real-time plans (repair and
float), slack reclamation, the frontier solver (initial event times) and the
figures all walk a dependency DAG in one of two directions:

* forward: an op starts when its last predecessor finishes (``0`` without
  predecessors) and finishes its time later;
* backward: an op must finish by the earliest latest start of its successors
  (``limit`` without successors), and its latest start is that minus its time.

:class:`DagLevels` cuts the DAG into antichains (ops whose longest chain of
predecessors has ``k`` edges), so no edge joins two ops of one level: a pass
over the levels handles a whole level per numpy call, about ``2 (stages +
microbatches)`` steps for a pipeline. Times may be one plan (``times[op]``) or
many (``times[op, plan]``, op-major so that a level's rows are gathered whole);
integer times give integer event times. Each op reads its neighbours with the
same float operations as a walk in topological order would, so the results do
not depend on which order or how many plans at once.

A pass can also change the times as it goes (slack reclamation does): a
``visit(ops, bound)`` callback gets each level's earliest starts (forward) or
latest finishes (backward) before the level's own times are read.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence

import attrs
import numpy as np


class CycleError(ValueError):
    """The edges have a cycle: no order runs every op after its predecessors (a schedule that deadlocks)."""


def neighbours(n: int, edges) -> tuple[list[list[int]], list[list[int]]]:
    """(predecessors, successors) of every op ``0..n-1`` from ``(before, after)`` edges."""
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for a, b in np.asarray(edges, dtype=np.int64).reshape(-1, 2).tolist():
        preds[b].append(a)
        succs[a].append(b)
    return preds, succs


def topological_order(n: int, edges) -> list[int]:
    """Kahn's algorithm; :class:`CycleError` naming an op on a cycle."""
    _, succs = neighbours(n, edges)
    order, _ = _kahn(n, succs)
    return order


def _kahn(n: int, succs: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """(topological order, level of each op: edges on its longest chain of predecessors)."""
    indeg = [0] * n
    for ws in succs:
        for w in ws:
            indeg[w] += 1
    level = [0] * n
    ready = [v for v in range(n) if indeg[v] == 0]
    order = []
    while ready:
        v = ready.pop()
        order.append(v)
        for w in succs[v]:
            level[w] = max(level[w], level[v] + 1)
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    if len(order) != n:
        stuck = next(v for v in range(n) if indeg[v] > 0)
        raise CycleError(f"the dependency graph has a cycle through operation {stuck} (the schedule deadlocks)")
    return order, level


@attrs.frozen
class DagLevels:
    """The DAG as antichains, with padded neighbour tables for the vectorised passes.

    ``levels[k]`` holds the ops whose longest chain of predecessors has ``k``
    edges. ``preds[v]`` / ``succs[v]`` list an op's neighbours padded with
    ``n_ops``: the passes keep an extra row there whose value never wins
    (``0`` for finish times, ``inf`` for latest starts).
    """

    n_ops: int
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


def dag_levels(n: int, edges) -> DagLevels:
    """:class:`DagLevels` of ops ``0..n-1`` and ``(before, after)`` edges; :class:`CycleError` on a cycle."""
    preds, succs = neighbours(n, edges)
    _, level = _kahn(n, succs)
    lv = np.asarray(level, dtype=np.int64)
    order = np.argsort(lv, kind="stable")
    bounds = np.searchsorted(lv[order], np.arange(int(lv.max(initial=-1)) + 2))
    return DagLevels(
        n_ops=n,
        levels=tuple(order[bounds[k] : bounds[k + 1]] for k in range(len(bounds) - 1)),
        preds=_padded(preds, n),
        succs=_padded(succs, n),
        has_preds=np.array([bool(p) for p in preds], dtype=bool),
        has_succs=np.array([bool(x) for x in succs], dtype=bool),
    )


Visit = Callable[[np.ndarray, np.ndarray], None]


def earliest_finish(lv: DagLevels, times: np.ndarray, visit: Visit | None = None) -> np.ndarray:
    """Earliest finish of every op (``[op]`` or ``[op, plan]`` like ``times``), plus a padding row of 0.

    ``visit(ops, starts)``, if given, sees each level's earliest starts before
    its times are read, and may change ``times[ops]``.
    """
    n = lv.n_ops
    ef = np.zeros((n + 1,) + times.shape[1:], dtype=times.dtype)
    for ops in lv.levels:
        es = ef[lv.preds[ops]].max(axis=1)
        if visit is not None:
            visit(ops, es)
        ef[ops] = es + times[ops]
    return ef


def latest_finish(lv: DagLevels, times: np.ndarray, limit, visit: Visit | None = None) -> np.ndarray:
    """Latest finish of every op against ``limit`` (scalar or per plan), plus a padding row of inf.

    ``visit(ops, finishes)``, if given, sees each level's latest finishes
    before its times are read, and may change ``times[ops]``.
    """
    n = lv.n_ops
    shape = (n + 1,) + times.shape[1:]
    ls = np.empty(shape)  # latest starts
    ls[n] = np.inf
    lf = np.empty(shape)
    lf[n] = np.inf
    tail = (slice(None),) + (None,) * (times.ndim - 1)
    for ops in reversed(lv.levels):
        f = np.where(lv.has_succs[ops][tail], ls[lv.succs[ops]].min(axis=1), limit)
        if visit is not None:
            visit(ops, f)
        lf[ops] = f
        ls[ops] = f - times[ops]
    return lf


def earliest_times(lv: DagLevels, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(earliest start, earliest finish) of every op, no padding row."""
    start = np.zeros_like(times)

    def record(ops, es):
        start[ops] = es

    return start, earliest_finish(lv, times, record)[: lv.n_ops]


def iteration_time(lv: DagLevels, times: np.ndarray) -> np.ndarray:
    """The critical path: latest earliest finish (one number, or one per plan column)."""
    return earliest_finish(lv, times)[: lv.n_ops].max(axis=0)


def longest_path(n: int, edges, durations) -> float:
    """Critical path length of a node-weighted DAG (any numeric durations; 0 without ops)."""
    if n == 0:
        return 0
    return iteration_time(dag_levels(n, edges), np.asarray(durations)).item()


_OP_BITS = 24
_OP_MASK = (1 << _OP_BITS) - 1


class DagLinks:
    """A DAG's neighbours as Python lists and its level order as integer heap keys, for scalar walks.

    Built once per DAG and shared by every :class:`FloatTimeline` on it.
    """

    def __init__(self, lv: DagLevels) -> None:
        n = lv.n_ops
        if n > _OP_MASK:  # pragma: no cover - far above any pipeline the planner accepts
            raise ValueError(f"{n} ops: at most {_OP_MASK}")
        self.lv = lv
        self.preds = [[p for p in row if p != n] for row in lv.preds.tolist()]
        self.succs = [[s for s in row if s != n] for row in lv.succs.tolist()]
        level = [0] * n
        for k, ops in enumerate(lv.levels):
            for v in ops.tolist():
                level[v] = k
        top = len(lv.levels)
        # a heap of these pops ops level by level (forward, then backward), each op's copies in a row
        self.fkey = [(level[v] << _OP_BITS) | v for v in range(n)]
        self.bkey = [((top - level[v]) << _OP_BITS) | v for v in range(n)]


class FloatTimeline:
    """One plan's earliest and latest finish times against ``limit``, kept exact while op times change one at a time.

    A greedy pass changes one op's time per step; recomputing both passes over
    every level after each step costs about ``4 (stages + microbatches)`` numpy
    calls, while a step moves the finish times of a part of the ops only. Here a
    change is propagated from the op along its successors (earliest finishes)
    and its predecessors (latest starts), in level order, to the neighbours whose
    value it can move: a successor whose earliest start (the largest finish of
    its predecessors) the old or the new finish equals or exceeds, a predecessor
    whose latest finish (the smallest latest start of its successors) the old or
    the new latest start equals or undercuts. Each value is computed by the same
    float operations as :func:`earliest_finish` and :func:`latest_finish` from
    the same neighbours, so the times are bit for bit what a full pass would give.
    """

    def __init__(self, links: DagLinks, times: np.ndarray | Sequence[float], limit: float) -> None:
        lv = links.lv
        n = lv.n_ops
        self.limit = float(limit)
        t = np.asarray(times, dtype=float)
        self.t = t.tolist()
        es, ef = earliest_times(lv, t)
        lf = latest_finish(lv, t, limit)[:n]
        self.es, self.ef, self.lf = es.tolist(), ef.tolist(), lf.tolist()
        self.ls = (lf - t).tolist()
        self.links = links

    def slack(self, op: int) -> float:
        """What ``op`` may grow by without any op finishing after the limit (its latest minus earliest finish)."""
        return self.lf[op] - self.ef[op]

    def set_time(self, op: int, time: float) -> bool:
        """Give ``op`` the time ``time`` unless a longer time makes an op finish after the limit (then change
        nothing and return False)."""
        t, es, ef, lf, ls = self.t, self.es, self.ef, self.lf, self.ls
        links = self.links
        preds, succs, fkey, bkey = links.preds, links.succs, links.fkey, links.bkey
        limit = self.limit
        old_t = t[op]
        t[op] = time
        check = time > old_t
        undo: list[tuple[int, float, float]] = []
        pop, push = heapq.heappop, heapq.heappush
        heap = [fkey[op]]
        last = -1
        while heap:  # earliest finishes, forward
            k = pop(heap)
            if k == last:
                continue
            last = k
            v = k & _OP_MASK
            start = 0.0
            for p in preds[v]:
                if ef[p] > start:
                    start = ef[p]
            new = start + t[v]
            old = ef[v]
            if start != es[v] or new != old:
                undo.append((v, old, es[v]))
                es[v] = start
            if new == old:
                continue
            ef[v] = new
            if check and new > limit:
                t[op] = old_t
                for u, x, y in reversed(undo):
                    ef[u], es[u] = x, y
                return False
            for w in succs[v]:
                if new > es[w] or old == es[w]:
                    push(heap, fkey[w])
        old = ls[op]
        new = ls[op] = lf[op] - time
        heap = [bkey[p] for p in preds[op] if new < lf[p] or old == lf[p]]
        heapq.heapify(heap)
        last = -1
        while heap:  # latest finishes, backward
            k = pop(heap)
            if k == last:
                continue
            last = k
            v = k & _OP_MASK
            finish = math.inf
            for w in succs[v]:
                if ls[w] < finish:
                    finish = ls[w]
            if finish == lf[v]:
                continue
            lf[v] = finish
            old = ls[v]
            new = ls[v] = finish - t[v]
            for p in preds[v]:
                if new < lf[p] or old == lf[p]:
                    push(heap, bkey[p])
        return True

    def end(self) -> float:
        """The iteration time: the latest earliest finish."""
        return max(self.ef)

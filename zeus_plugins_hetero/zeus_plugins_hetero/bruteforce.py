"""Exhaustive enumeration of every allocation: the reference the exact solver is checked against.

It shares nothing with :mod:`zeus_plugins_hetero.solver` but the step model's
inputs (the interpolated tables), so an error in the threshold search or the DP
shows up as a different optimum. Only for small cases: its size is the number of
batch splits times the product of the power-limit counts.
"""

from __future__ import annotations

import itertools

import numpy as np

from zeus_plugins_hetero.model import Allocation, InfeasibleError, Problem, evaluate
from zeus_plugins_hetero.solver import SLOWDOWN_RTOL


def count_allocations(problem: Problem) -> int:
    """How many (batch split, limit tuple) allocations the model admits (counted by DP, not listed)."""
    ways = {0: 1}
    for k, gpu in enumerate(problem.gpus):
        nxt: dict[int, int] = {}
        for partial, n in ways.items():
            for b in problem.grid(k).tolist():
                s = partial + gpu.count * b
                if s <= problem.global_batch:
                    nxt[s] = nxt.get(s, 0) + n
        ways = nxt
    limits = int(np.prod([len(g.profile.power_limits) for g in problem.gpus]))
    return ways.get(problem.global_batch, 0) * limits


def enumerate_optimum(problem: Problem) -> Allocation:
    """The best allocation found by trying every batch split and every limit tuple."""
    tables = [problem.table(k) for k in range(len(problem.gpus))]
    counts = [g.count for g in problem.gpus]
    K = len(tables)
    # Every combination of grid indices of the first K-1 types; the last type's batch is implied.
    combos = list(itertools.product(*[range(t.batches.size) for t in tables[:-1]]))
    heads = np.array(combos, dtype=np.int64).reshape(len(combos), K - 1)
    used = sum(counts[k] * tables[k].batches[heads[:, k]] for k in range(K - 1)) if K > 1 else 0
    rest = problem.global_batch - np.asarray(used)
    last = tables[-1].batches
    idx = np.searchsorted(last, rest // counts[-1])
    idx = np.clip(idx, 0, last.size - 1)
    ok = (rest % counts[-1] == 0) & (last[idx] * counts[-1] == rest)
    ok = np.broadcast_to(ok, (heads.shape[0],))
    splits = np.column_stack([heads[ok], np.broadcast_to(idx, (heads.shape[0],))[ok]])
    if splits.shape[0] == 0:
        raise InfeasibleError(f"no split reaches global_batch_size {problem.global_batch}")

    idle = np.array([g.idle_power_w for g in problem.gpus])
    n = np.array(counts, dtype=float)
    limit_tuples = list(itertools.product(*[range(t.limits.size) for t in tables]))

    def step_and_energy(limit_idx):
        t = np.column_stack([tables[k].time[splits[:, k], limit_idx[k]] for k in range(K)])
        e = np.column_stack([tables[k].energy[splits[:, k], limit_idx[k]] for k in range(K)])
        step = t.max(axis=1) + problem.allreduce_time_s
        return step, (n * (e + idle * (step[:, None] - t))).sum(axis=1)

    # One limit tuple at a time keeps memory at one array per split, whatever the size.
    if problem.objective == "min-energy":
        fastest = min(float(step_and_energy(lt)[0].min()) for lt in limit_tuples)
        bound = problem.max_slowdown * fastest * (1 + SLOWDOWN_RTOL)
    best: tuple[float, tuple[int, ...] | None, int] = (np.inf, None, -1)
    for lt in limit_tuples:
        step, energy = step_and_energy(lt)
        if problem.objective == "zeus-cost":
            values = problem.eta * energy + (1 - problem.eta) * problem.max_power_w * step
        else:
            values = np.where(step <= bound, energy, np.inf)
        i = int(np.argmin(values))
        if values[i] < best[0]:
            best = (float(values[i]), lt, i)
    _, limit_idx, i = best
    assert limit_idx is not None  # the fastest split meets every bound: some value is finite
    batches = [int(tables[k].batches[splits[i, k]]) for k in range(K)]
    limits = [float(tables[k].limits[limit_idx[k]]) for k in range(K)]
    return evaluate(problem, batches, limits, method="exhaustive enumeration")

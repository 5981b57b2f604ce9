"""The exact optimiser of the step model: a threshold search over step times.

Write tau = max_k t_k for the compute makespan. Both objectives then split into a
part that is separable over types and a part that depends on tau alone::

    objective = sum_k w * n_k * (e_k - idle_k * t_k)  +  coef * (tau + allreduce)

with (w, coef) = (eta, eta * sum_k n_k idle_k + (1 - eta) * MAXPOWER) for the Zeus
cost and (1, sum_k n_k idle_k) for energy. For a fixed threshold tau, the best
allocation with every t_k <= tau is a multiple-choice knapsack over batch units
(each type picks one batch on its grid and, at that batch, its cheapest limit
whose time fits under tau), solved exactly by dynamic programming. The optimum's
makespan is one of the profiled-and-interpolated times, so taking the minimum
over those candidates is exact, not heuristic.

Two things keep it fast: the DP runs for a whole block of thresholds at once in
numpy, and thresholds are visited from the smallest up and pruned with the lower
bound S_min + coef * (tau + allreduce) (S_min: the separable minimum with no time
limit), which stops the search as soon as no slower step can win.
"""

from __future__ import annotations

import math
import time as _time
from dataclasses import dataclass

import numpy as np

from zeus_plugins_hetero.model import Allocation, InfeasibleError, Problem, TypeTable, evaluate

#: Relative slack on the min-energy time bound so that the fastest allocation
#: itself never fails it through rounding (also used by the brute force).
SLOWDOWN_RTOL = 1e-9

#: Target number of floats in one block of the vectorised DP.
_BLOCK_ELEMENTS = 1 << 21


@dataclass
class _Prepared:
    tables: list[TypeTable]
    positions: list[np.ndarray]  # (m_k,) count_k * batch / unit
    sep: list[np.ndarray]  # (m_k, q_k) separable cost per option
    total: int  # global batch / unit
    rest_min: list[int]  # sum of the smallest positions of the types after k
    rest_max: list[int]


Restriction = dict  # type index -> (batches or None, limits or None)


def _prepare(problem: Problem, weight: float, restrict: Restriction | None) -> _Prepared:
    restrict = restrict or {}
    tables = []
    for k, gpu in enumerate(problem.gpus):
        batches, limits = restrict.get(k, (None, None))
        table = problem.table(k, batches)
        if limits is not None:
            cols = [int(np.flatnonzero(table.limits == float(p))[0]) for p in limits]
            table = TypeTable(table.batches, table.limits[cols], table.time[:, cols], table.energy[:, cols])
        if table.batches.size == 0:
            prof = gpu.profile
            extra = ""
            if len(prof.batch_sizes) == 1:
                extra = " (its profile has a single batch size; profile at least two to allow interpolation)"
            raise InfeasibleError(
                f"GPU type {gpu.name!r}: no multiple of batch_granularity {problem.granularity} lies in its "
                f"profiled batch range [{prof.min_batch}, {prof.max_batch}]{extra}"
            )
        tables.append(table)
    unit = problem.global_batch
    for table in tables:
        unit = math.gcd(unit, *map(int, table.batches))
    positions = [g.count * t.batches // unit for g, t in zip(problem.gpus, tables)]
    sep = [weight * g.count * (t.energy - g.idle_power_w * t.time) for g, t in zip(problem.gpus, tables)]
    mins = [int(p.min()) for p in positions]
    maxs = [int(p.max()) for p in positions]
    rest_min = [sum(mins[k + 1 :]) for k in range(len(tables))]
    rest_max = [sum(maxs[k + 1 :]) for k in range(len(tables))]
    return _Prepared(tables, positions, sep, problem.global_batch // unit, rest_min, rest_max)


def _separable_min(prep: _Prepared, taus: np.ndarray, track: bool = False):
    """min over allocations with every t_k <= tau of the separable cost, per tau.

    Returns an array of shape (len(taus),), inf where nothing fits. With
    ``track`` (a single tau) also returns the (batch index, limit index) per type.
    """
    taus = np.asarray(taus, dtype=float)
    nt = taus.size
    best_w, best_p = [], []
    for table, sep in zip(prep.tables, prep.sep):
        vals = np.where(table.time[None, :, :] <= taus[:, None, None], sep[None, :, :], np.inf)
        best_w.append(vals.min(axis=2))
        if track:
            best_p.append(vals.argmin(axis=2)[0])
    total, pos = prep.total, prep.positions
    K = len(pos)

    # Dense table over reachable partial sums [lo, hi] of the types merged so far.
    lo, hi = int(pos[0].min()), int(pos[0].max())
    acc = np.full((nt, hi - lo + 1), np.inf)
    acc[:, pos[0] - lo] = best_w[0]
    backs: list[tuple[np.ndarray, int]] = []
    new_lo, new_hi = max(lo, total - prep.rest_max[0]), min(hi, total - prep.rest_min[0])
    if new_lo > new_hi:
        return _infeasible_result(nt, track)
    acc, lo, hi = acc[:, new_lo - lo : new_hi - lo + 1], new_lo, new_hi

    for k in range(1, K - 1):
        c_lo = max(lo + int(pos[k].min()), total - prep.rest_max[k])
        c_hi = min(hi + int(pos[k].max()), total - prep.rest_min[k])
        if c_lo > c_hi:
            return _infeasible_result(nt, track)
        merged = np.full((nt, c_hi - c_lo + 1), np.inf)
        arg = np.full(c_hi - c_lo + 1, -1, dtype=np.int64) if track else None
        w = best_w[k]
        for j, shift in enumerate(pos[k].tolist()):
            x_lo, x_hi = max(c_lo, lo + shift), min(c_hi, hi + shift)
            if x_lo > x_hi:
                continue
            cand = acc[:, x_lo - shift - lo : x_hi - shift - lo + 1] + w[:, j : j + 1]
            dst = merged[:, x_lo - c_lo : x_hi - c_lo + 1]
            if arg is not None:  # tracking
                better = cand[0] < dst[0]
                arg[x_lo - c_lo : x_hi - c_lo + 1][better] = j
            np.minimum(dst, cand, out=dst)
        if arg is not None:  # tracking
            backs.append((arg, c_lo))
        acc, lo, hi = merged, c_lo, c_hi

    if K == 1:
        hits = np.flatnonzero(pos[0] == total)
        if hits.size == 0:
            return _infeasible_result(nt, track)
        value = acc[:, total - lo]
        if not track:
            return value
        return value, [(int(hits[0]), int(best_p[0][hits[0]]))]

    need = total - pos[K - 1]
    ok = np.flatnonzero((need >= lo) & (need <= hi))
    if ok.size == 0:
        return _infeasible_result(nt, track)
    vals = acc[:, need[ok] - lo] + best_w[K - 1][:, ok]
    value = vals.min(axis=1)
    if not track:
        return value
    if not math.isfinite(value[0]):
        return value, None
    j = int(ok[int(vals[0].argmin())])
    picks = [j]
    x = int(need[j])
    for k in range(K - 2, 0, -1):
        arg, a_lo = backs[k - 1]
        jk = int(arg[x - a_lo])
        picks.append(jk)
        x -= int(pos[k][jk])
    picks.append(int(np.flatnonzero(pos[0] == x)[0]))
    picks.reverse()
    return value, [(jb, int(best_p[k][jb])) for k, jb in enumerate(picks)]


def _infeasible_result(nt: int, track: bool):
    value = np.full(nt, np.inf)
    return (value, None) if track else value


def _candidates(prep: _Prepared) -> np.ndarray:
    """Every per-iteration time an option can have, sorted, from the smallest feasible makespan up."""
    times = np.unique(np.concatenate([t.time.ravel() for t in prep.tables]))
    floor = max(float(t.time.min()) for t in prep.tables)
    return times[times >= floor]


def _blocks(prep: _Prepared, taus: np.ndarray):
    span = max(prep.total + 1, 1)
    size = max(1, _BLOCK_ELEMENTS // span)
    for start in range(0, taus.size, size):
        yield taus[start : start + size]


def solve(problem: Problem, restrict: Restriction | None = None, method: str = "optimal") -> Allocation:
    """The exact optimum of ``problem`` (over the options ``restrict`` leaves, if given).

    ``restrict`` maps a type index to ``(batches, limits)``, either ``None`` for
    "all"; the baselines use it to pin a type. Raises :class:`InfeasibleError`
    with the binding constraint when nothing satisfies the model.
    """
    started = _time.perf_counter()
    if problem.objective == "zeus-cost":
        weight = problem.eta
        coef = problem.eta * problem.idle_power_total_w + (1 - problem.eta) * problem.max_power_w
    else:
        weight = 1.0
        coef = problem.idle_power_total_w
    prep = _prepare(problem, weight, restrict)
    cands = _candidates(prep)
    allreduce = problem.allreduce_time_s

    cap = math.inf
    extra: dict = {}
    if cands.size == 0 or not math.isfinite(_separable_min(prep, cands[-1:])[0]):
        raise InfeasibleError(_infeasibility_message(problem, prep, restrict))
    if problem.objective == "min-energy":
        # The bound refers to the fastest allocation of the whole problem, also
        # when a baseline restricts the options, so that all are held to one bound.
        fastest_step = fastest_step_time(problem) if restrict else _fastest_makespan(prep, cands) + allreduce
        bound = problem.max_slowdown * fastest_step
        cap = bound * (1 + SLOWDOWN_RTOL) - allreduce
        extra["fastest_iteration_time_s"] = fastest_step
        extra["max_slowdown"] = problem.max_slowdown
        if not math.isfinite(_separable_min(prep, np.array([cap]))[0]):
            raise InfeasibleError(
                f"no allocation with the options this baseline allows finishes a step within "
                f"max_slowdown x the fastest step ({problem.max_slowdown:g} x {fastest_step:.6g} s)"
            )

    # Start from the best allocation under the cap alone; its separable part is a
    # lower bound for every smaller threshold.
    s_floor, picks = _separable_min(prep, np.array([cap]), track=True)
    s_floor = float(s_floor[0])
    best_tau = max(float(prep.tables[k].time[jb, jp]) for k, (jb, jp) in enumerate(picks))
    best_val = s_floor + coef * (best_tau + allreduce)
    pending = cands[cands < best_tau]
    evaluated = 1
    while pending.size:
        pending = pending[s_floor + coef * (pending + allreduce) < best_val]
        if pending.size == 0:
            break
        block = next(_blocks(prep, pending))
        pending = pending[block.size :]
        vals = _separable_min(prep, block) + coef * (block + allreduce)
        evaluated += block.size
        i = int(np.argmin(vals))
        if vals[i] < best_val:
            best_val, best_tau = float(vals[i]), float(block[i])

    _, picks = _separable_min(prep, np.array([best_tau]), track=True)
    batches = [int(prep.tables[k].batches[jb]) for k, (jb, _) in enumerate(picks)]
    limits = [float(prep.tables[k].limits[jp]) for k, (_, jp) in enumerate(picks)]
    alloc = evaluate(problem, batches, limits, method=method)
    extra["solver"] = {
        "thresholds_evaluated": evaluated,
        "thresholds_total": int(cands.size),
        "seconds": _time.perf_counter() - started,
    }
    alloc.extra.update(extra)
    return alloc


def fastest_step_time(problem: Problem) -> float:
    """The smallest step time (compute makespan + all-reduce) any allocation of ``problem`` reaches."""
    prep = _prepare(problem, 1.0, None)
    cands = _candidates(prep)
    if cands.size == 0 or not math.isfinite(_separable_min(prep, cands[-1:])[0]):
        raise InfeasibleError(_infeasibility_message(problem, prep, None))
    return _fastest_makespan(prep, cands) + problem.allreduce_time_s


def _fastest_makespan(prep: _Prepared, cands: np.ndarray) -> float:
    """The smallest candidate makespan at which some allocation exists (binary search)."""
    lo, hi = 0, cands.size - 1  # cands[hi] is feasible
    while lo < hi:
        mid = (lo + hi) // 2
        if math.isfinite(_separable_min(prep, cands[mid : mid + 1])[0]):
            hi = mid
        else:
            lo = mid + 1
    return float(cands[hi])


def _infeasibility_message(problem: Problem, prep: _Prepared, restrict: Restriction | None) -> str:
    """Say why no split reaches the global batch: the reachable range per type and in total."""
    parts = []
    lo_total = hi_total = 0
    for gpu, table in zip(problem.gpus, prep.tables):
        b_lo, b_hi = int(table.batches.min()), int(table.batches.max())
        lo_total += gpu.count * b_lo
        hi_total += gpu.count * b_hi
        note = " (single profiled batch size)" if len(gpu.profile.batch_sizes) == 1 else ""
        parts.append(f"{gpu.name} x{gpu.count}: local batch {b_lo}..{b_hi}{note}")
    if problem.global_batch < lo_total or problem.global_batch > hi_total:
        why = f"the GPUs can only take a global batch between {lo_total} and {hi_total}"
    else:
        why = (
            f"no combination of local batches in steps of {problem.granularity} sums to it "
            "(try a batch_granularity that divides the global batch, or another global batch)"
        )
    scope = " with the options this baseline allows" if restrict else ""
    return f"no allocation reaches global_batch_size {problem.global_batch}{scope}: {why}; " + "; ".join(parts)

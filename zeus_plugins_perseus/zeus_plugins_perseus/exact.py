"""A plan for one iteration-time limit in real (unquantised) time: no rounding loss.

The frontier solver works in integer time units; rounding every instruction's
time to the unit makes its fastest plan slower than all-max clocks by up to a
unit per instruction on the critical path, so "no slowdown" had no plan at
all. Here every measured option keeps its exact time:

1. a linear program over the DAG in seconds (event times ``s``, and per
   instruction the segments of the lower convex hull of its measured
   (time, effective energy) options; HiGHS through scipy) gives durations of
   least hull energy whose critical path is at most ``limit_s``;
2. each instruction gets the slowest measured clock whose time fits its
   duration (a duration between two hull vertices takes the faster one);
3. exact float passes over the real timeline: speed up critical instructions
   if solver tolerance left the plan over the limit, then give back slack,
   slowing instructions one option at a time (largest energy saving first)
   while their total float allows.

The result is never slower than ``limit_s`` on the measured profile. With
``limit_s`` the all-max-clock iteration time it is the zero-slowdown plan.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from zeus_core import lower_convex_hull, pareto_frontier

from zeus_plugins_perseus.profile import InstructionProfile
from zeus_plugins_perseus.schedule import PipelineDAG
from zeus_plugins_perseus.tradeoff import topological_order

_TOL = 1e-9  # seconds: LP feasibility slack tolerated when mapping durations to clocks


class EffectiveOptions:
    """Pareto options of one (stage, instruction), fastest first, with effective energies."""

    def __init__(self, times: np.ndarray, energies: np.ndarray, freqs: np.ndarray, blocking_w: float) -> None:
        eff = energies - blocking_w * times
        front = pareto_frontier(times, eff)
        self.t, self.e, self.f = times[front], eff[front], freqs[front]
        hull = lower_convex_hull(times, eff)
        self.hull_t, self.hull_e = times[hull], eff[hull]

    def slowest_within(self, duration: float) -> int:
        """Index of the slowest option whose time is at most ``duration`` (the fastest if none is)."""
        return max(int(np.searchsorted(self.t, duration + _TOL, side="right")) - 1, 0)


def effective_options(dag: PipelineDAG, profile: InstructionProfile, blocking_w: float) -> list[EffectiveOptions]:
    """Per op of ``dag``, its instruction's options (built once per (stage, instruction))."""
    cache: dict[tuple[int, str], EffectiveOptions] = {}
    for op in dag.ops:
        key = (op.stage, op.instruction)
        if key not in cache:
            o = profile.get(*key)
            cache[key] = EffectiveOptions(o.time.astype(float), o.energy.astype(float), o.frequency, blocking_w)
    return [cache[(op.stage, op.instruction)] for op in dag.ops]


def _timeline(order, preds, succs, times, limit):
    """Earliest finish and latest finish (against ``limit``) of every op."""
    ef = [0.0] * len(times)
    for v in order:
        ef[v] = max((ef[p] for p in preds[v]), default=0.0) + times[v]
    lf = [0.0] * len(times)
    for v in reversed(order):
        lf[v] = min((lf[w] - times[w] for w in succs[v]), default=limit)
    return ef, lf


def fastest_frequencies(dag: PipelineDAG, profile: InstructionProfile) -> np.ndarray:
    """Per op, the clock with the shortest measured time (not always the highest on a noisy profile)."""
    best: dict[tuple[int, str], int] = {}
    for op in dag.ops:
        key = (op.stage, op.instruction)
        if key not in best:
            o = profile.get(*key)
            order = np.lexsort((o.energy, o.time))
            best[key] = int(o.frequency[order[0]])
    return np.array([best[(op.stage, op.instruction)] for op in dag.ops], dtype=np.int64)


def exact_plan(dag: PipelineDAG, profile: InstructionProfile, blocking_w: float, limit_s: float) -> np.ndarray:
    """Clocks (MHz per op) of least energy found whose measured iteration time is at most ``limit_s``.

    ValueError if even every instruction at its fastest clock is slower than ``limit_s``.
    """
    return ExactPlanner(dag, profile, blocking_w).plan(limit_s)


class ExactPlanner:
    """The LP of one DAG and profile, built once, solved for as many limits as asked."""

    def __init__(self, dag: PipelineDAG, profile: InstructionProfile, blocking_w: float) -> None:
        self.op_opts = op_opts = effective_options(dag, profile, blocking_w)
        self.n = n = dag.n_ops
        edges = dag.edges

        # variables [s_0..s_{n-1}, x_(i,k)...]; d_i = t_fast_i + sum_k x_ik
        seg_op, seg_len, seg_gain = [], [], []
        for i, o in enumerate(op_opts):
            dt = np.diff(o.hull_t)
            de = -np.diff(o.hull_e)  # energy saved over each hull segment
            for L, g in zip(dt, de):
                if L > 0:
                    seg_op.append(i)
                    seg_len.append(L)
                    seg_gain.append(g / L)
        self.seg_op = seg_op = np.asarray(seg_op, dtype=np.int64)
        n_seg = len(seg_op)
        self.t_fast = t_fast = np.array([o.t[0] for o in op_opts])
        rows, cols, vals = [], [], []
        b = []
        r = 0
        segs_of = [[] for _ in range(n)]
        for k, i in enumerate(seg_op):
            segs_of[i].append(n + k)
        for a, c in edges.tolist():  # s_a + d_a <= s_c
            rows += [r, r] + [r] * len(segs_of[a])
            cols += [a, c] + segs_of[a]
            vals += [1.0, -1.0] + [1.0] * len(segs_of[a])
            b.append(-t_fast[a])
            r += 1
        for i in range(n):  # s_i + d_i <= limit
            rows += [r] + [r] * len(segs_of[i])
            cols += [i] + segs_of[i]
            vals += [1.0] + [1.0] * len(segs_of[i])
            b.append(-t_fast[i])  # + limit at solve time
            r += 1
        self.n_edges = len(edges)
        self.A = sp.csr_array((vals, (rows, cols)), shape=(r, n + n_seg))
        self.b0 = np.asarray(b)
        self.cost = np.concatenate([np.zeros(n), -np.asarray(seg_gain, dtype=float)])
        self.bounds = [(0, None)] * n + [(0, L) for L in seg_len]
        self.stages, self.blocking_w = dag.stages, blocking_w
        self.order = topological_order(n, edges)
        self.preds, self.succs = dag.neighbours()

    def _solve(self, limit_s: float):
        b = self.b0.copy()
        b[self.n_edges:] += limit_s
        res = linprog(self.cost, A_ub=self.A, b_ub=b, bounds=self.bounds, method="highs")
        if res.status == 2:
            raise ValueError(f"no plan meets {limit_s:.6f} s: every instruction at its fastest clock is slower")
        if res.status != 0:  # pragma: no cover - numerical trouble in HiGHS
            raise RuntimeError(f"the exact plan's linear program failed: {res.message}")
        return res

    def hull_energy_j(self, limit_s: float) -> float:
        """Least iteration energy on the convex hulls with every op finished by ``limit_s``.

        Discrete clocks lie on or above each hull, so no plan finishing at
        ``limit_s`` uses less energy: a bound to judge a plan at that limit by.
        """
        res = self._solve(limit_s)
        fastest_eff = sum(float(o.hull_e[0]) for o in self.op_opts)
        return fastest_eff + float(res.fun) + self.stages * limit_s * self.blocking_w

    def plan(self, limit_s: float, greedy_reclaim: bool = True) -> np.ndarray:
        """Clocks (MHz per op) for one limit; see :func:`exact_plan`.

        ``greedy_reclaim = False`` skips the (slow, one op at a time) float pass, for
        callers that reclaim many plans at once with :mod:`~zeus_plugins_perseus.reclaim`.
        """
        op_opts, n = self.op_opts, self.n
        res = self._solve(limit_s)
        dur = self.t_fast.copy()
        np.add.at(dur, self.seg_op, res.x[n:])

        # --- 2. slowest measured option within each duration
        choice = [o.slowest_within(d) for o, d in zip(op_opts, dur)]

        # --- 3. exact repair and slack reclamation on real times
        order, preds, succs = self.order, self.preds, self.succs

        def times_now():
            return [float(o.t[c]) for o, c in zip(op_opts, choice)]

        times = times_now()
        ef, lf = _timeline(order, preds, succs, times, limit_s)
        while max(ef) > limit_s:  # solver tolerance: speed up a late critical op, cheapest per second first
            late = [i for i in range(n) if ef[i] > lf[i] and choice[i] > 0]
            if not late:  # pragma: no cover - cannot happen when the all-fastest plan meets the limit
                raise ValueError(f"no plan meets {limit_s:.6f} s")
            i = min(late, key=lambda j: (op_opts[j].e[choice[j] - 1] - op_opts[j].e[choice[j]])
                    / (op_opts[j].t[choice[j]] - op_opts[j].t[choice[j] - 1]))
            choice[i] -= 1
            times = times_now()
            ef, lf = _timeline(order, preds, succs, times, limit_s)
        # Reclaim: ops by the saving of their next slower option, largest first; slow each while float allows.
        blocked: set[int] = set()
        while greedy_reclaim:
            best, best_gain = None, 0.0
            for i, o in enumerate(op_opts):
                c = choice[i]
                if i not in blocked and c + 1 < len(o.t) and o.t[c + 1] - o.t[c] <= lf[i] - ef[i]:
                    gain = o.e[c] - o.e[c + 1]
                    if gain > best_gain:
                        best, best_gain = i, gain
            if best is None:
                break
            choice[best] += 1
            new_ef, new_lf = _timeline(order, preds, succs, times_now(), limit_s)
            if max(new_ef) > limit_s:  # a float rounding of the slack: keep the faster option
                choice[best] -= 1
                blocked.add(best)
                continue
            ef, lf = new_ef, new_lf
        return np.array([int(o.f[c]) for o, c in zip(op_opts, choice)], dtype=np.int64)

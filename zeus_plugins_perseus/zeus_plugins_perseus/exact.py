"""The real-time plans: for iteration-time limits in real (unquantised) time, clocks that meet each one.

The frontier solver works in integer time units; rounding every instruction's
time up to the unit makes its fastest plan slower than all-max clocks by up to
a unit per instruction on the critical path. Here every measured option keeps
its exact time:

1. the hull LP (each instruction on the lower convex hull of its measured
   (time, effective energy) options, event times within the limit) is solved
   for every limit at once as one parametric min-cost flow
   (:mod:`~zeus_plugins_perseus.hull_flow`), which gives at each limit its two
   canonical optimal solutions: the earliest and the latest event times;
2. each instruction of each solution gets the slowest measured clock whose
   time fits its duration (a duration between two hull vertices takes the
   faster one);
3. exact passes over the real timeline: speed up critical instructions while
   rounding leaves the plan over the limit (cheapest per second first), then
   spend the float (:mod:`~zeus_plugins_perseus.reclaim`) in two ways: the
   greedy pass alone (slowing instructions one option at a time, largest
   energy saving first), and the level passes followed by the greedy pass.

**The canonical rule.** Of the (up to) four plans of a limit, the one of least
emulated energy is kept; on a tie the first in the order: earliest-times
solution with level passes, latest-times with level passes, earliest-times
greedy only, latest-times greedy only. Then, fastest limit first, each limit's
plan is replaced by the next faster limit's plan given this limit's float
(the greedy pass) where that uses less emulated energy: a faster plan meets a
slower limit too, and the greedy pass from it often lands on a better
arrangement than either canonical solution's (over the 199 limits of the
benchmark's section 7 it lowers the plan of 84, and the limits where a cold
HiGHS vertex's plan would be better go from 21 to 13). Both solutions are properties of the
LP alone, so the plans do not depend on the solver, its version, a warm start
or how many processes plan. Where OR-Tools is missing (or the flow fails),
each limit is planned from a cold HiGHS LP's vertex instead
(:mod:`~zeus_plugins_perseus.hull_lp`), the same way.

The result is never slower than its limit on the measured profile. With the
limit at the all-max-clock iteration time it is the zero-slowdown plan.
"""

from __future__ import annotations

import numpy as np

from zeus_plugins_perseus.clock_options import OptionTable, effective_options
from zeus_plugins_perseus.dag_times import FloatTimeline, iteration_time
from zeus_plugins_perseus.emulator import emulate
from zeus_plugins_perseus.hull_flow import UNIT_S, HullFlow, HullFlowError, HullSolution, to_units
from zeus_plugins_perseus.hull_lp import HullLP
from zeus_plugins_perseus.profile import InstructionProfile
from zeus_plugins_perseus.reclaim import OnePlanPasses, reclaim_slack
from zeus_plugins_perseus.schedule import PipelineDAG

_TOL = 1e-9  # seconds: LP feasibility slack tolerated when mapping HiGHS' durations to clocks


def exact_plan(dag: PipelineDAG, profile: InstructionProfile, blocking_w: float, limit_s: float) -> np.ndarray:
    """Clocks (MHz per op) of least energy found whose measured iteration time is at most ``limit_s``.

    ValueError if even every instruction at its fastest clock is slower than ``limit_s``.
    """
    return ExactPlanner(dag, profile, blocking_w).plans([limit_s])[0]


class ExactPlanner:
    """The real-time plans of one DAG and profile, for as many limits as asked."""

    def __init__(self, dag: PipelineDAG, profile: InstructionProfile, blocking_w: float) -> None:
        self.dag, self.profile = dag, profile
        self.op_opts = op_opts = effective_options(dag, profile, blocking_w)
        self.n = dag.n_ops
        self.stages, self.blocking_w = dag.stages, blocking_w
        self.levels = dag.levels
        tab = OptionTable(op_opts)
        # per op, its options padded (inf times / energies past the last)
        self.op_t, self.op_e, self.op_f = tab.t[tab.key], tab.e[tab.key], tab.f[tab.key]
        self.op_count = np.array([len(o.t) for o in op_opts])
        self.op_units = np.where(np.isfinite(self.op_t), to_units(np.where(np.isfinite(self.op_t), self.op_t, 0.0)), np.iinfo(np.int64).max)
        self.t_fastest = float(iteration_time(self.levels, self.op_t[:, 0]))
        self._flow: HullFlow | None = None
        self._lp: HullLP | None = None
        self._passes: OnePlanPasses | None = None

    @property
    def flow(self) -> HullFlow:
        if self._flow is None:
            self._flow = HullFlow(self.dag, self.op_opts)
        return self._flow

    @property
    def lp(self) -> HullLP:
        if self._lp is None:
            self._lp = HullLP(self.dag, self.op_opts)
        return self._lp

    def _check(self, limit_s: float) -> None:
        if limit_s < self.t_fastest * (1 - 1e-12):
            raise ValueError(f"no plan meets {limit_s:.6f} s: every instruction at its fastest clock takes {self.t_fastest:.6f} s")

    def hull_energy_j(self, limit_s: float) -> float:
        """Least iteration energy on the convex hulls with every op finished by ``limit_s`` (a cold LP).

        Discrete clocks lie on or above each hull, so no plan finishing at
        ``limit_s`` uses less energy: a bound to judge a plan at that limit by.
        """
        self._check(limit_s)
        solved = self.lp.solve(limit_s)
        assert solved is not None  # _check refused a limit no plan meets
        _, energy = solved
        return energy + self.stages * limit_s * self.blocking_w

    def solutions(self, limits: list[float]) -> dict[float, HullSolution]:
        """The hull LP's two canonical solutions at every limit (one parametric flow)."""
        for lim in limits:
            self._check(lim)
        units = {lim: max(int(np.floor(lim / UNIT_S)), self.flow.t_min) for lim in limits}
        by_units = {s.limit_units: s for s in self.flow.solve(list(units.values()))}
        return {lim: by_units[u] for lim, u in units.items()}

    def choice_within(self, durations_units: np.ndarray) -> np.ndarray:
        """Per op, the slowest Pareto option whose time fits the duration (the fastest if none does)."""
        return np.maximum((self.op_units <= durations_units[:, None]).sum(axis=1) - 1, 0)

    @property
    def passes(self) -> OnePlanPasses:
        if self._passes is None:
            self._passes = OnePlanPasses(self.levels, self.op_t, self.op_e, self.op_count)
        return self._passes

    def repair(self, choice: np.ndarray, limit_s: float) -> np.ndarray:
        """Option indices meeting ``limit_s`` on real times: while the plan ends after it, speed up a late
        critical op, cheapest per second first (ties to the lowest op index)."""
        return self.passes.repair(choice, limit_s)[0]

    def finish(self, choice: np.ndarray, limit_s: float) -> np.ndarray:
        """Clocks of a plan from option indices that meet ``limit_s``: its float spent, largest saving first."""
        return self.op_f[np.arange(self.n), self.passes.greedy(choice, limit_s)].astype(np.int64)

    def choice_of(self, freqs: np.ndarray) -> np.ndarray:
        """Option indices of a plan's clocks (every clock one of the op's Pareto options)."""
        return (self.op_f == freqs[:, None]).argmax(axis=1)

    def vertices(self, limits: list[float]) -> list[list[np.ndarray]]:
        """Per limit, the durations (:data:`UNIT_S`) of the LP solutions its plans start from: the two canonical
        ones (earliest, then latest event times); where OR-Tools cannot be imported or the flow fails, the
        vertex of a cold HiGHS LP."""
        try:
            sols = self.solutions(limits)
        except (ImportError, HullFlowError):
            return [[self.highs_vertex(lim)] for lim in limits]
        return [[sols[lim].earliest, sols[lim].latest] for lim in limits]

    def plans(self, limits: list[float]) -> np.ndarray:
        """Clocks ``[plan, op]`` at each limit by the canonical rule (module docstring)."""
        return self.plans_from(self.vertices(limits), limits)

    def plans_from(self, vertices: list[list[np.ndarray]], limits: list[float]) -> np.ndarray:
        """Clocks ``[plan, op]``: at each limit, of the plans started from its LP solutions ``vertices`` (durations
        in :data:`UNIT_S`), the one of least emulated energy.

        Each solution is mapped to clocks and repaired; from there two plans: the greedy pass alone, and the
        level passes of :mod:`~zeus_plugins_perseus.reclaim` then the greedy pass. The first of least energy
        wins, in the order: each solution's level-passes plan, then each one's greedy-only plan; then the plans
        are handed on from faster limits to slower ones (:meth:`_handed_on`).
        """
        rows = np.arange(self.n)
        passes = self.passes
        repaired = [[passes.repair(self.choice_within(d), lim) for d in ds] for ds, lim in zip(vertices, limits)]
        flat = [c for cs in repaired for c, _ in cs]
        level = reclaim_slack(self.dag, self.profile, self.op_f[rows[None, :], np.array(flat)], self.blocking_w)
        cands, at = [], 0
        for cs, lim in zip(repaired, limits):
            starts = [(self.choice_of(f), None) for f in level[at : at + len(cs)]] + cs
            at += len(cs)
            unique: list[tuple[np.ndarray, FloatTimeline | None]] = []
            for c, tl in starts:  # the same start gives the same plan: one greedy pass each
                if not any(np.array_equal(c, u) for u, _ in unique):
                    unique.append((c, tl))
            cands.append([self.op_f[rows, passes.greedy(c, lim, tl)] for c, tl in unique])
        _, energy = emulate(self.dag, self.profile, np.vstack([np.array(c) for c in cands]), self.blocking_w)
        kept, at = [], 0
        for c in cands:
            k = int(np.argmin(energy[at : at + len(c)]))  # argmin: the first on a tie
            kept.append((c[k], float(energy[at + k])))
            at += len(c)
        return self._handed_on(kept, limits)

    def _handed_on(self, kept: list[tuple[np.ndarray, float]], limits: list[float]) -> np.ndarray:
        """Clocks ``[plan, op]`` of ``kept`` (clocks, emulated energy) per limit, each replaced by the plan of the
        next faster limit given this limit's float (the greedy pass) where that uses less emulated energy, fastest
        limit first (so a plan can be handed on over several limits)."""
        rows = np.arange(self.n)
        order = sorted(range(len(limits)), key=lambda i: limits[i])
        for prev, i in zip(order, order[1:]):
            handed = self.op_f[rows, self.passes.greedy(self.choice_of(kept[prev][0]), limits[i])]
            (t,), (e,) = emulate(self.dag, self.profile, handed[None], self.blocking_w)
            if t <= limits[i] * (1 + 1e-12) and e < kept[i][1]:
                kept[i] = (handed, float(e))
        return np.array([f for f, _ in kept], dtype=np.int64)

    def highs_vertex(self, limit_s: float) -> np.ndarray:
        """Durations (:data:`UNIT_S`) of the vertex a cold HiGHS solve of ``limit_s`` returns; each a tolerance
        above HiGHS's, so that a duration HiGHS puts a rounding below a measured time still fits it."""
        self._check(limit_s)
        solved = self.lp.solve(limit_s)
        assert solved is not None  # _check refused a limit no plan meets
        dur, _ = solved
        return to_units(dur + _TOL)

    def highs_plan(self, limit_s: float) -> np.ndarray:
        """Clocks of the plan started from a cold HiGHS solve at ``limit_s`` (the vertex HiGHS returns), made
        as :meth:`plans_from` makes the canonical ones."""
        return self.plans_from([[self.highs_vertex(limit_s)]], [limit_s])[0]

    def __getstate__(self):  # a worker process rebuilds the solvers it uses
        return {**self.__dict__, "_flow": None, "_lp": None, "_passes": None}

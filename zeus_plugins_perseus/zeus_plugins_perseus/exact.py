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
   spend the float (:mod:`~zeus_plugins_perseus.reclaim`): the level passes
   on both plans of a limit, then the greedy pass (slowing instructions one
   option at a time, largest energy saving first) on the one kept.

**The canonical rule.** Of the two plans of a limit, the one of less emulated
energy after the level passes is kept (the earliest-times plan on a tie), and
it gets the greedy pass. Both solutions are
properties of the LP alone, so the plans do not depend on the solver, its
version, a warm start or how many processes plan. Where OR-Tools is missing
(or the flow fails), each limit is planned from a cold HiGHS LP instead
(:mod:`~zeus_plugins_perseus.hull_lp`).

The result is never slower than its limit on the measured profile. With the
limit at the all-max-clock iteration time it is the zero-slowdown plan.
"""

from __future__ import annotations

import numpy as np

from zeus_plugins_perseus.clock_options import OptionTable, effective_options
from zeus_plugins_perseus.dag_times import earliest_finish, iteration_time, latest_finish
from zeus_plugins_perseus.emulator import emulate
from zeus_plugins_perseus.hull_flow import UNIT_S, HullFlow, HullFlowError, HullSolution, to_units
from zeus_plugins_perseus.hull_lp import HullLP
from zeus_plugins_perseus.profile import InstructionProfile
from zeus_plugins_perseus.reclaim import reclaim_greedy, reclaim_slack
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
        self.op_units = np.where(np.isfinite(self.op_t), to_units(np.where(np.isfinite(self.op_t), self.op_t, 0.0)),
                                 np.iinfo(np.int64).max)
        self.t_fastest = float(iteration_time(self.levels, self.op_t[:, 0]))
        self._flow: HullFlow | None = None
        self._lp: HullLP | None = None

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
            raise ValueError(f"no plan meets {limit_s:.6f} s: every instruction at its fastest clock takes "
                             f"{self.t_fastest:.6f} s")

    def hull_energy_j(self, limit_s: float) -> float:
        """Least iteration energy on the convex hulls with every op finished by ``limit_s`` (a cold LP).

        Discrete clocks lie on or above each hull, so no plan finishing at
        ``limit_s`` uses less energy: a bound to judge a plan at that limit by.
        """
        self._check(limit_s)
        _, energy = self.lp.solve(limit_s)
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

    def repair(self, choice: np.ndarray, limit_s: float) -> np.ndarray:
        """Option indices meeting ``limit_s`` on real times: while the plan ends after it, speed up a late
        critical op, cheapest per second first (ties to the lowest op index)."""
        choice = choice.copy()
        n, lv, T, E = self.n, self.levels, self.op_t, self.op_e
        rows = np.arange(n)

        def timeline():
            t = T[rows, choice]
            return earliest_finish(lv, t)[:n], latest_finish(lv, t, limit_s)[:n]

        ef, lf = timeline()
        while ef.max() > limit_s:
            late = np.flatnonzero((ef > lf) & (choice > 0))
            if not late.size:  # pragma: no cover - cannot happen when the all-fastest plan meets the limit
                raise ValueError(f"no plan meets {limit_s:.6f} s")
            c = choice[late]
            i = late[np.argmin((E[late, c - 1] - E[late, c]) / (T[late, c] - T[late, c - 1]))]
            choice[i] -= 1
            ef, lf = timeline()
        return choice

    def finish(self, choice: np.ndarray, limit_s: float) -> np.ndarray:
        """Clocks of a plan from option indices that meet ``limit_s``: its float spent, largest saving first."""
        choice = reclaim_greedy(self.levels, self.op_t, self.op_e, self.op_count, choice, limit_s)
        return self.op_f[np.arange(self.n), choice].astype(np.int64)

    def choice_of(self, freqs: np.ndarray) -> np.ndarray:
        """Option indices of a plan's clocks (every clock one of the op's Pareto options)."""
        return (self.op_f == freqs[:, None]).argmax(axis=1)

    def candidates(self, limits: list[float]) -> list[np.ndarray]:
        """Per limit, the clocks ``[candidate, op]`` of its canonical solutions (earliest, then latest event
        times), each mapped to clocks, repaired and reclaimed by level passes.

        Where OR-Tools cannot be imported or the flow fails, one candidate per limit from a cold HiGHS LP.
        """
        rows = np.arange(self.n)
        try:
            sols = self.solutions(limits)
        except (ImportError, HullFlowError):
            return [self.highs_plan(lim)[None] for lim in limits]
        raw = np.array([self.op_f[rows, self.repair(self.choice_within(d), lim)]
                        for lim in limits for d in (sols[lim].earliest, sols[lim].latest)])
        reclaimed = reclaim_slack(self.dag, self.profile, raw, self.blocking_w)
        return [reclaimed[2 * k:2 * k + 2] for k in range(len(limits))]

    def plans(self, limits: list[float]) -> np.ndarray:
        """Clocks ``[plan, op]`` at each limit by the canonical rule (module docstring)."""
        cands = self.candidates(limits)
        _, energy = emulate(self.dag, self.profile, np.vstack(cands), self.blocking_w)
        kept, at = [], 0
        for c in cands:
            kept.append(c[int(np.argmin(energy[at:at + len(c)]))])  # argmin: the earliest on a tie
            at += len(c)
        return np.array(self.finish_all(kept, limits), dtype=np.int64)

    def finish_all(self, plans: list[np.ndarray], limits: list[float]) -> list[np.ndarray]:
        """:meth:`finish` of each plan (clocks) at its limit."""
        return [self.finish(self.choice_of(f), lim) for f, lim in zip(plans, limits)]

    def highs_plan(self, limit_s: float) -> np.ndarray:
        """Clocks of the plan from a cold HiGHS solve at ``limit_s`` (the vertex HiGHS returns), mapped,
        repaired and reclaimed as :meth:`plans` does."""
        self._check(limit_s)
        dur, _ = self.lp.solve(limit_s)
        choice = np.maximum((self.op_t <= (dur + _TOL)[:, None]).sum(axis=1) - 1, 0)
        return self.finish(self.repair(choice, limit_s), limit_s)

    def __getstate__(self):  # a worker process rebuilds the solvers it uses
        return {**self.__dict__, "_flow": None, "_lp": None}



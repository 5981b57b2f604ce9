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
   if solver tolerance left the plan over the limit, then give back slack
   (:func:`~zeus_plugins_perseus.reclaim.reclaim_greedy`: slowing instructions
   one option at a time, largest energy saving first, while their float allows).

The result is never slower than ``limit_s`` on the measured profile. With
``limit_s`` the all-max-clock iteration time it is the zero-slowdown plan.
"""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import scipy.sparse as sp

from zeus_plugins_perseus.clock_options import OptionTable, effective_options
from zeus_plugins_perseus.dag_times import earliest_finish, latest_finish
from zeus_plugins_perseus.profile import InstructionProfile
from zeus_plugins_perseus.reclaim import reclaim_greedy
from zeus_plugins_perseus.schedule import PipelineDAG

_TOL = 1e-9  # seconds: LP feasibility slack tolerated when mapping durations to clocks
#: below this many ops the linear programs take milliseconds: forking workers would cost more than they save
PARALLEL_MIN_OPS = 256
#: None until HiGHS first runs in this process; then whether it started threads (its thread pool, which a
#: forked child would inherit without the threads). Unknown (no /proc) counts as started.
_highs_threads: bool | None = None


class _HighsLP:
    """``min c x, A x <= b, lb <= x <= ub`` handed to HiGHS exactly as ``linprog(method="highs")`` hands it.

    The real-time plans are as good as the vertex HiGHS returns, and which of
    the many optimal vertices that is depends on everything HiGHS is given:
    this builds the same model (column-wise matrix, ``-inf`` row lower bounds,
    infinities as ``kHighsInf``) with the same options in a fresh solver per
    call, so the answers are linprog's to the bit
    (``tests/zeus_plugins_perseus/test_exact.py`` checks it). What it leaves out
    is linprog's per-call overhead: input cleaning, the sparse conversions, and
    the dual values of every bound gathered in a Python loop, which at 16 x 64
    (22,400 columns) cost more than some of the solves.
    """

    def __init__(self, c: np.ndarray, A: sp.csr_array, bounds: list[tuple[float, float | None]]) -> None:
        _core = _highs_core()
        self._h = _core
        csc = sp.csc_array(A)
        self.c = np.asarray(c, dtype=float)
        self.start, self.index, self.value = csc.indptr, csc.indices, csc.data
        self.n_rows, self.n_cols = A.shape
        lb = np.array([b[0] for b in bounds], dtype=float)
        ub = np.array([np.inf if b[1] is None else b[1] for b in bounds], dtype=float)
        self.bounds = np.stack([lb, ub], axis=1)
        self.lb, self.ub = _finite(lb, _core.kHighsInf), _finite(ub, _core.kHighsInf)
        self.row_lower = np.full(self.n_rows, -_core.kHighsInf)
        options = _core.HighsOptions()  # linprog's non-default options for method="highs"
        options.presolve = "on"
        options.highs_debug_level = _core.HighsDebugLevel.kHighsDebugLevelNone
        options.log_to_console = False
        options.output_flag = False
        options.simplex_strategy = _core.simplex_constants.SimplexStrategy.kSimplexStrategyDual
        self.options = options

    def solve(self, b: np.ndarray) -> tuple[int, np.ndarray | None, float | None]:
        """(linprog's status: 0 optimal, 2 infeasible, 4 trouble; x; objective) for right-hand side ``b``."""
        h = self._h
        lp = h.HighsLp()
        lp.num_col_ = self.n_cols
        lp.num_row_ = self.n_rows
        lp.a_matrix_.num_col_ = self.n_cols
        lp.a_matrix_.num_row_ = self.n_rows
        lp.a_matrix_.format_ = h.MatrixFormat.kColwise
        lp.col_cost_ = self.c
        lp.col_lower_ = self.lb
        lp.col_upper_ = self.ub
        lp.row_lower_ = self.row_lower
        rhs = _finite(np.asarray(b, dtype=float), h.kHighsInf)
        lp.row_upper_ = rhs
        lp.a_matrix_.start_ = self.start
        lp.a_matrix_.index_ = self.index
        lp.a_matrix_.value_ = self.value
        solver = h._Highs()
        if solver.passOptions(self.options) == h.HighsStatus.kError:  # pragma: no cover - fixed, valid options
            return 4, None, None
        if solver.passModel(lp) == h.HighsStatus.kError:  # pragma: no cover - linprog reports this as status 2
            return 2, None, None
        global _highs_threads
        first = _highs_threads is None
        before = _os_threads() if first else None
        run_status = solver.run()
        if first:  # HiGHS sets up its scheduler in its first run in a process
            after = _os_threads()
            _highs_threads = before is None or after is None or after > before
        if run_status == h.HighsStatus.kError:  # pragma: no cover
            return 4, None, None
        status = solver.getModelStatus()
        if status != h.HighsModelStatus.kOptimal:
            return (2 if status in (h.HighsModelStatus.kInfeasible, h.HighsModelStatus.kModelError) else 4), None, None
        solution = solver.getSolution()
        x = np.array(solution.col_value)
        slack = rhs - np.asarray(solution.row_value)
        # linprog's own check of an "optimal" answer (tolerance sqrt(1e-9) * 10)
        tol = np.sqrt(1e-9) * 10
        ok = (np.all((x >= self.bounds[:, 0] - tol) & (x <= self.bounds[:, 1] + tol)) and not (slack < -tol).any()
              and not np.isnan(x).any())
        return (0 if ok else 4), x, float(solver.getInfo().objective_function_value)


_HIGHS_CORE = "scipy.optimize._highspy._core"


def _highs_core():
    """scipy's HiGHS extension module, loaded without running ``scipy.optimize``'s ``__init__``.

    Importing the module the ordinary way imports all of ``scipy.optimize``
    first (linalg, special, fft, ...: a third of a second, more than a tenth of
    a whole ``zeus run`` of 8 x 32), and the planner needs only this module.
    It is loaded from its file under its own name and registered in
    ``sys.modules``, so a later ``import scipy.optimize`` finds and uses this
    very module (a second load of it would fail). Anything unexpected about
    scipy's layout falls back to the ordinary import.
    """
    import sys

    if _HIGHS_CORE in sys.modules:
        return sys.modules[_HIGHS_CORE]
    try:
        import importlib.machinery
        import importlib.util
        from pathlib import Path

        import scipy

        folder = Path(scipy.__file__).parent / "optimize" / "_highspy"
        path = next(folder / f"_core{sfx}" for sfx in importlib.machinery.EXTENSION_SUFFIXES
                    if (folder / f"_core{sfx}").is_file())
        spec = importlib.util.spec_from_file_location(_HIGHS_CORE, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.HighsLp, module._Highs, module.HighsOptions  # noqa: B018 - the names used here
    except Exception:  # noqa: BLE001 - any surprise: the ordinary import (it raises if HiGHS is really missing)
        from scipy.optimize._highspy import _core

        return _core
    sys.modules[_HIGHS_CORE] = module
    return module


def _os_threads() -> int | None:
    """Threads of this process as the OS counts them (HiGHS' own included); None where /proc is missing."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def _finite(v: np.ndarray, big: float) -> np.ndarray:
    """Infinities as HiGHS' ``kHighsInf`` (as linprog passes them)."""
    v = v.copy()
    inf = np.isinf(v)
    v[inf] = np.sign(v[inf]) * big
    return v


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
        self.lp = _HighsLP(self.cost, self.A, self.bounds)
        self.stages, self.blocking_w = dag.stages, blocking_w
        self.levels = dag.levels
        tab = OptionTable(op_opts)
        # per op, its options padded (inf times / energies past the last)
        self.op_t, self.op_e, self.op_f = tab.t[tab.key], tab.e[tab.key], tab.f[tab.key]
        self.op_count = np.array([len(o.t) for o in op_opts])

    def _solve(self, limit_s: float) -> tuple[np.ndarray, float]:
        """(x, objective) of the LP for one limit."""
        b = self.b0.copy()
        b[self.n_edges:] += limit_s
        status, x, fun = self.lp.solve(b)
        if status == 2:
            raise ValueError(f"no plan meets {limit_s:.6f} s: every instruction at its fastest clock is slower")
        if status != 0:  # pragma: no cover - numerical trouble in HiGHS
            raise RuntimeError("the exact plan's linear program failed: HiGHS reported numerical trouble")
        return x, fun

    def hull_energy_j(self, limit_s: float) -> float:
        """Least iteration energy on the convex hulls with every op finished by ``limit_s``.

        Discrete clocks lie on or above each hull, so no plan finishing at
        ``limit_s`` uses less energy: a bound to judge a plan at that limit by.
        """
        _, fun = self._solve(limit_s)
        fastest_eff = sum(float(o.hull_e[0]) for o in self.op_opts)
        return fastest_eff + fun + self.stages * limit_s * self.blocking_w

    def plan(self, limit_s: float, greedy_reclaim: bool = True) -> np.ndarray:
        """Clocks (MHz per op) for one limit; see :func:`exact_plan`.

        ``greedy_reclaim = False`` skips the float pass (one op per step, a timeline each), for
        callers that reclaim many plans at once with :mod:`~zeus_plugins_perseus.reclaim`.
        """
        n = self.n
        x, _ = self._solve(limit_s)
        dur = self.t_fast.copy()
        np.add.at(dur, self.seg_op, x[n:])

        # --- 2. slowest measured option within each duration (the options no slower than it, counted)
        T, E, rows = self.op_t, self.op_e, np.arange(n)
        choice = np.maximum((T <= (dur + _TOL)[:, None]).sum(axis=1) - 1, 0)

        # --- 3. exact repair on real times: while the plan ends after the limit (solver tolerance),
        # speed up a late critical op, cheapest per second first, ties to the lowest op index
        lv = self.levels

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
        # --- 4. the float the plan leaves, largest saving first
        if greedy_reclaim:
            choice = reclaim_greedy(lv, T, E, self.op_count, choice, limit_s)
        return self.op_f[rows, choice].astype(np.int64)


def plan_many(planner: ExactPlanner, limits: list[float], greedy: list[bool], workers: int | None = None) -> np.ndarray:
    """``planner.plan(limit, greedy_reclaim)`` for every limit, as rows; on forked processes when safe and worth it.

    The linear programs are independent and each is solved from scratch, so a
    worker's answer is the one this process would get: same model, same
    options, a fresh HiGHS (the plans are identical whatever runs them,
    ``tests/zeus_plugins_perseus/test_exact.py``). They take most of the
    default model's planning time on large pipelines, hence up to one worker
    per CPU (``workers``: at most that many; ``None``: as many as there are
    CPUs and limits; 1: in this process). Workers are forked, so they start at
    once with the planner already built, and only when forking is safe: from
    the main thread, and never once HiGHS has started threads in this process
    (its thread pool: a forked child would inherit it without the threads; on
    a machine of 2 CPUs HiGHS starts none). Small problems (fewer than
    :data:`PARALLEL_MIN_OPS` ops) stay here unless ``workers`` asks.
    """
    n = _workers(planner, len(limits), workers)
    if n < 2:
        return np.array([planner.plan(lim, greedy_reclaim=g) for lim, g in zip(limits, greedy)], dtype=np.int64)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    global _forked_planner
    _forked_planner = planner  # what the forked workers plan with (inherited, never pickled)
    # An executor, not a multiprocessing.Pool: a worker that dies (the OOM killer) breaks the
    # executor and ends the wait with an error, where a Pool would replace it and wait forever.
    pool = ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork"), initializer=_worker_started)
    try:
        # one limit per task, the zero-slowdown plan (with its greedy pass, the longest) first
        rows = list(pool.map(_plan_in_worker, limits, greedy))
    except BrokenProcessPool:
        raise RuntimeError(
            "a process planning the real-time plans ended without an answer (killed, or out of memory?); "
            "nothing was written: run again, or lower frequency_plan.max_gap_plans (each real-time plan is "
            "a linear program over the whole pipeline)"
        ) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _forked_planner = None
    return np.array(rows, dtype=np.int64)


_forked_planner: ExactPlanner | None = None


def _workers(planner: ExactPlanner, n_limits: int, workers: int | None) -> int:
    """How many processes plan: 1 (this one) unless several limits, a fork is safe, and it pays off or is asked for."""
    if n_limits < 2 or (workers is not None and workers < 2):
        return 1
    if workers is None:
        if planner.n < PARALLEL_MIN_OPS:
            return 1
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if _highs_threads or not hasattr(os, "fork") or threading.current_thread() is not threading.main_thread():
        return 1
    return min(workers, n_limits)


def _worker_started() -> None:
    """A forked worker: the parent's signal handlers (clock restoring, run interruption) are not its own."""
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which ends the workers


def _plan_in_worker(limit: float, greedy: bool) -> np.ndarray:
    return _forked_planner.plan(limit, greedy_reclaim=greedy)

"""The hull LP of one limit as a linear program for HiGHS (its public ``highspy`` package): cross-check and fallback.

Variables: event (start) times ``s_i >= 0`` per op and ``x_ik in [0, L_ik]``,
the time op ``i`` spends on segment ``k`` of its hull (``d_i = V_i0 + sum_k
x_ik``); rows: ``s_a + d_a <= s_c`` per DAG edge and ``s_i + d_i <= T`` per
op; objective: the energy saved, ``sum_ik G_ik x_ik``, maximised. The
parametric flow (:mod:`~zeus_plugins_perseus.hull_flow`) solves the same LP for
every limit at once; this one is solved cold per limit, and which of the
optimal vertices it returns is HiGHS' choice. The planner uses it to check a
plan against (and to plan with, where OR-Tools is missing).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from zeus_plugins_perseus.clock_options import EffectiveOptions
from zeus_plugins_perseus.schedule import PipelineDAG

_banner_shown = False


def _highs():
    """A fresh, silent ``highspy.Highs`` (HiGHS prints a banner to stdout at the first one in a process)."""
    global _banner_shown
    import highspy

    if _banner_shown:
        h = highspy.Highs()
    else:
        saved = os.dup(1)
        try:
            with open(os.devnull, "w") as null:
                os.dup2(null.fileno(), 1)
                h = highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        _banner_shown = True
    h.setOptionValue("output_flag", False)
    return h


class HullLP:
    """The hull LP of a DAG, built once; :meth:`solve` runs a fresh HiGHS per limit."""

    def __init__(self, dag: PipelineDAG, op_opts: Sequence[EffectiveOptions]) -> None:
        n = self.n = dag.n_ops
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
        self.t_fast = t_fast = np.array([o.hull_t[0] for o in op_opts])
        self.e_fast = float(sum(o.hull_e[0] for o in op_opts))
        e = dag.edges
        # rows: one per edge (s_a + d_a - s_c <= -t_fast_a), then one per op (s_i + d_i <= T - t_fast_i)
        n_edges = len(e)
        edge_rows = np.arange(n_edges)
        op_rows = n_edges + np.arange(n)
        seg_cols = n + np.arange(n_seg)
        # the segments of op a appear in every row of an edge leaving a, and in op a's own row
        out_edges: list[list[int]] = [[] for _ in range(n)]
        for r, a in enumerate(e[:, 0].tolist()):
            out_edges[a].append(r)
        seg_edge_r, seg_edge_c = [], []
        for k, i in enumerate(seg_op.tolist()):
            seg_edge_r += out_edges[i]
            seg_edge_c += [n + k] * len(out_edges[i])
        rows = np.concatenate([edge_rows, edge_rows, op_rows, seg_edge_r, n_edges + seg_op]).astype(np.int64)
        cols = np.concatenate([e[:, 0], e[:, 1], np.arange(n), seg_edge_c, seg_cols]).astype(np.int64)
        vals = np.concatenate([np.ones(n_edges), -np.ones(n_edges), np.ones(n), np.ones(len(seg_edge_r)), np.ones(n_seg)])
        self.A = sp.csc_array((vals, (rows, cols)), shape=(n_edges + n, n + n_seg))
        self.A.sort_indices()
        self.n_edges = n_edges
        self.b0 = np.concatenate([-t_fast[e[:, 0]], -t_fast])
        self.cost = np.concatenate([np.zeros(n), -np.asarray(seg_gain, dtype=float)])
        self.upper = np.concatenate([np.full(n, np.inf), np.asarray(seg_len, dtype=float)])

    def solve(self, limit_s: float) -> tuple[np.ndarray, float] | None:
        """(durations per op, least hull energy of the ops) at ``limit_s``; None if no plan meets it."""
        import highspy

        h = _highs()
        inf = highspy.kHighsInf
        lp = highspy.HighsLp()
        lp.num_col_ = self.A.shape[1]
        lp.num_row_ = self.A.shape[0]
        lp.col_cost_ = self.cost
        lp.col_lower_ = np.zeros(self.A.shape[1])
        lp.col_upper_ = np.where(np.isinf(self.upper), inf, self.upper)
        lp.row_lower_ = np.full(self.A.shape[0], -inf)
        b = self.b0.copy()
        b[self.n_edges :] += limit_s
        lp.row_upper_ = b
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = self.A.indptr
        lp.a_matrix_.index_ = self.A.indices
        lp.a_matrix_.value_ = self.A.data
        lp.a_matrix_.num_col_ = lp.num_col_
        lp.a_matrix_.num_row_ = lp.num_row_
        h.passModel(lp)
        h.run()
        status = h.getModelStatus()
        if status == highspy.HighsModelStatus.kInfeasible:
            return None
        if status != highspy.HighsModelStatus.kOptimal:  # pragma: no cover - numerical trouble in HiGHS
            raise RuntimeError(f"HiGHS could not solve the hull LP at {limit_s:.6f} s: {h.modelStatusToString(status)}")
        x = np.asarray(h.getSolution().col_value)
        dur = self.t_fast.copy()
        np.add.at(dur, self.seg_op, x[self.n :])
        return dur, self.e_fast + float(h.getInfo().objective_function_value)

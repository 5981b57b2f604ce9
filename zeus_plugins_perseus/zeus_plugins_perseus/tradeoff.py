"""Exact time-cost tradeoff over a DAG: the optimal plan for every integer deadline.

Problem. Each operation ``i`` of an activity-on-node DAG runs for an integer
duration ``d_i`` in ``[lo_i, hi_i]`` at cost ``c_i(d_i)``, convex and
non-increasing (slower is cheaper, with diminishing savings). For every integer
iteration time ``T`` from the all-slowest critical path down to the all-fastest
one, find durations of minimum total cost whose critical path is at most ``T``.

Method. The published solver (Phillips-Dessouky, as in lowtime) recomputes a
minimum cut of the critical network from scratch for every unit of time. We
solve the same linear program in its potential ("event time") form and keep
its dual, a flow ``f`` that certifies optimality, across steps:

* node times ``pi`` with ``pi[sink] - pi[source] = T``; an operation runs for
  ``min(hi, pi[out] - pi[in])``. The cost of an arc as a function of its time
  span ``x`` is convex piecewise linear with integer breakpoints.
* complementary slackness: each arc's flow lies between the saving of slowing
  it by one unit (lower bound) and the cost of speeding it up by one unit
  (upper bound), both at its current span.
* a step augments ``f`` to a maximum flow inside those bounds (scipy's Dinic on
  integer capacities) and takes the minimum cut ``(S, T-side)``. Shifting every
  T-side node earlier by ``k`` keeps ``f`` optimal for as long as every cut arc
  stays on one linear piece of its cost, so one max flow yields a run of
  ``delta >= 1`` consecutive optimal plans (Fulkerson's parametric idea) and
  the flow is warm-started instead of rebuilt.

Where only plans up to the least cost with time priced in matter (the
measured model lists nothing slower than its least-energy plan), the walk
starts there instead of at the all-slowest time, from one minimum-cost flow
(``time_price``): on the published profiles that skips half the phases at
16 x 64 and gives the same plans.

Marginal costs are scaled to integers (rounding is monotone, so convexity is
kept); reported costs are always recomputed from the unrounded cost tables.
The rounding can only pick a plan whose true cost is within
``n_ops / scale`` of the optimum, far below 1e-6 relative on real profiles.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

from zeus_plugins_perseus.dag_times import CycleError, dag_levels, earliest_times, iteration_time

_INF = 2**30  # capacity of an arc that cannot be crashed further / a tight dummy arc
_FLOW_BUDGET = 2**28  # every finite capacity sum stays below this, so int32 never overflows
_NO_LIMIT = np.iinfo(np.int64).max // 4


@attrs.frozen
class Frontier:
    """Optimal plans, slowest first: ``times[k]`` (units) and ``durations[k, op]`` (units)."""

    times: np.ndarray
    durations: np.ndarray
    costs: np.ndarray  # sum of c_i(d_i), unrounded
    phases: int  # number of max-flow computations


class TradeoffError(ValueError):
    """The problem handed to the solver is malformed (a bug upstream or a bad cost model)."""


def _check_tables(lo, hi, cost_tables):
    for i, (low, h, c) in enumerate(zip(lo, hi, cost_tables)):
        c = np.asarray(c, dtype=float)
        if h < low or low < 0:
            raise TradeoffError(f"spec {i}: duration range [{low}, {h}] is empty or negative")
        if c.shape != (h - low + 1,):
            raise TradeoffError(f"spec {i}: expected {h - low + 1} costs for durations {low}..{h}, got {c.shape}")
        m = c[:-1] - c[1:]  # saving of each unit of slowing
        if np.any(m < -1e-9 * max(1.0, float(np.abs(c).max()))):
            raise TradeoffError(f"spec {i}: cost must not increase with duration")
        if np.any(np.diff(m) > 1e-9 * max(1.0, float(np.abs(m).max(initial=0.0)))):
            raise TradeoffError(f"spec {i}: cost must be convex in duration")


def solve_frontier(
    n_ops: int,
    edges: Sequence[tuple[int, int]] | np.ndarray,
    spec_of_op: Sequence[int] | np.ndarray,
    lo: Sequence[int],
    hi: Sequence[int],
    cost_tables: Sequence[Sequence[float] | np.ndarray],
    t_stop: int | None = None,
    time_price: float | None = None,
) -> Frontier:
    """Every optimal plan from the all-slowest critical path down to ``t_stop`` (default: the fastest).

    With ``time_price`` (the cost of one unit of iteration time, in the cost tables' units: the planned
    energy's blocking term), the plans start a little above the shortest time that minimises cost plus
    ``time_price`` times the iteration time (where time costs :data:`START_DISCOUNT` of that), instead of at
    the all-slowest time: every slower plan costs more with its time priced in. The walk then starts from one
    minimum-cost flow of the same rounded model and the earliest event times that fit it
    (:meth:`~zeus_plugins_perseus.hull_flow.TensionNetwork.optimal_at_price`; without OR-Tools it starts at
    the all-slowest time). Each step's cut is the minimal minimum cut of the flow bounds that the event times
    give, whichever flow reached them, so the plans are the full walk's wherever both walks reach the same
    event times (every plan, on the published profiles: see the tests); elsewhere they are other optimal
    plans of a tie.

    ``spec_of_op[i]`` indexes ``lo``/``hi``/``cost_tables``: operations that
    share a (stage, instruction) share a spec. ``cost_tables[j][k]`` is the cost
    of spec ``j`` at duration ``lo[j] + k``. ``edges`` are (before, after) pairs.
    """
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64)
    _check_tables(lo, hi, cost_tables)
    spec = np.asarray(spec_of_op, dtype=np.int64)
    if spec.shape != (n_ops,) or (n_ops and (spec.min() < 0 or spec.max() >= len(lo))):
        raise TradeoffError("spec_of_op must give a valid spec index for every operation")
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    if e.size and (e.min() < 0 or e.max() >= n_ops):
        raise TradeoffError("edges must connect operations 0..n_ops-1")

    n_spec = len(lo)
    width = int((hi - lo).max()) if n_spec else 0
    # Unrounded cost and marginal tables, padded: column y <-> duration lo + y.
    ctab = np.zeros((n_spec, width + 1))
    marg = np.zeros((n_spec, width + 2))  # marg[j, y]: saving of going from y-1 to y (0 beyond hi)
    for j, c in enumerate(cost_tables):
        c = np.asarray(c, dtype=float)
        ctab[j, : len(c)] = c
        ctab[j, len(c) :] = c[-1]
        m = np.maximum(c[:-1] - c[1:], 0.0)
        m = np.maximum.accumulate(m[::-1])[::-1]  # enforce convexity against float noise
        marg[j, 1 : len(c)] = m
    total = float(np.sum(marg[spec, 1])) if n_ops else 0.0
    scale = min(1e9, _FLOW_BUDGET / total) if total > 0 else 1.0
    mint = np.rint(marg * scale).astype(np.int64)
    mint[:, 0] = _INF  # cannot go below lo

    # Run lengths of equal slopes, for how far a cut can be reused.
    down = np.zeros_like(mint)  # intervals y, y-1, ..., 1 with the slope of interval y
    up = np.full_like(mint, _NO_LIMIT)  # intervals y+1, y+2, ... with the slope of interval y+1
    for y in range(1, width + 2):
        down[:, y] = np.where(mint[:, y] == mint[:, y - 1], down[:, y - 1] + 1, 1)
    for y in range(width, -1, -1):
        nxt = mint[:, y + 1]
        if y + 2 <= width + 1:
            same = mint[:, y + 2] == nxt
            up[:, y] = np.where(same, np.where(up[:, y + 1] >= _NO_LIMIT, _NO_LIMIT, up[:, y + 1] + 1), 1)
        else:
            up[:, y] = _NO_LIMIT
        up[:, y] = np.where(nxt == 0, _NO_LIMIT, up[:, y])
    last = width + 1

    # Graph: node 0 source, 1 sink, op i -> in 2+2i, out 3+2i.
    n_nodes = 2 + 2 * n_ops
    ops = np.arange(n_ops)
    has_pred = np.zeros(n_ops, bool)
    has_succ = np.zeros(n_ops, bool)
    if e.size:
        has_pred[e[:, 1]] = True
        has_succ[e[:, 0]] = True
    starts = ops[~has_pred]
    ends = ops[~has_succ]
    tail = np.concatenate([2 + 2 * ops, 3 + 2 * e[:, 0], np.zeros(len(starts), np.int64), 3 + 2 * ends])
    head = np.concatenate([3 + 2 * ops, 2 + 2 * e[:, 1], 2 + 2 * starts, np.ones(len(ends), np.int64)])
    n_arcs = len(tail)

    try:
        lv = dag_levels(n_ops, e)
    except CycleError as err:
        raise TradeoffError(str(err)) from None
    # Initial potentials: earliest event times with every op at its slowest duration.
    pi, _ = earliest_times(lv, hi[spec])
    pi_nodes = np.zeros(n_nodes, np.int64)
    pi_nodes[2 + 2 * ops] = pi
    pi_nodes[3 + 2 * ops] = pi + hi[spec]
    t_max = int(pi_nodes[3 + 2 * ends].max()) if n_ops else 0
    pi_nodes[1] = t_max
    t_fast = int(iteration_time(lv, lo[spec])) if n_ops else 0
    stop = t_fast if t_stop is None else max(int(t_stop), t_fast)
    T = t_max
    flow = np.zeros(n_arcs, np.int64)
    if time_price is not None and time_price > 0 and n_ops:
        start = _priced_start(lv, e, lo, hi, spec, mint, time_price * scale, t_max)
        if start is not None:
            T, pi_nodes, flow = start

    # Fixed CSR structure with a forward and a backward entry per arc.
    rows = np.concatenate([tail, head])
    cols = np.concatenate([head, tail])
    probe = sp.csr_array((np.arange(1, 2 * n_arcs + 1), (rows, cols)), shape=(n_nodes, n_nodes))
    probe.sort_indices()
    pos = np.empty(2 * n_arcs, np.int64)
    pos[probe.data - 1] = np.arange(2 * n_arcs)
    pos_f, pos_b = pos[:n_arcs], pos[n_arcs:]
    indices, indptr = probe.indices.astype(np.int32), probe.indptr.astype(np.int32)
    ones = np.ones(2 * n_arcs)  # the data of a reachability graph: a slice of it
    # One capacity matrix for every step: only its data changes (building a sparse matrix per step
    # would cost more than the maximum flow itself). maximum_flow reads it and never writes it.
    graph = sp.csr_array((np.zeros(2 * n_arcs, np.int32), indices, indptr), shape=(n_nodes, n_nodes))
    graph.has_sorted_indices = True

    lo_op, hi_op = lo[spec], hi[spec]
    row_of_op = spec * mint.shape[1]  # an op's row in the flat mint / down / up tables (1-D takes are cheaper)
    mint_flat, down_flat, up_flat = mint.ravel(), down.ravel(), up.ravel()
    in_nodes, out_nodes = 2 + 2 * ops, 3 + 2 * ops

    times = [T]
    # one int32 row per plan (thousands of plans x thousands of ops at 16 x 64: kept small)
    durs = [np.minimum(hi_op, pi_nodes[out_nodes] - pi_nodes[in_nodes]).astype(np.int32)]
    phases = 0
    # No step needs a check for a source-sink path of infinite arcs (every op at its fastest
    # duration and every dummy arc tight): such a path spans pi[sink] - pi[source] = T with
    # only fastest durations on it, so T <= t_fast <= stop, and the loop has ended before.
    while T > stop:
        phases += 1
        x = pi_nodes[head] - pi_nodes[tail]
        y = np.minimum(x[:n_ops] - lo_op, last)
        ub = np.empty(n_arcs, np.int64)
        lb = np.zeros(n_arcs, np.int64)
        at = row_of_op + y
        ub[:n_ops] = mint_flat.take(at)
        lb[:n_ops] = mint_flat.take(np.minimum(at + 1, row_of_op + last))
        ub[n_ops:] = np.where(x[n_ops:] == 0, _INF, 0)
        cap = np.empty(2 * n_arcs, np.int64)
        cap[pos_f] = np.where(ub >= _INF, _INF, ub - flow)
        cap[pos_b] = flow - lb
        if cap.min() < 0:  # pragma: no cover - would mean a broken invariant
            raise TradeoffError("internal error: flow left its complementary-slackness bounds")
        # Most steps find the flow already maximum (only the bounds moved): then the source cannot
        # reach the sink over residual capacity, the maximum flow would add nothing (Dinic finds no
        # path), and that reachable set is already the minimum cut. Only otherwise is the flow augmented.
        in_s = _reachable(cap > 0, indices, indptr, ones)
        if in_s[1]:
            graph.data[:] = cap
            res = maximum_flow(graph, 0, 1)
            net = res.flow.data.astype(np.int64)
            flow += net[pos_f]
            # the minimum cut: what the source reaches over arcs with residual capacity
            in_s = _reachable(cap > net, indices, indptr, ones)
            if in_s[1]:  # pragma: no cover - a finite maximum flow always cuts the sink off
                raise TradeoffError("internal error: the sink is reachable after a maximum flow")
        fwd = in_s[tail] & ~in_s[head]
        bwd = ~in_s[tail] & in_s[head]
        limit = T - stop
        fa = fwd[:n_ops]
        if fa.any():
            ya = x[:n_ops][fa] - lo_op[fa]
            lim = down_flat.take(row_of_op[fa] + np.minimum(ya, last)) + np.maximum(ya - last, 0)
            limit = min(limit, int(lim.min()))
        fd = fwd[n_ops:]
        if fd.any():
            limit = min(limit, int(x[n_ops:][fd].min()))
        ba = bwd[:n_ops]
        if ba.any():
            ya = x[:n_ops][ba] - lo_op[ba]
            lim = up_flat.take(row_of_op[ba] + np.minimum(ya, last))
            limit = min(limit, int(lim.min()))
        if limit < 1:  # pragma: no cover
            raise TradeoffError("internal error: a minimum cut that cannot move")
        moved = (~in_s).astype(np.int64)
        shift = moved[out_nodes] - moved[in_nodes]
        base = pi_nodes[out_nodes] - pi_nodes[in_nodes]
        for k in range(1, limit + 1):
            times.append(T - k)
            durs.append(np.minimum(hi_op, base - k * shift).astype(np.int32))
        pi_nodes -= limit * moved
        T -= limit
    durations = np.vstack(durs)
    del durs
    costs = np.empty(len(durations))
    for k in range(0, len(durations), 256):  # blocks: the index arrays of all plans at once would dwarf the plans
        block = durations[k : k + 256]
        costs[k : k + 256] = ctab[spec[None, :], block - lo_op[None, :]].sum(axis=1)
    return Frontier(times=np.asarray(times, np.int64), durations=durations, costs=costs, phases=phases)


#: the priced walk starts where time costs this much less than asked (a little slower than the least-cost time)
START_DISCOUNT = 0.98


def _priced_start(lv, e, lo, hi, spec, mint, rate, t_max):
    """(time, event times per node, flow per arc) optimal in the walk's rounded model at the shortest least-cost
    time when a unit of time costs :data:`START_DISCOUNT` times ``rate`` (in the model's scaled units); None when
    that is the all-slowest time, or when the start could miss a plan of least cost at ``rate``.

    Slower than the start, the model's cost plus ``rate`` per unit grows by at least ``(1 - START_DISCOUNT) *
    rate`` per unit, and the unrounded costs differ from the model's by at most half a scaled unit per op and
    unit of duration (consecutive plans of the walk differ by at most a unit per op and unit of time), so where
    the first exceeds ``n_ops / 2`` no slower plan costs less than the start's with its time priced in,
    unrounded too; otherwise the walk starts at the all-slowest time.

    The model's ops as a :class:`~zeus_plugins_perseus.hull_flow.TensionNetwork`: a vertex where the marginal
    cost changes (between two, the cost is linear: the walk's flow sits exactly on the saving there too).
    """
    n = len(spec)
    if not (1 - START_DISCOUNT) * rate > n / 2:
        return None
    from zeus_plugins_perseus.hull_flow import HullFlowError, TensionNetwork

    rows_v, rows_g = [], []
    for j in range(len(lo)):  # per spec: its vertices (units) and the savings after each
        k = int(hi[j] - lo[j])
        g = mint[j, 1 : k + 1]
        keep = np.flatnonzero(np.r_[True, g[1:] != g[:-1], True]) if k else np.zeros(1, np.int64)
        rows_v.append(lo[j] + keep)
        rows_g.append(np.r_[g, 0][keep])
    kmax = max(len(v) for v in rows_v)
    V = np.full((len(lo), kmax), np.iinfo(np.int64).max // 4, np.int64)
    G = np.zeros((len(lo), kmax), np.int64)
    for j, (v, g) in enumerate(zip(rows_v, rows_g)):
        V[j, : len(v)], G[j, : len(g)] = v, g
    K = np.array([len(v) - 1 for v in rows_v], np.int64)
    net = TensionNetwork(lv, e, V[spec], G[spec], K[spec])
    try:
        pi, f = net.optimal_at_price(int(np.floor(rate * START_DISCOUNT)))
    except (ImportError, HullFlowError):  # no OR-Tools (or it failed): the walk starts at the all-slowest time
        return None
    if pi[1] >= t_max:
        return None
    if pi.shape != (2 + 2 * n,) or f.shape != (len(net.tail),):  # pragma: no cover
        raise TradeoffError("internal error: the priced start does not fit the walk's network")
    return int(pi[1]), pi, f


def _reachable(open_: np.ndarray, indices: np.ndarray, indptr: np.ndarray, ones: np.ndarray) -> np.ndarray:
    """Nodes the source (node 0) reaches over the CSR entries (``indices``, ``indptr``) where ``open_`` holds.

    The graph of the open entries is a float64 ``csr_matrix`` (csgraph's validation then builds no other
    matrix, where a ``csr_array`` would be converted): the phases call this thousands of times. Entries are
    stored row by row, so the open entries before each row start are the running count of ``open_``.
    """
    n_nodes = len(indptr) - 1
    before = np.zeros(len(open_) + 1, np.int32)
    np.cumsum(open_, out=before[1:])
    reach = sp.csr_matrix((ones[: before[-1]], indices[open_], before[indptr]), shape=(n_nodes, n_nodes))
    in_s = np.zeros(n_nodes, bool)
    in_s[breadth_first_order(reach, 0, directed=True, return_predecessors=False)] = True
    return in_s

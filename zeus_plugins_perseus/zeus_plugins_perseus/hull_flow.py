"""The real-time plans' linear program, solved for every limit at once as one parametric minimum-cost flow.

The LP (the "hull LP"): each op ``i`` runs for a duration ``d_i`` on the lower
convex hull of its measured (time, effective energy) options, with vertices
``V_i0 < ... < V_iK`` and savings per second ``G_i0 > ... > G_i,K-1 > 0`` on
the segments between them; event times ``pi`` make every op start after its
predecessors finish and finish by the limit ``T``; the hull energy is
minimised. It is the linear time-cost trade-off problem, whose dual is a
minimum-cost flow (Fulkerson 1961, Kelley 1961): node potentials are event
times (``in_i`` / ``out_i`` per op, a source ``sigma`` at 0 and a sink ``tau``
at ``T``), and a flow ``f`` certifies that ``pi`` is optimal when every arc's
flow lies within the savings on either side of its span (complementary
slackness): an op at vertex ``j`` carries ``G_ij <= f <= G_i,j-1``, one inside
segment ``j`` exactly ``G_ij``, one slower than ``V_iK`` nothing, and a
dependency arc carries flow only while it is tight.

Solution, in integers (times in :data:`UNIT_S`, savings in :data:`GAIN_UNIT`):

1. at the largest limit, an optimal circulation from OR-Tools'
   ``SimpleMinCostFlow`` (each op as ``K + 1`` parallel arcs of cost ``-V_ij``,
   a return arc ``tau -> sigma`` of cost ``T``), and optimal event times from
   it by one Bellman-Ford on the complementary-slackness constraints;
2. the parametric walk down through every limit (primal-dual phases): augment
   ``f`` to a maximum flow within its bounds (OR-Tools' ``SimpleMaxFlow``, only
   when the source still reaches the sink), take the source-side minimum cut,
   and move every sink-side event earlier by the largest step that keeps each
   cut arc on its hull piece or reaches the next limit;
3. at each limit, the two canonical optimal solutions: the earliest and the
   latest optimal event times (Dijkstra from ``sigma`` and ``tau`` on the
   slack of the complementary-slackness constraints). Every optimal solution
   lies between them, and neither depends on which optimal flow, vertex or
   solver produced ``f``: they are properties of the LP alone.

:class:`TensionNetwork` holds what does not depend on hulls (the network, the
flow bounds, an optimal flow and event times at a limit or at a price of time);
the quantised frontier's walk (:mod:`~zeus_plugins_perseus.tradeoff`) starts
from one at a price of time.

Rounding: a hull vertex's time is rounded to 10 ps and a saving to 1e-6 J/s
(monotone, so the hulls stay convex); the plans are judged on real times later.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import attrs
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, dijkstra, shortest_path

from zeus_plugins_perseus.clock_options import EffectiveOptions
from zeus_plugins_perseus.dag_times import DagLevels, iteration_time
from zeus_plugins_perseus.schedule import PipelineDAG

UNIT_S = 1e-11  #: seconds per integer time unit
GAIN_UNIT = 1e-6  #: joules per second per integer saving unit
_INF = 1 << 50  # capacity of an arc without a bound: above any flow the walk can carry (savings sum to ~1e11)
_FAR = np.iinfo(np.int64).max // 4  # a vertex past the last one


class HullFlowError(RuntimeError):
    """A solver library answered something the walk cannot use (a bug, or a library that changed)."""


def to_units(seconds) -> np.ndarray:
    return np.rint(np.asarray(seconds, dtype=float) / UNIT_S).astype(np.int64)


@attrs.frozen
class HullSolution:
    """The two canonical optimal solutions of the hull LP at one limit: durations in :data:`UNIT_S` per op."""

    limit_units: int
    earliest: np.ndarray
    latest: np.ndarray
    hull_energy: float  # sum of the ops' hull energies (J, effective) at the optimum, from the unrounded hulls


class TensionNetwork:
    """Ops with integer vertices ``V`` and savings ``G`` (convex piecewise-linear time costs) on a DAG's event
    network: its flow bounds, and optimal flows and event times at a limit (or at a price of time).

    Node 0 is the source ``sigma``, node 1 the sink ``tau``, op ``i`` runs from node ``2 + 2i`` to ``3 + 2i``;
    arcs: the ops, then the DAG's edges, then ``sigma`` to every first op and every last op to ``tau``.
    ``V[i, j]`` (j <= K[i]) are op ``i``'s vertices, fastest first; ``G[i, j]`` the saving per unit of time on
    the segment after vertex ``j`` (non-increasing in ``j``, 0 from ``K[i]`` on).
    """

    def __init__(self, levels: DagLevels, edges: np.ndarray, V: np.ndarray, G: np.ndarray, K: np.ndarray) -> None:
        n = self.n = len(K)
        self.V, self.G, self.K = V, G, K
        up = np.full_like(G, _INF)
        up[:, 1:] = G[:, :-1]
        self.G_up = up  # flow bound above at vertex j: the saving of the segment before it
        self.fastest, self.slowest = V[:, 0], V[np.arange(n), K]
        self.levels = levels
        e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
        ops = np.arange(n)
        starts = ops[~levels.has_preds]
        ends = ops[~levels.has_succs]
        self.tail = np.concatenate([2 + 2 * ops, 3 + 2 * e[:, 0], np.zeros(len(starts), np.int64), 3 + 2 * ends])
        self.head = np.concatenate([3 + 2 * ops, 2 + 2 * e[:, 1], 2 + 2 * starts, np.ones(len(ends), np.int64)])
        self.n_nodes = 2 + 2 * n
        self.n_arcs = len(self.tail)
        self.t_min = int(iteration_time(levels, self.fastest))
        self.t_max = int(iteration_time(levels, self.slowest))

    # -- bounds from spans and from flows --

    def _position(self, x: np.ndarray):
        """(vertex or segment index j, whether the span sits on vertex j) of every op's span."""
        rows = np.arange(self.n)
        j = (self.V <= x[:, None]).sum(axis=1) - 1
        if (j < 0).any():  # pragma: no cover - the walk never goes below the fastest vertex
            raise HullFlowError("an op's span is below its fastest time")
        return j, self.V[rows, j] == x

    def _bounds(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Flow bounds (lb, ub) of every arc at spans ``x``."""
        n = self.n
        rows = np.arange(n)
        j, at = self._position(x[:n])
        lb = np.zeros(self.n_arcs, np.int64)
        ub = np.zeros(self.n_arcs, np.int64)
        lb[:n] = self.G[rows, j]
        ub[:n] = np.where(at, self.G_up[rows, j], lb[:n])
        ub[n:] = np.where(x[n:] == 0, _INF, 0)
        return lb, ub

    def _span_range(self, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per arc, the spans (xmin, xmax; xmax -1 for no bound) at which flow ``f`` is optimal."""
        n = self.n
        rows = np.arange(n)
        fo = f[:n, None]
        j0 = (self.G > fo).sum(axis=1)
        valid = np.arange(self.G.shape[1])[None, :] <= self.K[:, None]
        j1 = ((self.G >= fo) & valid).sum(axis=1)  # vertices j0..j1 carry f (j1 = K + 1: slower than V_K too)
        xmin = np.empty(self.n_arcs, np.int64)
        xmax = np.empty(self.n_arcs, np.int64)
        xmin[:n] = self.V[rows, np.minimum(j0, self.K)]
        xmax[:n] = np.where(j1 > self.K, -1, self.V[rows, np.minimum(j1, self.K)])
        xmin[n:] = 0
        xmax[n:] = np.where(f[n:] > 0, 0, -1)
        return xmin, xmax

    def _start(self, T: int) -> tuple[np.ndarray, np.ndarray]:
        """Optimal (event times, flow) at limit ``T``."""
        f = np.zeros(self.n_arcs, np.int64)
        if T < self.t_max:
            f = self._min_cost_circulation(T)
        xmin, xmax = self._span_range(f)
        pi = self._feasible_times(xmin, xmax, T)
        return pi, f

    def _min_cost_circulation(self, T: int | None, rate: int = 0) -> np.ndarray:
        """An optimal flow at limit ``T`` (a circulation with a return arc ``tau -> sigma`` of cost ``T``), or with
        ``T`` None, at the price ``rate`` per unit of time (a flow of value ``rate`` from ``sigma`` to ``tau``)."""
        from ortools.graph.python import min_cost_flow

        n = self.n
        rows = np.arange(n)
        K = self.K
        cols = np.arange(self.V.shape[1])[None, :]
        valid = cols <= K[:, None]
        # op i as K+1 parallel arcs in_i -> out_i: vertex j costs -V_ij, its capacity G_i,j-1 - G_ij (j = 0: none)
        cap = np.where(cols == 0, 0, self.G_up - self.G)
        op_of = np.broadcast_to(rows[:, None], valid.shape)[valid]
        caps = cap[valid]
        costs = -self.V[valid]
        finite_total = int(caps.sum())
        big = max(finite_total, rate) + 1
        caps = np.where(np.broadcast_to(cols == 0, valid.shape)[valid], big, caps)
        ret = [] if T is None else [1]
        tails = np.concatenate([self.tail[op_of], self.tail[n:], ret])
        heads = np.concatenate([self.head[op_of], self.head[n:], [0] if ret else []])
        capacity = np.concatenate([caps, np.full(self.n_arcs - n, big), [big] if ret else []])
        cost = np.concatenate([costs, np.zeros(self.n_arcs - n, np.int64), [T] if ret else []])
        m = min_cost_flow.SimpleMinCostFlow()
        arcs = m.add_arcs_with_capacity_and_unit_cost(
            tails.astype(np.int32), heads.astype(np.int32), capacity.astype(np.int64), cost.astype(np.int64)
        )
        if T is None:
            m.set_node_supply(0, rate)
            m.set_node_supply(1, -rate)
        status = m.solve()
        if status != m.OPTIMAL:
            raise HullFlowError(f"OR-Tools' min-cost flow answered status {status}")
        flows = np.asarray(m.flows(np.asarray(arcs, dtype=np.int32)), dtype=np.int64)
        f = np.zeros(self.n_arcs, np.int64)
        k = len(op_of)
        np.add.at(f, op_of, flows[:k])
        f[n:] = flows[k : k + self.n_arcs - n]
        return f

    def _feasible_times(self, xmin, xmax, T: int | None) -> np.ndarray:
        """The earliest event times within the span ranges, sigma at 0 and tau at ``T`` (anywhere without one:
        then at its earliest), by Bellman-Ford."""
        # pi(head) - pi(tail) >= xmin; pi(tail) - pi(head) >= -xmax; pi(tau) - pi(sigma) = T
        has_hi = xmax >= 0
        ends = np.array([] if T is None else [0, 1], dtype=np.int64)  # sigma -> tau at T, tau -> sigma at -T
        a = np.concatenate([self.tail, self.head[has_hi], ends])
        b = np.concatenate([self.head, self.tail[has_hi], ends[::-1]])
        w = np.concatenate([xmin, -xmax[has_hi], [T, -T] if T is not None else []]).astype(float)
        # longest paths from sigma = shortest paths of the negated lengths
        g = sp.csr_array((-w, (a, b)), shape=(self.n_nodes, self.n_nodes))
        d = shortest_path(g, method="BF", directed=True, indices=0)
        pi = np.rint(-d).astype(np.int64)
        if not np.isfinite(d).all() or (T is not None and pi[1] != T):  # pragma: no cover
            raise HullFlowError("no event times fit the starting flow")
        return pi

    def optimal_at_price(self, rate: int) -> tuple[np.ndarray, np.ndarray]:
        """Optimal (event times, flow) of the ops' cost plus ``rate`` per unit of iteration time, at the shortest
        iteration time that minimises it (``tau``'s event time).

        One minimum-cost flow of value ``rate`` from ``sigma`` to ``tau`` (the parallel arcs of
        :meth:`_start`'s circulation with no return arc: its flow is the price of time), then the earliest event
        times that fit it.
        """
        f = self._min_cost_circulation(None, max(int(rate), 0))
        return self._feasible_times(*self._span_range(f), None), f


class HullFlow(TensionNetwork):
    """The network of one DAG and its ops' hulls; :meth:`solve` walks it through a list of limits."""

    def __init__(self, dag: PipelineDAG, op_opts: Sequence[EffectiveOptions]) -> None:
        uniq: dict[int, int] = {}
        key = np.array([uniq.setdefault(id(o), len(uniq)) for o in op_opts], dtype=np.int64)
        rows = list({id(o): o for o in op_opts}.values())
        kmax = max(len(o.hull_t) for o in rows)
        V = np.full((len(rows), kmax + 1), _FAR, dtype=np.int64)
        G = np.zeros((len(rows), kmax + 1), dtype=np.int64)  # G[j]: saving per unit on segment j; 0 from K on
        self._hull_t = [o.hull_t for o in rows]
        self._hull_e = [o.hull_e for o in rows]
        for r, o in enumerate(rows):
            k = len(o.hull_t) - 1
            V[r, : k + 1] = to_units(o.hull_t)
            if k:
                g = -np.diff(o.hull_e) / np.diff(o.hull_t)
                G[r, :k] = np.minimum.accumulate(np.maximum(np.rint(g / GAIN_UNIT), 0).astype(np.int64))
        self.key = key
        K = np.array([len(o.hull_t) - 1 for o in rows], dtype=np.int64)[key]
        super().__init__(dag.levels, dag.edges, V[key], G[key], K)

    # -- the walk --

    def solve(self, limits_units: Sequence[int]) -> Iterator[HullSolution]:
        """The canonical solutions at each limit, largest first; every limit must be >= :attr:`t_min`."""
        targets = sorted({int(t) for t in limits_units}, reverse=True)
        if not targets:
            return
        if targets[-1] < self.t_min:
            raise ValueError("a limit is below the fastest critical path")
        pi, f = self._start(targets[0])
        T = targets[0]
        mf = _MaxFlow(self)
        for target in targets:
            while T > target:
                T = self._phase(pi, f, T, target, mf)
            yield self._canonical(pi, f, T)

    def _constraint_graph(self, pi, xmin, xmax, T, reverse: bool):
        """Slack graph of the complementary-slackness constraints at potentials ``pi``: arc lengths >= 0."""
        x = pi[self.head] - pi[self.tail]
        lo_len = x - xmin
        has_hi = xmax >= 0
        hi_len = (xmax - x)[has_hi]
        if (lo_len < 0).any() or (hi_len < 0).any():  # pragma: no cover
            raise HullFlowError("event times violate the flow's complementary slackness")
        # earliest: d_head <= d_tail + lo_len (tail -> head), d_tail <= d_head + hi_len (head -> tail)
        a = np.concatenate([self.tail, self.head[has_hi]])
        b = np.concatenate([self.head, self.tail[has_hi]])
        w = np.concatenate([lo_len, hi_len]).astype(float)
        if reverse:
            a, b = b, a
        return sp.csr_array((w, (a, b)), shape=(self.n_nodes, self.n_nodes))

    def _phase(self, pi, f, T, target, mf) -> int:
        """One primal-dual phase: maximum flow, minimum cut, shift; returns the new limit."""
        n = self.n
        x = pi[self.head] - pi[self.tail]
        lb, ub = self._bounds(x)
        fwd_cap = ub - f
        bwd_cap = f - lb
        if fwd_cap.min() < 0 or bwd_cap.min() < 0:  # pragma: no cover
            raise HullFlowError("the flow left its complementary-slackness bounds")
        in_s = self._reachable(fwd_cap > 0, bwd_cap > 0)
        if in_s[1]:
            net = mf.augment(fwd_cap, bwd_cap)
            f += net
            in_s = self._reachable(fwd_cap - net > 0, bwd_cap + net > 0)
            if in_s[1]:  # pragma: no cover
                raise HullFlowError("the sink is reachable after a maximum flow")
        fwd = in_s[self.tail] & ~in_s[self.head]
        bwd = ~in_s[self.tail] & in_s[self.head]
        step = T - target
        rows = np.arange(n)
        j, at = self._position(x[:n])
        fo = fwd[:n]
        if fo.any():
            prev = np.where(at, self.V[rows, np.maximum(j - 1, 0)], self.V[rows, j])
            step = min(step, int((x[:n] - prev)[fo].min()))
        fd = fwd[n:]
        if fd.any():
            step = min(step, int(x[n:][fd].min()))
        bo = bwd[:n] & (j < self.K)
        if bo.any():
            step = min(step, int((self.V[rows, np.minimum(j + 1, self.V.shape[1] - 1)] - x[:n])[bo].min()))
        if step < 1:  # pragma: no cover
            raise HullFlowError("a minimum cut that cannot move")
        step = min(step, T - target)
        pi[~in_s] -= step
        return T - step

    def _reachable(self, fwd_open, bwd_open) -> np.ndarray:
        a = np.concatenate([self.tail[fwd_open], self.head[bwd_open]])
        b = np.concatenate([self.head[fwd_open], self.tail[bwd_open]])
        g = sp.csr_matrix((np.ones(len(a)), (a, b)), shape=(self.n_nodes, self.n_nodes))  # see tradeoff._reachable
        in_s = np.zeros(self.n_nodes, bool)
        in_s[breadth_first_order(g, 0, directed=True, return_predecessors=False)] = True
        return in_s

    def _canonical(self, pi, f, T) -> HullSolution:
        xmin, xmax = self._span_range(f)
        out = []
        for reverse in (False, True):
            g = self._constraint_graph(pi, xmin, xmax, T, reverse)
            d = np.rint(dijkstra(g, directed=True, indices=[0, 1], min_only=True)).astype(np.int64)
            p = pi - d if not reverse else pi + d
            span = p[3 + 2 * np.arange(self.n)] - p[2 + 2 * np.arange(self.n)]
            out.append(np.minimum(span, self.slowest))
        energy = self.hull_energy(out[0])
        return HullSolution(limit_units=T, earliest=out[0], latest=out[1], hull_energy=energy)

    def hull_energy(self, durations: np.ndarray) -> float:
        """Sum of the ops' (unrounded) hull energies at integer ``durations``."""
        total = 0.0
        for r in range(len(self._hull_t)):
            ops = self.key == r
            total += float(np.interp(durations[ops] * UNIT_S, self._hull_t[r], self._hull_e[r]).sum())
        return total


class _MaxFlow:
    """OR-Tools' maximum flow on the residual network (forward arcs, then backward), built once."""

    def __init__(self, net: HullFlow) -> None:
        from ortools.graph.python import max_flow

        self.m = max_flow.SimpleMaxFlow()
        tails = np.concatenate([net.tail, net.head]).astype(np.int32)
        heads = np.concatenate([net.head, net.tail]).astype(np.int32)
        self.arcs = np.asarray(self.m.add_arcs_with_capacity(tails, heads, np.zeros(len(tails), np.int64)), dtype=np.int32)
        self.n_arcs = net.n_arcs

    def augment(self, fwd_cap: np.ndarray, bwd_cap: np.ndarray) -> np.ndarray:
        """Net flow added on each arc by a maximum flow from sigma to tau within the residual capacities."""
        self.m.set_arcs_capacity(self.arcs, np.concatenate([fwd_cap, bwd_cap]).astype(np.int64))
        status = self.m.solve(0, 1)
        if status != self.m.OPTIMAL:
            raise HullFlowError(f"OR-Tools' maximum flow answered status {status}")
        flows = np.asarray(self.m.flows(self.arcs), dtype=np.int64)
        return flows[: self.n_arcs] - flows[self.n_arcs :]

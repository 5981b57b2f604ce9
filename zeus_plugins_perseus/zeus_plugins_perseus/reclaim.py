"""Give back the slack a quantised plan leaves on the real timeline, for many plans at once.

A plan solved in integer time units assigns each instruction the slowest clock
whose *rounded* time fits its planned duration. On the measured timeline most
instructions then finish early, and instructions off the critical path keep
float that a slower clock could use for free: same iteration time, less
energy (a slower Pareto option burns less *effective* energy, and the blocking
term ``stages x T x P_blocking`` does not change while ``T`` does not).

The pass is safe by construction. With ``lf`` the latest finish of every op on
the current plan (against the plan's own measured iteration time), ops are
visited in topological order and each takes the slowest Pareto option that
still finishes by its ``lf`` given its predecessors' *new* finish times.
Every successor ``w`` of ``v`` has ``lf[v] <= lf[w] - t[w]``, so ``w`` still
fits at its old clock and, by induction, no op finishes after its ``lf``: the
iteration time never grows. The mirror pass (reverse topological order, each
op starting no earlier than its earliest start) gives slack to late ops
instead; each plan keeps whichever saves more, and passes repeat while they
help. All plans are handled together with numpy, a level of the DAG (ops that
share no edge) at a time.

:meth:`OnePlanPasses.greedy` is the other order, for one plan: every op whose
next slower option fits its float is a candidate, the one saving the most
energy takes it, and the float follows each step; the real-time plans use it
(and :meth:`OnePlanPasses.repair` to meet their limit first).
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from zeus_plugins_perseus.clock_options import OptionTable, effective_options
from zeus_plugins_perseus.dag_times import (
    DagLevels,
    DagLinks,
    FloatTimeline,
    earliest_finish,
    earliest_times,
    iteration_time,
    latest_finish,
)
from zeus_plugins_perseus.emulator import chunks, measured_tables
from zeus_plugins_perseus.profile import InstructionProfile
from zeus_plugins_perseus.schedule import PipelineDAG

_EPS = 1e-12  # relative float guard on windows


def _pass(tab: OptionTable, lv: DagLevels, freqs, times, eff, limit, forward: bool):
    """One safe pass, a level of the DAG at a time; returns new (freqs, times, eff) arrays (inputs untouched).

    Arrays are op-major (``[op, plan]``). Forward: each op may use the window
    from its earliest start on the new plan to its latest finish on the old
    one; backward: from its earliest start on the old plan to its latest
    finish on the new one.
    """
    freqs, times, eff = freqs.copy(), times.copy(), eff.copy()
    guard = limit * _EPS

    def choose(ops, window):
        _choose(tab, ops, freqs, times, eff, window)

    if forward:
        lf = latest_finish(lv, times, limit)
        earliest_finish(lv, times, lambda ops, es: choose(ops, lf[ops] - es - guard))
    else:
        es, _ = earliest_times(lv, times)
        latest_finish(lv, times, limit, lambda ops, lf: choose(ops, lf - es[ops] - guard))
    return freqs, times, eff


def _choose(tab: OptionTable, ops: np.ndarray, freqs, times, eff, window) -> None:
    """Ops ``ops`` of every plan take the slowest Pareto option within ``window[op, plan]`` if it saves energy."""
    key = tab.key[ops]
    k = tab.count_within(key, window) - 1
    ok = k >= 0
    at = (key * tab.t.shape[1])[:, None] + np.maximum(k, 0)  # into the flat option tables
    t_k, e_k = tab.t_flat.take(at), tab.e_flat.take(at)
    t_now, e_now = times[ops], eff[ops]
    better = ok & (e_k < e_now) & (t_k > t_now)
    if better.any():
        freqs[ops] = np.where(better, tab.f_flat.take(at), freqs[ops])
        times[ops] = np.where(better, t_k, t_now)
        eff[ops] = np.where(better, e_k, e_now)


def reclaim_slack(
    dag: PipelineDAG, profile: InstructionProfile, freqs: np.ndarray, blocking_power_w: float, max_passes: int = 4
) -> np.ndarray:
    """Clocks ``freqs[plan, op]`` with float spent: measured time never longer, energy never higher.

    KeyError (naming the op and clock) if a plan uses a clock the profile lacks.
    """
    freqs = np.atleast_2d(np.asarray(freqs, dtype=np.int64))
    if freqs.size == 0:
        return freqs.copy()
    tab = OptionTable(effective_options(dag, profile, blocking_power_w))
    out = np.empty_like(freqs)
    for rows in chunks(len(freqs)):  # plans are independent: blocks bound the work arrays
        out[rows] = _reclaim(dag, profile, tab, freqs[rows], blocking_power_w, max_passes)
    return out


def _reclaim(dag, profile, tab, freqs, blocking_power_w, max_passes):
    """Passes over one block of plans, op-major inside (``[op, plan]``), ``freqs[plan, op]`` in and out."""
    times, energies = measured_tables(dag, profile, freqs)
    eff = energies - blocking_power_w * times
    lv = dag.levels
    limit = iteration_time(lv, times.T)
    freqs, times, eff = freqs.T.copy(), times.T.copy(), eff.T.copy()

    def energy(e):  # per plan, summed along [plan, op] rows as always: numpy sums a strided row in another order
        return np.ascontiguousarray(e.T).sum(axis=1)

    total = energy(eff)
    for _ in range(max_passes):
        cands = [_pass(tab, lv, freqs, times, eff, limit, fw) for fw in (True, False)]
        backward = np.argmin([energy(c[2]) for c in cands], axis=0)[None, :] == 1
        new_f, new_t, new_e = (np.where(backward, b, f) for f, b in zip(cands[0], cands[1]))
        # float safety: a plan whose iteration time grew keeps its old clocks
        grew = iteration_time(lv, new_t) > limit
        new_f[:, grew], new_t[:, grew], new_e[:, grew] = freqs[:, grew], times[:, grew], eff[:, grew]
        new_total = energy(new_e)
        gain = total - new_total
        freqs, times, eff, total = new_f, new_t, new_e, new_total
        if not np.any(gain > 1e-9):
            break
    return freqs.T


class OnePlanPasses:
    """Passes over one plan's option indices at a time: the repair of a plan over its limit and the greedy pass.

    ``op_t[op, k]`` / ``op_e[op, k]`` are each op's Pareto options fastest
    first (effective energy), ``op_count[op]`` how many. The DAG's neighbour
    lists and the options are turned into Python lists once, for the scalar
    steps of many plans.
    """

    def __init__(self, lv: DagLevels, op_t: np.ndarray, op_e: np.ndarray, op_count: np.ndarray) -> None:
        self.links = DagLinks(lv)
        self.t, self.e, self.count = op_t.tolist(), op_e.tolist(), op_count.tolist()
        # speed_cost[v, k]: energy per second of speeding op v up from option k to k - 1 (inf for k = 0 and past
        # its options), by the same float operations as a scalar loop would use
        with np.errstate(invalid="ignore", divide="ignore"):
            cost = (op_e[:, :-1] - op_e[:, 1:]) / (op_t[:, 1:] - op_t[:, :-1])
        self.speed_cost = np.concatenate([np.full((len(op_t), 1), np.inf), np.where(np.isnan(cost), np.inf, cost)], 1)

    def timeline(self, choice: list[int], limit: float) -> FloatTimeline:
        return FloatTimeline(self.links, [self.t[v][k] for v, k in enumerate(choice)], limit)

    def repair(self, choice: np.ndarray, limit: float) -> tuple[np.ndarray, FloatTimeline]:
        """Option indices meeting ``limit`` (and their timeline): while the plan ends after it, speed up a late
        critical op, cheapest per second first (ties to the lowest op index)."""
        c = choice.tolist()
        t = self.t
        tl = self.timeline(c, limit)
        if max(tl.ef) <= limit:
            return np.asarray(c, dtype=choice.dtype), tl
        k = np.asarray(choice, dtype=np.int64).copy()
        rows = np.arange(len(c))
        cost = self.speed_cost[rows, k]
        while max(tl.ef) > limit:
            late = np.asarray(tl.ef) > np.asarray(tl.lf)
            pick = np.where(late, cost, np.inf)
            best = int(np.argmin(pick))  # the first on a tie: the lowest op index
            if not pick[best] < math.inf:  # pragma: no cover - cannot happen when the all-fastest plan meets the limit
                raise ValueError(f"no plan meets {limit:.6f} s")
            k[best] -= 1
            cost[best] = self.speed_cost[best, k[best]]
            tl.set_time(best, t[best][k[best]])
        return k.astype(choice.dtype), tl

    def greedy(self, choice: np.ndarray, limit: float, tl: FloatTimeline | None = None) -> np.ndarray:
        """``choice`` with float spent, largest saving first; a new array. The plan must finish by ``limit`` (``tl``:
        its timeline, which the pass goes on with); it still does. Ties go to the lowest op index.

        Each step slows the op of largest saving among those whose next option
        fits their float. Slowing an op never gives another op more float
        (earliest finishes only grow, latest ones only shrink), so an op that
        does not fit never fits later: the ops wait in a heap by saving, one
        that does not fit when it comes up is dropped, and the finish times
        follow each step incrementally
        (:class:`~zeus_plugins_perseus.dag_times.FloatTimeline`). The steps are
        the ones of recomputing every op's float before each.
        """
        c = choice.tolist()
        t, e, count = self.t, self.e, self.count
        if tl is None:
            tl = self.timeline(c, limit)
        heap = [(e[v][k + 1] - e[v][k], v) for v, k in enumerate(c) if k + 1 < count[v]]  # (-saving, op)
        heapq.heapify(heap)
        pop, push = heapq.heappop, heapq.heappush
        ef, lf = tl.ef, tl.lf  # updated in place by set_time: lf[v] - ef[v] is tl.slack(v)
        while heap:
            neg, v = pop(heap)
            if not -neg > 0.0:
                break
            k = c[v]
            tv = t[v]
            if not tv[k + 1] - tv[k] <= lf[v] - ef[v]:
                continue
            if not tl.set_time(v, tv[k + 1]):  # a float rounding of the slack: keep the faster option
                continue
            c[v] = k + 1
            if k + 2 < count[v]:
                ev = e[v]
                push(heap, (ev[k + 2] - ev[k + 1], v))
        return np.asarray(c, dtype=choice.dtype)

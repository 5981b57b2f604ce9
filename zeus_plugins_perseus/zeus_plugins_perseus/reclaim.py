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

:func:`reclaim_greedy` is the other order, for one plan: every op whose next
slower option fits its float is a candidate, the one saving the most energy
takes it, and the float is recomputed before the next; it costs two DAG passes
per step, so the planner spends it on the zero-slowdown plan only.
"""

from __future__ import annotations

import numpy as np

from zeus_plugins_perseus.clock_options import OptionTable, effective_options
from zeus_plugins_perseus.dag_times import DagLevels, earliest_finish, earliest_times, iteration_time, latest_finish
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


def reclaim_greedy(lv: DagLevels, op_t: np.ndarray, op_e: np.ndarray, op_count: np.ndarray, choice: np.ndarray,
                   limit: float) -> np.ndarray:
    """One plan's option indices ``choice[op]`` with float spent, largest saving first; a new array.

    ``op_t[op, k]`` / ``op_e[op, k]`` are each op's Pareto options fastest
    first (effective energy), ``op_count[op]`` how many. The plan must finish
    by ``limit``; it still does. Ties go to the lowest op index.
    """
    choice = choice.copy()
    n = len(choice)
    rows = np.arange(n)

    def timeline():
        t = op_t[rows, choice]
        return earliest_finish(lv, t)[:n], latest_finish(lv, t, limit)[:n]

    ef, lf = timeline()
    blocked = np.zeros(n, dtype=bool)
    last = op_t.shape[1] - 1
    while True:
        nxt = np.minimum(choice + 1, last)
        fits = ~blocked & (choice + 1 < op_count) & (op_t[rows, nxt] - op_t[rows, choice] <= lf - ef)
        gain = np.where(fits, op_e[rows, choice] - op_e[rows, nxt], -np.inf)
        best = int(np.argmax(gain))
        if not gain[best] > 0.0:
            return choice
        choice[best] += 1
        new_ef, new_lf = timeline()
        if new_ef.max() > limit:  # a float rounding of the slack: keep the faster option
            choice[best] -= 1
            blocked[best] = True
            continue
        ef, lf = new_ef, new_lf

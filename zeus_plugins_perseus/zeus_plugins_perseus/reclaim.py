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
help. All plans are handled together with numpy, one op at a time.
"""

from __future__ import annotations

import numpy as np

from zeus_plugins_perseus.emulator import chunks, critical_path, measured_tables
from zeus_plugins_perseus.exact import EffectiveOptions, effective_options
from zeus_plugins_perseus.profile import InstructionProfile
from zeus_plugins_perseus.schedule import PipelineDAG
from zeus_plugins_perseus.tradeoff import topological_order

_EPS = 1e-12  # relative float guard on windows


def _pass(opts, order, preds, succs, freqs, times, eff, limit, forward: bool):
    """One safe pass; returns new (freqs, times, eff) arrays (inputs untouched)."""
    freqs, times, eff = freqs.copy(), times.copy(), eff.copy()
    guard = limit * _EPS
    if forward:
        # latest finish on the current plan
        lf = np.empty_like(times)
        for v in reversed(order):
            if succs[v]:
                lf[:, v] = (lf[:, succs[v]] - times[:, succs[v]]).min(axis=1)
            else:
                lf[:, v] = limit
        ef = np.empty_like(times)
        for v in order:
            es = ef[:, preds[v]].max(axis=1) if preds[v] else np.zeros(len(limit))
            _choose(opts[v], v, freqs, times, eff, lf[:, v] - es - guard)
            ef[:, v] = es + times[:, v]
    else:
        es = np.empty_like(times)
        for v in order:
            es[:, v] = (es[:, preds[v]] + times[:, preds[v]]).max(axis=1) if preds[v] else 0.0
        ls = np.empty_like(times)
        for v in reversed(order):
            lf = ls[:, succs[v]].min(axis=1) if succs[v] else limit
            _choose(opts[v], v, freqs, times, eff, lf - es[:, v] - guard)
            ls[:, v] = lf - times[:, v]
    return freqs, times, eff


def _choose(o: EffectiveOptions, v: int, freqs, times, eff, window) -> None:
    """Op ``v`` of every plan takes the slowest Pareto option within ``window`` if it saves energy."""
    k = np.searchsorted(o.t, window, side="right") - 1
    ok = k >= 0
    kk = np.where(ok, k, 0)
    better = ok & (o.e[kk] < eff[:, v]) & (o.t[kk] > times[:, v])
    if better.any():
        freqs[better, v] = o.f[kk[better]]
        times[better, v] = o.t[kk[better]]
        eff[better, v] = o.e[kk[better]]


def reclaim_slack(
    dag: PipelineDAG, profile: InstructionProfile, freqs: np.ndarray, blocking_power_w: float, max_passes: int = 4
) -> np.ndarray:
    """Clocks ``freqs[plan, op]`` with float spent: measured time never longer, energy never higher.

    KeyError (naming the op and clock) if a plan uses a clock the profile lacks.
    """
    freqs = np.atleast_2d(np.asarray(freqs, dtype=np.int64))
    if freqs.size == 0:
        return freqs.copy()
    opts = effective_options(dag, profile, blocking_power_w)
    order = topological_order(dag.n_ops, dag.edges)
    preds, succs = dag.neighbours()
    out = np.empty_like(freqs)
    for rows in chunks(len(freqs)):  # plans are independent: blocks bound the work arrays
        out[rows] = _reclaim(dag, profile, opts, order, preds, succs, freqs[rows], blocking_power_w, max_passes)
    return out


def _reclaim(dag, profile, opts, order, preds, succs, freqs, blocking_power_w, max_passes):
    times, energies = measured_tables(dag, profile, freqs)
    eff = energies - blocking_power_w * times
    limit = critical_path(dag, times)
    for _ in range(max_passes):
        before = eff.sum(axis=1)
        cands = [_pass(opts, order, preds, succs, freqs, times, eff, limit, fw) for fw in (True, False)]
        backward = np.argmin([c[2].sum(axis=1) for c in cands], axis=0)[:, None] == 1
        new_f, new_t, new_e = (np.where(backward, b, f) for f, b in zip(cands[0], cands[1]))
        # float safety: a plan whose iteration time grew keeps its old clocks
        grew = critical_path(dag, new_t) > limit
        new_f[grew], new_t[grew], new_e[grew] = freqs[grew], times[grew], eff[grew]
        gain = before - new_e.sum(axis=1)
        freqs, times, eff = new_f, new_t, new_e
        if not np.any(gain > 1e-9):
            break
    return freqs

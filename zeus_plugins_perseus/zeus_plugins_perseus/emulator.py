"""Replay frequency plans on the measured profile.

The planner optimises a model (quantised times, a hull or a fitted curve); the
emulator says what the chosen clocks really give: the critical path with each
instruction's measured time at its assigned clock, and the measured energy of
every instruction plus blocking power for the rest of each GPU's iteration.
"""

from __future__ import annotations

import numpy as np

from zeus_plugins_perseus.profile import InstructionProfile
from zeus_plugins_perseus.schedule import PipelineDAG
from zeus_plugins_perseus.tradeoff import topological_order


def measured_tables(dag: PipelineDAG, profile: InstructionProfile, freqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Measured (time, energy) of every op for plans ``freqs[plan, op]``; KeyError on an unprofiled clock."""
    freqs = np.atleast_2d(np.asarray(freqs, dtype=np.int64))
    times = np.empty(freqs.shape)
    energies = np.empty(freqs.shape)
    lookup: dict[tuple[int, str], dict[int, tuple[float, float]]] = {}
    for i, op in enumerate(dag.ops):
        key = (op.stage, op.instruction)
        if key not in lookup:
            o = profile.get(*key)
            lookup[key] = {int(f): (float(t), float(e)) for f, t, e in zip(o.frequency, o.time, o.energy)}
        table = lookup[key]
        col = freqs[:, i]
        for f in np.unique(col):
            if int(f) not in table:
                raise KeyError(f"stage {op.stage} {op.instruction} was not profiled at {int(f)} MHz")
            t, e = table[int(f)]
            hit = col == f
            times[hit, i] = t
            energies[hit, i] = e
    return times, energies


def critical_path(dag: PipelineDAG, times: np.ndarray) -> np.ndarray:
    """Iteration time of each plan (row of ``times[plan, op]``): longest path, all plans at once."""
    times = np.atleast_2d(times)
    preds, _ = dag.neighbours()
    finish = np.zeros_like(times)
    for v in topological_order(dag.n_ops, dag.edges):
        if preds[v]:
            start = finish[:, preds[v][0]]
            for p in preds[v][1:]:
                start = np.maximum(start, finish[:, p])
            finish[:, v] = start + times[:, v]
        else:
            finish[:, v] = times[:, v]
    return finish.max(axis=1)


def timeline(dag: PipelineDAG, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, finish) of every op of one plan, each op as early as its dependencies allow."""
    preds, _ = dag.neighbours()
    start = np.zeros(dag.n_ops)
    finish = np.zeros(dag.n_ops)
    for v in topological_order(dag.n_ops, dag.edges):
        start[v] = max((finish[p] for p in preds[v]), default=0.0)
        finish[v] = start[v] + times[v]
    return start, finish


def emulate(
    dag: PipelineDAG, profile: InstructionProfile, freqs: np.ndarray, blocking_power_w: float
) -> tuple[np.ndarray, np.ndarray]:
    """(iteration time s, iteration energy J) of each plan ``freqs[plan, op]`` on the measured profile."""
    times, energies = measured_tables(dag, profile, freqs)
    t_iter = critical_path(dag, times)
    busy = times.sum(axis=1)
    energy = energies.sum(axis=1) + blocking_power_w * (dag.stages * t_iter - busy)
    return t_iter, energy

"""Replay frequency plans on the measured profile.

The planner optimises a model (quantised times, a hull or a fitted curve); the
emulator says what the chosen clocks really give: the critical path with each
instruction's measured time at its assigned clock, and the measured energy of
every instruction plus blocking power for the rest of each GPU's iteration.
"""

from __future__ import annotations

import numpy as np

from zeus_plugins_perseus.dag_times import earliest_times, iteration_time
from zeus_plugins_perseus.profile import InstructionProfile
from zeus_plugins_perseus.schedule import PipelineDAG


def measured_tables(dag: PipelineDAG, profile: InstructionProfile, freqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Measured (time, energy) of every op for plans ``freqs[plan, op]``; KeyError on an unprofiled clock.

    One lookup for all plans and ops: every (stage, instruction) gets a block of
    a flat table sorted by clock, and each op's clocks are found in its block by
    binary search.
    """
    freqs = np.atleast_2d(np.asarray(freqs, dtype=np.int64))
    keys: dict[tuple[int, str], int] = {}
    key_of_op = np.empty(dag.n_ops, dtype=np.int64)
    for i, op in enumerate(dag.ops):
        key_of_op[i] = keys.setdefault((op.stage, op.instruction), len(keys))
    blocks = [profile.get(*key) for key in keys]
    order = [np.argsort(o.frequency, kind="stable") for o in blocks]
    flat_f = np.concatenate([o.frequency[k] for o, k in zip(blocks, order)]).astype(np.int64)
    flat_t = np.concatenate([o.time[k] for o, k in zip(blocks, order)]).astype(float)
    flat_e = np.concatenate([o.energy[k] for o, k in zip(blocks, order)]).astype(float)
    # clocks of different blocks never compare: offset each block's clocks past the previous block's
    span = int(flat_f.max(initial=0)) + int(freqs.max(initial=0)) + 1
    start = np.cumsum([0] + [len(o.frequency) for o in blocks])
    block_of = np.repeat(np.arange(len(blocks)), np.diff(start))
    shifted = flat_f + block_of * span
    want = freqs + key_of_op[None, :] * span
    at = np.searchsorted(shifted, want)
    hit = at < len(shifted)
    hit[hit] = shifted[at[hit]] == want[hit]
    if not hit.all():
        plan, op = (int(x[0]) for x in np.nonzero(~hit))
        o = dag.ops[op]
        raise KeyError(f"stage {o.stage} {o.instruction} was not profiled at {int(freqs[plan, op])} MHz")
    return flat_t[at], flat_e[at]


def critical_path(dag: PipelineDAG, times: np.ndarray) -> np.ndarray:
    """Iteration time of each plan (row of ``times[plan, op]``): longest path, all plans at once."""
    return iteration_time(dag.levels, np.atleast_2d(times).T)


def timeline(dag: PipelineDAG, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, finish) of every op of one plan, each op as early as its dependencies allow."""
    return earliest_times(dag.levels, np.asarray(times, dtype=float))


#: plans handled at once by the per-op passes: rows are independent, and blocks of this many keep the
#: [plan, op] work arrays of a 16 x 64 frontier (thousands of plans x 2048 ops) to a few MB each
CHUNK_PLANS = 256


def chunks(n: int, size: int = CHUNK_PLANS):
    """Slices covering ``range(n)`` in blocks of ``size``."""
    return [slice(k, min(k + size, n)) for k in range(0, n, size)]


def emulate(dag: PipelineDAG, profile: InstructionProfile, freqs: np.ndarray, blocking_power_w: float) -> tuple[np.ndarray, np.ndarray]:
    """(iteration time s, iteration energy J) of each plan ``freqs[plan, op]`` on the measured profile."""
    freqs = np.atleast_2d(freqs)
    t_iter = np.empty(len(freqs))
    energy = np.empty(len(freqs))
    for rows in chunks(len(freqs)):
        times, energies = measured_tables(dag, profile, freqs[rows])
        t_iter[rows] = critical_path(dag, times)
        busy = times.sum(axis=1)
        energy[rows] = energies.sum(axis=1) + blocking_power_w * (dag.stages * t_iter[rows] - busy)
    return t_iter, energy

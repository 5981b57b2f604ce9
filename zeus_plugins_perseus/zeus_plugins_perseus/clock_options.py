"""Every op's measured clock options in effective energy: what the real-time plans and slack reclamation choose from.

An option's *effective* energy is its energy minus the blocking power over its
time: what the instruction burns above what the GPU would draw anyway while
waiting, so a plan's energy is ``sum(effective) + stages x T x blocking power``.
Only options on the Pareto frontier of (time, effective energy) are ever worth
choosing; the lower convex hull of them is what a linear program sees.
"""

from __future__ import annotations

import numpy as np

from zeus_core import lower_convex_hull, pareto_frontier
from zeus_plugins_perseus.profile import InstructionProfile
from zeus_plugins_perseus.schedule import PipelineDAG


class EffectiveOptions:
    """Pareto options of one (stage, instruction), fastest first, with effective energies."""

    def __init__(self, times: np.ndarray, energies: np.ndarray, freqs: np.ndarray, blocking_w: float) -> None:
        eff = energies - blocking_w * times
        front = pareto_frontier(times, eff)
        self.t, self.e, self.f = times[front], eff[front], freqs[front]
        hull = lower_convex_hull(times, eff)
        self.hull_t, self.hull_e = times[hull], eff[hull]


def effective_options(dag: PipelineDAG, profile: InstructionProfile, blocking_w: float) -> list[EffectiveOptions]:
    """Per op of ``dag``, its instruction's options (built once per (stage, instruction))."""
    cache: dict[tuple[int, str], EffectiveOptions] = {}
    for op in dag.ops:
        key = (op.stage, op.instruction)
        if key not in cache:
            o = profile.get(*key)
            cache[key] = EffectiveOptions(o.time.astype(float), o.energy.astype(float), o.frequency, blocking_w)
    return [cache[(op.stage, op.instruction)] for op in dag.ops]


class OptionTable:
    """Every op's Pareto options as padded rows, so one numpy call chooses for many ops.

    Row ``key[v]`` holds op ``v``'s (stage, instruction) options fastest first,
    padded to the longest list (an index into the padding is never read as a
    choice). :meth:`count_within` counts a row's options no slower than a
    window for many ops and plans at once, exactly as a binary search of each
    row would: every option time is in the sorted union ``grid``, so the count
    at ``w`` is the row's count at the largest grid time ``<= w``, tabulated.
    """

    def __init__(self, opts: list[EffectiveOptions]) -> None:
        rows: dict[int, int] = {}
        self.key = np.array([rows.setdefault(id(o), len(rows)) for o in opts], dtype=np.int64)
        uniq = list({id(o): o for o in opts}.values())
        width = max(len(o.t) for o in uniq)
        self.t = np.full((len(uniq), width), np.inf)
        self.e = np.full((len(uniq), width), np.inf)
        self.f = np.zeros((len(uniq), width), dtype=np.int64)
        for r, o in enumerate(uniq):
            self.t[r, : len(o.t)], self.e[r, : len(o.e)], self.f[r, : len(o.f)] = o.t, o.e, o.f
        self.grid = np.unique(np.concatenate([o.t for o in uniq]))
        self.counts = np.zeros((len(uniq), len(self.grid) + 1), dtype=np.int64)  # [row, grid times <= window]
        for r, o in enumerate(uniq):
            self.counts[r, 1:] = np.searchsorted(o.t, self.grid, side="right")
        # flat views for 1-D takes, which cost less than 2-D fancy indexing
        self.t_flat, self.e_flat, self.f_flat = self.t.ravel(), self.e.ravel(), self.f.ravel()
        self.counts_flat = self.counts.ravel()

    def count_within(self, rows: np.ndarray, window: np.ndarray) -> np.ndarray:
        """Per ``window[i, ...]``: how many options of row ``rows[i]`` take at most that long."""
        at = np.searchsorted(self.grid, window, side="right")
        start = rows.reshape(rows.shape + (1,) * (window.ndim - 1)) * self.counts.shape[1]
        return self.counts_flat.take(start + at)


def fastest_frequencies(dag: PipelineDAG, profile: InstructionProfile) -> np.ndarray:
    """Per op, the clock with the shortest measured time (not always the highest on a noisy profile)."""
    best: dict[tuple[int, str], int] = {}
    for op in dag.ops:
        key = (op.stage, op.instruction)
        if key not in best:
            o = profile.get(*key)
            order = np.lexsort((o.energy, o.time))
            best[key] = int(o.frequency[order[0]])
    return np.array([best[(op.stage, op.instruction)] for op in dag.ops], dtype=np.int64)

"""The one cost metric every policy optimises, and Pareto helpers.

cost = eta * energy + (1 - eta) * max_power * time

``eta`` (the eta knob, in [0, 1]) weighs energy against time; ``max_power`` is
the maximum power limit of the devices involved (summed over devices), so that
both terms are in joules. eta = 1 minimises energy alone, eta = 0 time alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import numpy as np

#: Scalars or numpy arrays: what zeus_cost takes, it returns.
_Amount = TypeVar("_Amount", float, "np.ndarray")


def check_eta(eta: float) -> float:
    """Return ``eta`` or raise a ValueError that says the allowed range."""
    if not (isinstance(eta, (int, float)) and 0.0 <= float(eta) <= 1.0):
        raise ValueError(f"eta_knob must be between 0 and 1 inclusive, got {eta!r}")
    return float(eta)


def zeus_cost(energy_j: _Amount, time_s: _Amount, eta: float, max_power_w: float) -> _Amount:
    """Cost of spending ``energy_j`` joules over ``time_s`` seconds.

    Works on scalars and numpy arrays alike (broadcasting).
    """
    check_eta(eta)
    if not max_power_w > 0:
        raise ValueError(f"max_power_w must be positive, got {max_power_w!r}")
    return eta * energy_j + (1.0 - eta) * max_power_w * time_s


def cost_per_iteration(avg_power_w: float, iter_time_s: float, eta: float, max_power_w: float) -> float:
    """Cost of one iteration that takes ``iter_time_s`` at ``avg_power_w`` (Zeus Eq. 7)."""
    return zeus_cost(avg_power_w * iter_time_s, iter_time_s, eta, max_power_w)


def pareto_frontier(times: Sequence[float] | np.ndarray, energies: Sequence[float] | np.ndarray) -> np.ndarray:
    """Indices of the time-energy Pareto-optimal points, fastest first.

    A point is kept when no other point is at most as slow and at most as
    energy-hungry while strictly better in one of the two. Of exact duplicates
    the first is kept. NaN points are never on the frontier.
    """
    import numpy as np  # here, not at the top: `zeus --help` must not pay for numpy

    t = np.asarray(times, dtype=float)
    e = np.asarray(energies, dtype=float)
    if t.shape != e.shape or t.ndim != 1:
        raise ValueError("times and energies must be 1-D sequences of equal length")
    valid = np.flatnonzero(~(np.isnan(t) | np.isnan(e)))
    # Sort by time, then energy, then original index so the first duplicate wins.
    order = valid[np.lexsort((valid, e[valid], t[valid]))]
    keep = []
    best_e = math.inf
    for i in order:
        if e[i] < best_e:
            keep.append(i)
            best_e = e[i]
    return np.asarray(keep, dtype=int)


def lower_convex_hull(times: Sequence[float] | np.ndarray, energies: Sequence[float] | np.ndarray) -> np.ndarray:
    """Indices of the points on the lower-left convex hull of the Pareto frontier, fastest first.

    These are the options a convex time-cost tradeoff model can use exactly.
    """
    import numpy as np

    idx = pareto_frontier(times, energies)
    t = np.asarray(times, dtype=float)[idx]
    e = np.asarray(energies, dtype=float)[idx]
    hull: list[int] = []
    for k in range(len(idx)):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # Drop b when it lies on or above the segment a-k.
            cross = (t[b] - t[a]) * (e[k] - e[a]) - (e[b] - e[a]) * (t[k] - t[a])
            if cross <= 0:
                hull.pop()
            else:
                break
        hull.append(k)
    return idx[hull]


__all__ = ["zeus_cost", "cost_per_iteration", "pareto_frontier", "lower_convex_hull", "check_eta"]

"""The two baselines every trace run is compared with, by expected cost.

* ``default``: the user's batch size at the GPU's highest power limit, every
  recurrence (what a job does without Zeus);
* ``oracle``: the fixed (batch size, power limit) with the lowest expected cost
  per recurrence, chosen in hindsight from the whole trace.

A fixed knob's expected recurrence counts the retries of runs that miss the
target within ``max_epochs`` (each charged ``max_epochs`` epochs): with ``q``
the share of runs that reach it, a recurrence costs on average
``mean epochs of reaching runs + (1 - q) / q x max_epochs`` epochs. Expected
values rather than one more sampled replay, so the comparison carries no
sampling noise of its own.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from zeus_core import savings, zeus_cost
from zeus_core.comparison import TOTAL_KEYS
from zeus_plugins_trace.traces import WorkloadTrace


@attrs.frozen
class Baseline:
    """A fixed knob and what one recurrence at it costs on average."""

    name: str
    batch_size: int
    power_limit: float
    epochs: float
    energy_j: float
    time_s: float
    cost: float

    def to_json(self, recurrences: int) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size,
            "power_limit": self.power_limit,
            "expected_epochs_per_recurrence": self.epochs,
            "energy_j": self.energy_j * recurrences,
            "time_s": self.time_s * recurrences,
            "cost": self.cost * recurrences,
            "cost_per_recurrence": self.cost,
        }


def expected_epochs(wt: WorkloadTrace, max_epochs: int) -> np.ndarray:
    """Expected epochs per recurrence at each batch size (inf when no run reaches the target)."""
    out = np.full(len(wt.batch_sizes), math.inf)
    for i, p in enumerate(wt.paths):
        ok = p[~np.isnan(p) & (p <= max_epochs)]
        if len(p) and len(ok):
            q = len(ok) / len(p)
            out[i] = ok.mean() + (1.0 - q) / q * max_epochs
    return out


def _baseline(name: str, wt: WorkloadTrace, i: int, j: int, epochs: np.ndarray, eta: float) -> Baseline:
    e = float(epochs[i] * wt.energy[i, j])
    t = float(epochs[i] * wt.time[i, j])
    return Baseline(name, int(wt.batch_sizes[i]), float(wt.power_limits[j]), float(epochs[i]), e, t, zeus_cost(e, t, eta, wt.max_power_w))


def oracle(wt: WorkloadTrace, eta: float, max_epochs: int) -> Baseline:
    """The fixed knob with the lowest expected cost per recurrence."""
    epochs = expected_epochs(wt, max_epochs)
    cost = epochs[:, None] * wt.epoch_cost(eta)
    cost = np.where(np.isnan(cost), np.inf, cost)
    i, j = np.unravel_index(int(np.argmin(cost)), cost.shape)
    if not math.isfinite(cost[i, j]):
        raise ValueError(f"no batch size of {wt.dataset} on {wt.gpu} ever reaches the target within {max_epochs} epochs")
    return _baseline("oracle", wt, int(i), int(j), epochs, eta)


def default(wt: WorkloadTrace, eta: float, max_epochs: int, batch_size: int) -> Baseline:
    """The user's batch size at the highest limit the trace has for it."""
    i = wt.index(batch_size)
    j = int(np.flatnonzero(~np.isnan(wt.time[i]))[0])
    return _baseline("default", wt, i, j, expected_epochs(wt, max_epochs), eta)


def compare(method: dict[str, float], base: Baseline, recurrences: int) -> dict[str, float]:
    """Savings of ``method`` (totals of energy_j, time_s, cost) against ``base`` over ``recurrences``."""
    return savings(method, {k: getattr(base, k) * recurrences for k in TOTAL_KEYS})

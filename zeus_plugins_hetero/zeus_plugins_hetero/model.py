"""The synchronous data-parallel step model that every allocation is judged by.

K GPU types; type k has ``count`` identical GPUs that all take local batch b_k
at power limit p_k. A synchronous step waits for the slowest GPU, then
all-reduces::

    T = max_k t_k(b_k, p_k) + allreduce_time_s
    E = sum_k n_k * (e_k(b_k, p_k) + idle_power_k * (T - t_k(b_k, p_k)))

(a GPU that finished early, and every GPU during the all-reduce, draws its idle
power). The published prototype had no max and no idle term, which is why it
could give the weaker GPU most of the batch; here the straggler is priced in.

Objectives: ``zeus-cost`` minimises eta*E + (1-eta)*MAXPOWER*T with MAXPOWER the
sum of every GPU's highest profiled limit (the core's :func:`zeus_cost`);
``min-energy`` minimises E subject to T <= max_slowdown * (fastest feasible T).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from zeus_core import zeus_cost
from zeus_core.cost import check_eta
from zeus_plugins_hetero.options import OBJECTIVES
from zeus_plugins_hetero.profile import HeteroError, Profile


class InfeasibleError(HeteroError):
    """No allocation satisfies the constraints; the message says which one binds."""


@dataclass(frozen=True)
class GpuType:
    """``count`` identical GPUs described by one profile."""

    name: str
    count: int
    profile: Profile
    idle_power_w: float = 0.0

    def __post_init__(self) -> None:
        if self.count < 1:
            raise HeteroError(f"GPU type {self.name!r}: count must be at least 1, got {self.count}")
        if not (self.idle_power_w >= 0 and math.isfinite(self.idle_power_w)):
            raise HeteroError(f"GPU type {self.name!r}: idle_power_w must be a finite number >= 0, got {self.idle_power_w}")


@dataclass(frozen=True)
class TypeTable:
    """The choices of one GPU type on the batch grid: per-iteration t and e of shape (m, q)."""

    batches: np.ndarray  # (m,) local batch sizes
    limits: np.ndarray  # (q,) power limits
    time: np.ndarray  # (m, q) seconds per iteration
    energy: np.ndarray  # (m, q) joules per iteration


@dataclass(frozen=True)
class Problem:
    """One allocation problem: the GPU types, the global batch and the objective."""

    gpus: tuple[GpuType, ...]
    global_batch: int
    granularity: int = 1
    allreduce_time_s: float = 0.0
    objective: str = "zeus-cost"
    eta: float = 0.5
    max_slowdown: float = 1.1

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", tuple(self.gpus))
        if not self.gpus:
            raise HeteroError("at least one GPU type is needed")
        names = [g.name for g in self.gpus]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise HeteroError(f"GPU type names must be unique; repeated: {', '.join(dup)}")
        if self.global_batch < 1:
            raise HeteroError(f"global_batch_size must be at least 1, got {self.global_batch}")
        if self.granularity < 1:
            raise HeteroError(f"batch_granularity must be at least 1, got {self.granularity}")
        if not (self.allreduce_time_s >= 0 and math.isfinite(self.allreduce_time_s)):
            raise HeteroError(f"allreduce_time_s must be a finite number >= 0, got {self.allreduce_time_s}")
        if self.objective not in OBJECTIVES:
            raise HeteroError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        check_eta(self.eta)
        if not (self.max_slowdown >= 1 and math.isfinite(self.max_slowdown)):
            raise HeteroError(f"max_slowdown must be a finite number >= 1, got {self.max_slowdown}")

    @property
    def n_gpus(self) -> int:
        return sum(g.count for g in self.gpus)

    @property
    def max_power_w(self) -> float:
        """MAXPOWER of the cost metric: every GPU's highest profiled limit, summed."""
        return float(sum(g.count * g.profile.max_power_limit for g in self.gpus))

    @property
    def idle_power_total_w(self) -> float:
        return float(sum(g.count * g.idle_power_w for g in self.gpus))

    def grid(self, k: int) -> np.ndarray:
        """Local batch sizes type k may take: multiples of the granularity inside its profile."""
        prof = self.gpus[k].profile
        g = self.granularity
        lo = -(-prof.min_batch // g) * g
        return np.arange(lo, prof.max_batch + 1, g, dtype=np.int64)

    def table(self, k: int, batches: Sequence[int] | None = None) -> TypeTable:
        """Interpolated per-iteration choices of type k (on its grid unless ``batches`` is given)."""
        prof = self.gpus[k].profile
        b = self.grid(k) if batches is None else np.asarray(batches, dtype=np.int64).reshape(-1)
        t, e = prof.per_iteration(b)
        return TypeTable(b, prof.power_limits.copy(), t, e)


@dataclass(frozen=True)
class TypeChoice:
    """What every GPU of one type runs, and what it costs per iteration."""

    name: str
    count: int
    local_batch: int
    power_limit: float
    compute_time_s: float
    compute_energy_j: float

    def to_json(self) -> dict:
        limit = self.power_limit
        return {
            "name": self.name,
            "count": self.count,
            "local_batch": self.local_batch,
            "power_limit": int(limit) if float(limit).is_integer() else limit,
            "compute_time_s": self.compute_time_s,
            "compute_energy_j": self.compute_energy_j,
        }


@dataclass(frozen=True)
class Allocation:
    """One allocation with its predicted step time, energy and cost (eta, MAXPOWER of the problem)."""

    method: str
    choices: tuple[TypeChoice, ...]
    iteration_time_s: float
    iteration_energy_j: float
    cost: float
    objective: str
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def objective_value(self) -> float:
        """What the objective minimises: cost for zeus-cost, energy for min-energy."""
        return self.cost if self.objective == "zeus-cost" else self.iteration_energy_j

    def to_json(self) -> dict:
        return {
            "method": self.method,
            "gpus": [c.to_json() for c in self.choices],
            "iteration_time_s": self.iteration_time_s,
            "iteration_energy_j": self.iteration_energy_j,
            "cost": self.cost,
            **self.extra,
        }


def evaluate(problem: Problem, batches: Sequence[int], limits: Sequence[float], method: str = "") -> Allocation:
    """Predict one allocation's step time, energy and cost under the step model.

    Checks the global-batch constraint and that each limit was profiled; it does
    not require the batches to be on the granularity grid (the even-split
    baseline may sit off it).
    """
    if len(batches) != len(problem.gpus) or len(limits) != len(problem.gpus):
        raise HeteroError(f"need one batch and one limit per GPU type ({len(problem.gpus)})")
    total = sum(g.count * int(b) for g, b in zip(problem.gpus, batches))
    if total != problem.global_batch:
        raise InfeasibleError(f"local batches {list(map(int, batches))} give a global batch of {total}, not {problem.global_batch}")
    times, energies = [], []
    for g, b, p in zip(problem.gpus, batches, limits):
        hits = np.flatnonzero(g.profile.power_limits == float(p))
        if hits.size == 0:
            raise HeteroError(f"GPU type {g.name!r}: power limit {p} W was not profiled")
        t, e = g.profile.per_iteration([int(b)])
        times.append(float(t[0, hits[0]]))
        energies.append(float(e[0, hits[0]]))
    step = max(times) + problem.allreduce_time_s
    energy = sum(g.count * (e + g.idle_power_w * (step - t)) for g, t, e in zip(problem.gpus, times, energies))
    cost = float(zeus_cost(energy, step, problem.eta, problem.max_power_w))
    choices = tuple(
        TypeChoice(g.name, g.count, int(b), float(p), t, e) for g, b, p, t, e in zip(problem.gpus, batches, limits, times, energies)
    )
    return Allocation(method, choices, float(step), float(energy), cost, problem.objective)

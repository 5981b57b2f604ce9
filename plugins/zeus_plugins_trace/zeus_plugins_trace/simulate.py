"""A fast replay of a recurring job on a trace, with the paper simulator's accounting.

``zeus run`` on the trace device and workload goes through the core's runner
epoch by epoch; this module computes the same tries directly from per-batch-size
arrays, so that the benchmark grid (6 workloads x 4 GPUs x 5 seeds, 3 methods)
runs in seconds. The batch-size policy is any part with the core's
``choose(ctx)``/``observe(ctx, record)`` protocol (the registered ``mab``
policy in the benchmarks), called with the core's own PolicyContext and
TryRecord, exactly as the runner calls it.

Accounting (the Zeus NSDI'23 simulator, DESIGN: "same accounting"):

* the power limit at a batch size is the JIT's choice: the limit with the
  lowest epoch cost, ties to the higher limit; the first run at a batch size
  spends its first epoch profiling, charged as the mean over the limits;
* each try samples one train run of its batch size (``rng.choice`` over the
  runs in file order, one draw per try from ``default_rng(seed)``);
* a try stops before the epoch that would push its cost past
  ``beta x min_cost``, or the policy's own ``try_cost_bound`` when that is
  lower: it runs :func:`zeus_core.epochs_within` epochs of that bound at the
  JIT's epoch cost (the function the runner's sessions stop by), where
  ``min_cost`` is the lowest cost of a finished recurrence (all its tries);
  zero epochs is the "never ran" case (no cost);
* it reaches the target if its run's ``target_epoch`` fits in that horizon.

One deliberate difference: a try that never ran does not count as having
profiled its batch size (the runner's JIT cannot profile without an epoch).

With a grid (the job's ``[grid]``), each try is also charged against its signals
(:func:`charge_grid`): the simulated clock starts at ``[grid] start`` and runs try
after try with no gap (where ``zeus run`` on the trace device places them), the
profiling epoch at its own power and the rest at the JIT's, through the core's
integration rule (:func:`zeus_core.grid.replay_columns`). Without a grid nothing of
this runs.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from zeus_core import JobOptions, PolicyContext, TryCostBound, TryRecord, epochs_within, zeus_cost
from zeus_core.grid import CARBON, CARBON_COLUMN, PRICE, TimeSeries, cost_column, replay_columns
from zeus_core.results import GRID_KEY
from zeus_core.stopping import steady_state_cost
from zeus_plugins_trace.traces import WorkloadTrace

if TYPE_CHECKING:
    from zeus_core.grid import Grid


class SimulationError(RuntimeError):
    """A recurrence could not reach the target in ``max_tries`` tries."""


@attrs.frozen
class Knobs:
    """Per batch size: the JIT's limit, its epoch energy/time/cost, and the profiling epoch's."""

    limit: np.ndarray
    energy: np.ndarray
    time: np.ndarray
    cost: np.ndarray
    profile_energy: np.ndarray
    profile_time: np.ndarray


def jit_knobs(wt: WorkloadTrace, eta: float) -> Knobs:
    """What the JIT power policy ends up with at each batch size (vectorised over B)."""
    cpe = wt.epoch_cost(eta)
    masked = np.where(np.isnan(cpe), np.inf, cpe)
    # Limits are high to low: the first one within rounding (1e-9, the JIT's
    # tie) of the cheapest wins, so ties go high.
    j = np.argmax(masked <= masked.min(axis=1, keepdims=True) * (1 + 1e-9), axis=1)
    rows = np.arange(len(wt.batch_sizes))
    energy = wt.energy
    return Knobs(
        limit=wt.power_limits[j],
        energy=energy[rows, j],
        time=wt.time[rows, j],
        cost=cpe[rows, j],
        profile_energy=np.nanmean(energy, axis=1),
        profile_time=np.nanmean(wt.time, axis=1),
    )


@attrs.define
class SimResult:
    """Every try of a simulated job, as the core's TryRecords, plus per-recurrence totals."""

    records: list[TryRecord]
    recurrence_cost: np.ndarray
    recurrence_energy: np.ndarray
    recurrence_time: np.ndarray

    @property
    def cost(self) -> float:
        return float(self.recurrence_cost.sum())

    @property
    def energy(self) -> float:
        return float(self.recurrence_energy.sum())

    @property
    def time(self) -> float:
        return float(self.recurrence_time.sum())


class Tries:
    """What one try at a batch size costs on a trace, with the published accounting.

    Shared by :func:`simulate` (one job, recurrence after recurrence) and the
    concurrent replay of recurring groups (:mod:`zeus_plugins_trace.replay`), so
    both charge a try the same way: the JIT's limit and its profiling epoch on
    the first run at a batch size, the early-stop horizon of
    :func:`zeus_core.epochs_within`, one sampled train run per try.
    """

    def __init__(self, wt: WorkloadTrace, eta: float, max_epochs: int) -> None:
        k = jit_knobs(wt, eta)
        self.trace = wt
        self.eta, self.max_epochs, self.max_power_w = eta, max_epochs, wt.max_power_w
        self.index = {int(b): i for i, b in enumerate(wt.batch_sizes)}
        # Plain Python floats: the loop is scalar, and numpy scalars are slower there.
        self.limit, self.e_ep, self.t_ep, self.c_ep = k.limit.tolist(), k.energy.tolist(), k.time.tolist(), k.cost.tolist()
        self.e_prof, self.t_prof = k.profile_energy.tolist(), k.profile_time.tolist()
        self.c_prof = [zeus_cost(e, t, eta, wt.max_power_w) for e, t in zip(self.e_prof, self.t_prof)]
        self.paths = [p.tolist() for p in wt.paths]
        self.n_paths = [len(p) for p in self.paths]
        #: Whether the JIT has profiled each batch size (its first try that ran an epoch).
        self.profiled = [False] * len(self.index)

    def position(self, batch_size: int, batch_sizes: list[int]) -> int:
        i = self.index.get(batch_size)
        if i is None:
            raise SimulationError(f"the policy chose batch size {batch_size}, which the trace does not have ({batch_sizes})")
        return i

    def sample(self, i: int, rng: np.random.Generator) -> float:
        """The ``target_epoch`` of one train run of batch size ``i`` (one draw, the paper's ``rng.choice``)."""
        return self.paths[i][int(rng.choice(self.n_paths[i], 1, replace=False)[0])] if self.n_paths[i] else math.nan

    def run(self, rec: int, try_index: int, i: int, bound: float, target: float) -> TryRecord:
        """The try of recurrence ``rec`` at batch size ``i`` whose run reaches the target at
        epoch ``target`` (NaN: never), stopped before the epoch that would pass ``bound``."""
        bs = int(self.trace.batch_sizes[i])
        c_ep, e_ep, t_ep = self.c_ep[i], self.e_ep[i], self.t_ep[i]
        horizon = epochs_within(bound, c_ep, self.max_epochs)  # the runner's rule, in one step
        if horizon <= 0:
            return TryRecord(rec, try_index, bs, self.limit[i], 0, 0.0, 0.0, 0.0, False, "never-ran")
        reached = target == target and target <= horizon
        epochs = int(target) if reached else horizon
        steady = None
        if self.profiled[i]:
            energy, time = epochs * e_ep, epochs * t_ep
        else:
            energy = self.e_prof[i] + (epochs - 1) * e_ep
            time = self.t_prof[i] + (epochs - 1) * t_ep
            # As the runner records it: the first epoch profiled, the rest held the JIT's limit.
            steady = steady_state_cost([self.c_prof[i]] + [c_ep] * (epochs - 1), [True] + [False] * (epochs - 1), c_ep)
        self.profiled[i] = True
        cost = zeus_cost(energy, time, self.eta, self.max_power_w)
        stopped = None if reached else ("max-epochs" if horizon >= self.max_epochs else "early-stop")
        return TryRecord(rec, try_index, bs, self.limit[i], epochs, time, energy, cost, reached, stopped, steady_cost=steady)


def own_bound(policy: Any, ctx: PolicyContext, batch_size: int, bound: float) -> float:
    """``bound``, or the policy's own :class:`zeus_core.TryCostBound` when that is lower (as in the runner)."""
    own = policy.try_cost_bound(ctx, batch_size) if isinstance(policy, TryCostBound) else None
    return bound if own is None else min(bound, float(own))


def simulate(
    wt: WorkloadTrace,
    policy: Any,
    job: JobOptions,
    *,
    default_batch_size: int | None = None,
    batch_sizes: list[int] | None = None,
    grid: Grid | None = None,
) -> SimResult:
    """Run ``job.recurrences`` recurrences of ``job`` on ``wt`` with ``policy`` choosing batch sizes;
    with ``grid``, charge every try against it (:func:`charge_grid`)."""
    tries = Tries(wt, job.eta_knob, job.max_epochs)
    rng = np.random.default_rng(job.seed)
    bss = list(batch_sizes) if batch_sizes is not None else [int(b) for b in wt.batch_sizes]

    min_cost = math.inf
    records: list[TryRecord] = []
    n = job.recurrences
    rc, re_, rt = np.zeros(n), np.zeros(n), np.zeros(n)
    for rec in range(1, n + 1):
        acc_c = acc_e = acc_t = 0.0
        for try_index in range(1, job.max_tries + 1):
            ctx = PolicyContext(job, rec, try_index, min_cost, bss, default_batch_size, wt.max_power_w)
            bs = int(policy.choose(ctx))
            i = tries.position(bs, bss)
            # One path draw per try, before the horizon (the paper's order).
            target = tries.sample(i, rng)
            # The policy may stop its own (exploratory) tries sooner, as in the runner.
            record = tries.run(rec, try_index, i, own_bound(policy, ctx, bs, job.beta_knob * min_cost), target)
            if record.epochs > 0:
                acc_c += record.cost
                acc_e += record.energy_j
                acc_t += record.time_s
            records.append(record)
            policy.observe(ctx, record)
            if record.reached:
                min_cost = min(min_cost, acc_c)
                break
        else:
            raise SimulationError(
                f"recurrence {rec} of {wt.dataset} on {wt.gpu} did not reach the target in {job.max_tries} tries "
                f"(batch sizes {[r.batch_size for r in records if r.recurrence == rec]})"
            )
        rc[rec - 1], re_[rec - 1], rt[rec - 1] = acc_c, acc_e, acc_t
    if grid is not None:
        charge_grid(records, tries, grid)
    return SimResult(records, rc, re_, rt)


def grid_keys(grid: Grid | None) -> list[str]:
    """The totals a replay reports next to ``energy_j`` with ``grid``: ``carbon_g``, ``cost_<currency>``."""
    if grid is None:
        return []
    return [k for q, k in ((CARBON, CARBON_COLUMN), (PRICE, cost_column(grid.currency))) if q in grid.signals]


def replay_start(grid: Grid) -> float:
    """Unix time where a replay's simulated clock starts: ``[grid] start``; without one (a constant
    needs no place) where the grid's clock put the device's zero, else now. Raises ValueError for a
    time series without a start."""
    if grid.start is not None:
        return float(grid.start)
    series = [s for s in grid.signals.values() if isinstance(s, TimeSeries)]
    if series:
        raise ValueError(f"a replay needs a place on {series[0].source}: set [grid] start")
    return grid.clock.time_of(0.0) if grid.clock is not None else time.time()


def charge_grid(records: list[TryRecord], tries: Tries, grid: Grid) -> None:
    """Put each try's grid columns (``carbon_g``, ``cost_<currency>``, ...) in its record, the tries
    one after the other from :func:`replay_start`: a try that profiled draws its profiling epoch's
    energy over that epoch's time and the rest at the JIT's power over the rest; a try that never
    ran is an instant. Raises :class:`zeus_core.grid.BeyondSignal` when the replay runs past what a
    signal knows."""
    if not records:
        return
    begin = replay_start(grid) + np.concatenate(([0.0], np.cumsum([r.time_s for r in records])[:-1]))
    intervals: list[tuple[int, float, float, float]] = []  # (try, start, end, joules)
    for k, r in enumerate(records):
        t0 = float(begin[k])
        if r.steady_cost is not None and r.epochs > 0:  # its first epoch profiled the limits
            i = tries.index[r.batch_size]
            intervals.append((k, t0, t0 + tries.t_prof[i], tries.e_prof[i]))
            if r.epochs > 1:
                intervals.append((k, t0 + tries.t_prof[i], t0 + r.time_s, (r.epochs - 1) * tries.e_ep[i]))
        else:
            intervals.append((k, t0, t0 + r.time_s, r.energy_j))
    owners, starts, ends, joules = zip(*intervals)
    cols = replay_columns(
        grid,
        starts,
        ends,
        joules,
        [r.energy_j for r in records],
        owners,
        name=lambda k: f"recurrence {records[k].recurrence}, try {records[k].try_index}",
    )
    values = {c: v.tolist() for c, v in cols.items()}
    for k, r in enumerate(records):
        r.extra[GRID_KEY] = {c: v[k] for c, v in values.items()}

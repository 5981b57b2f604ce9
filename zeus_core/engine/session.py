"""One try: :class:`RunSession`, the handle a workload trains through and a power policy steers.

It measures every epoch with a window over the device group, gives the power
policy control between iterations when it asks for it
(:class:`~zeus_core.parts.IterationControl`), and ends the epochs at the
target, at ``max_epochs``, or before the epoch that would push the try's cost
past its bound (:func:`zeus_core.stopping.epochs_within`, judged at the
steady-state epoch cost).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from zeus_core.cost import zeus_cost
from zeus_core.device import PowerLimitControl
from zeus_core.grid import GridMeter
from zeus_core.parts import EpochCostPredictor, IterationControl, RankCombiner, SteadyEpochCost, TimedControl
from zeus_core.stopping import epochs_within, steady_state_cost

if TYPE_CHECKING:  # annotations only
    from zeus_core.device import DeviceGroup
    from zeus_core.grid import Grid
    from zeus_core.job import JobOptions
    from zeus_core.measurement import Measurement
    from zeus_core.parts import PowerPolicy, Workload
    from zeus_core.windows import Monitor


def target_reached(metric: float, target: float | None, higher_is_better: bool) -> bool:
    """Whether a validation ``metric`` meets the job's ``target_metric`` (None: never)."""
    if target is None:
        return False
    return metric >= target if higher_is_better else metric <= target


class RunSession:
    """One try (see :class:`zeus_core.parts.Session` for what parts may use)."""

    def __init__(
        self,
        *,
        job: JobOptions,
        batch_size: int,
        recurrence: int,
        try_index: int,
        cost_bound: float,
        devices: DeviceGroup,
        monitor: Monitor,
        power_policy: PowerPolicy | None,
        workload: Workload | None = None,
        rank: int = 0,
        world_size: int = 1,
        grid: Grid | None = None,
    ) -> None:
        self.job = job
        self.batch_size = int(batch_size)
        self.recurrence = recurrence
        self.try_index = try_index
        self.cost_bound = cost_bound
        self.devices = devices
        self.monitor = monitor
        self.power_policy = power_policy
        self.rank = rank
        self.world_size = world_size
        self.max_epochs = job.max_epochs
        self.epochs_done = 0
        self.epoch_measurements: list[Measurement] = []
        self.epoch_costs: list[float] = []
        self.epoch_profiled: list[bool] = []
        self.metric: float | None = None
        self.reached = False
        self.stopped: str | None = None
        #: The workload's own JSON-able details for the try's record; no other part reads them.
        self.extra: dict[str, Any] = {}
        #: A data-parallel workload installs what combines the ranks' measurements.
        self.ranks: RankCombiner | None = None
        #: Iterations in the current epoch, as the workload announced them to
        #: :meth:`iterations` or :meth:`chunks` (lets a power policy fit its windows).
        self.epoch_iterations: int | None = None
        self._predictor = workload if isinstance(workload, EpochCostPredictor) else None
        self._wants_iterations = False
        self._in_epoch: int | None = None
        #: The job's grid (bound to these devices' clock), None without ``[grid]``; ``grid_meter``
        #: charges this try's energy against it (:mod:`zeus_core.grid`).
        self.grid = grid if grid is not None and grid.clock is not None else None
        self.grid_meter: GridMeter | None = GridMeter(self.grid) if self.grid is not None else None
        #: Each finished epoch's grid columns (``carbon_g``, ...), with a grid.
        self.epoch_grid: list[dict[str, float]] = []
        self._timed = power_policy if isinstance(power_policy, TimedControl) else None
        self._due: float | None = None
        #: (device clock, local joules) where the current epoch is cut for the grid meter.
        self._marks: list[tuple[float, float]] = []

    # -- facts --

    @property
    def max_power_w(self) -> float:
        return float(self.devices.max_power_w)

    @property
    def power_limit(self) -> float | None:
        if not isinstance(self.devices, PowerLimitControl):
            return None
        limit = self.devices.power_limit()
        return None if limit is None else float(limit)

    def cost(self, energy_j: float, time_s: float) -> float:
        """The job's cost metric of ``energy_j`` joules over ``time_s`` seconds on these devices."""
        return float(zeus_cost(energy_j, time_s, self.job.eta_knob, self.max_power_w))

    @property
    def cost_so_far(self) -> float:
        return float(sum(self.epoch_costs))

    # -- the workload's API --

    def epochs(self) -> Iterator[int]:
        """Epoch numbers from 1; ends at the target, ``max_epochs``, or early stop."""
        for epoch in range(1, self.max_epochs + 1):
            if self.reached or self.stopped:
                return
            if self._should_stop_early():
                self.stopped = "early-stop" if self.epochs_done else "never-ran"
                return
            self._begin_epoch(epoch)
            try:
                yield epoch
            finally:
                self._end_epoch(epoch)
        if not self.reached:
            self.stopped = "max-epochs"

    def iterations(self, count: int) -> Iterator[int]:
        """Iteration indices of this epoch; the power policy acts between them when it wants."""
        self.epoch_iterations = int(count)
        policy = self.power_policy
        if self._wants_iterations and isinstance(policy, IterationControl):
            for i in range(count):
                policy.on_iteration(self, i)
                self._after_iteration_control()
                yield i
        elif self._due is not None:
            for i in range(count):
                self._act_if_due()
                yield i
        else:
            yield from range(count)

    def chunks(self, count: int) -> Iterator[tuple[int, int]]:
        """Like :meth:`iterations` for simulated workloads: (start, n) ranges, split only
        where the power policy wants control."""
        self.epoch_iterations = int(count)
        if self._wants_iterations and isinstance(self.power_policy, IterationControl):
            for i in self.iterations(count):
                yield (i, 1)
        elif self._due is not None:
            yield from self._timed_chunks(count)
        elif count > 0:
            yield (0, count)

    def _timed_chunks(self, count: int) -> Iterator[tuple[int, int]]:
        """Chunks cut where a :class:`~zeus_core.TimedControl` policy's next action falls: the
        iterations until then are estimated from the time the chunks so far took (one first)."""
        clock = self.devices.clock
        i, per = 0, None
        while i < count:
            self._act_if_due()
            due = self._due
            if due is None:
                n = count - i
            elif per is None:
                n = 1
            else:
                n = max(1, min(count - i, int((due - clock()) / per)))
            t0 = clock()
            yield (i, n)
            elapsed = clock() - t0
            if elapsed > 0:
                per = elapsed / n
            i += n

    def report_metric(self, value: float) -> bool:
        """Report the validation metric; returns whether the target is reached."""
        self.metric = float(value)
        if target_reached(self.metric, self.job.target_metric, self.job.higher_is_better):
            self.reached = True
        return self.reached

    def mark_reached(self) -> None:
        """Say the target is reached (for workloads that know it without a metric)."""
        self.reached = True

    # -- a loop zeus does not drive: the user's own, a trainer's (zeus_core.PowerLimitOptimizer) --

    @property
    def in_epoch(self) -> bool:
        return self._in_epoch is not None

    @property
    def acting(self) -> bool:
        """Whether the power policy acts between the iterations of the current epoch (it profiles)."""
        return self._wants_iterations

    def begin_epoch(self, iterations: int | None = None) -> int:
        """Start the next epoch (the power policy decides whether it acts in it); returns its number.

        ``iterations``: how many the epoch will have, when known; a power policy
        fits its windows by it, and one an epoch end cuts is measured again later.
        """
        if self._in_epoch is not None:
            raise RuntimeError(f"epoch {self._in_epoch} has not ended")
        epoch = self.epochs_done + 1
        self.epoch_iterations = iterations
        self._begin_epoch(epoch)
        return epoch

    def begin_iteration(self, iteration: int) -> None:
        """Before iteration ``iteration`` (from 0) of the current epoch: the power policy acts, when it profiles."""
        if self._wants_iterations:
            self.power_policy.on_iteration(self, iteration)  # type: ignore[union-attr]
            self._after_iteration_control()
        else:
            self._act_if_due()

    @property
    def timed(self) -> bool:
        """Whether the power policy waits for a moment to act in this epoch (:class:`~zeus_core.TimedControl`)."""
        return self._due is not None

    def act_if_due(self) -> bool:
        """Let a :class:`~zeus_core.TimedControl` policy act if its moment has come; whether it did."""
        return self._act_if_due()

    def end_epoch(self, iterations: int | None = None) -> Measurement:
        """End the current epoch (``iterations``: how many it had); its measurement, combined over ranks."""
        epoch = self._in_epoch
        if epoch is None:
            raise RuntimeError("no epoch is running")
        if iterations is not None:
            self.epoch_iterations = iterations
        self._end_epoch(epoch)
        return self.epoch_measurements[-1]

    # -- what the runner asks at the end --

    def steady_cost(self) -> float | None:
        """The try's cost had its profiling epochs run at the limit the power policy settled
        on (:func:`zeus_core.stopping.steady_state_cost`); None when no epoch profiled."""
        policy = self.power_policy
        steady = policy.steady_epoch_cost(self) if isinstance(policy, SteadyEpochCost) else None
        return steady_state_cost(self.epoch_costs, self.epoch_profiled, steady)

    def combine_ranks(self, measurement: Measurement) -> Measurement:
        """``measurement`` combined with the other ranks' (as it is without a data-parallel workload)."""
        return measurement if self.ranks is None else self.ranks.combine_ranks(measurement)

    # -- internals --

    def _steady_epoch_cost(self) -> float | None:
        if self._predictor is not None:
            v = self._predictor.predict_epoch_cost(self)
            if v is not None:
                return float(v)
        policy = self.power_policy
        if isinstance(policy, SteadyEpochCost):
            v = policy.steady_epoch_cost(self)
            if v is not None:
                return float(v)
        steady = [c for c, p in zip(self.epoch_costs, self.epoch_profiled) if not p]
        if steady:
            return steady[-1]
        return self.epoch_costs[-1] if self.epoch_costs else None

    def _should_stop_early(self) -> bool:
        if not math.isfinite(self.cost_bound):
            return False
        cpe = self._steady_epoch_cost()
        if cpe is None:
            return False
        return self.epochs_done >= epochs_within(self.cost_bound, cpe, self.max_epochs)

    def _after_iteration_control(self) -> None:
        """After an iteration the policy profiled: a timed policy may start acting once its profile is done."""
        if self._timed is not None:
            if self._due is None:
                self._due = self._timed.next_action(self)
            self._act_if_due()

    def _act_if_due(self) -> bool:
        due = self._due
        if due is None or self.devices.clock() < due:
            return False
        timed = self._timed
        assert timed is not None
        self.mark()
        timed.on_time(self)
        self._due = timed.next_action(self)
        return True

    def mark(self) -> None:
        """Cut the current epoch here for the grid meter (its energy before and after is charged to its
        own time): where the power changes, as when a policy acts. Nothing without a grid or an epoch."""
        if self.grid_meter is not None and self._in_epoch is not None:
            self._marks.append((float(self.devices.clock()), _joules(self.devices)))

    def _charge(self, m: Measurement) -> None:
        """Charge epoch measurement ``m`` (ended now) against the grid: split at the marks, each part in
        proportion to the energy these devices read in it (their time when they read none)."""
        meter, grid = self.grid_meter, self.grid
        if meter is None or grid is None or grid.clock is None:
            return
        self.mark()
        marks, self._marks = self._marks, []
        end = marks[-1][0]
        start = end - m.time
        # The first mark is the epoch's start (placed at the window's own length before its end); the others cut it.
        cuts = [(start, marks[0][1]), *((c, e) for c, e in marks[1:-1] if c > start), marks[-1]]
        spans = [(a[0], b[0], b[1] - a[1]) for a, b in zip(cuts, cuts[1:])]
        local = sum(max(j, 0.0) for _, _, j in spans)
        total = m.total_system_energy
        epoch = GridMeter(grid)
        for a, b, j in spans:
            share = (max(j, 0.0) / local) if local > 0 else ((b - a) / m.time if m.time > 0 else 1.0 / len(spans))
            for each in (meter, epoch):
                each.add(grid.clock.time_of(a), grid.clock.time_of(b), total * share)
        self.epoch_grid.append(epoch.figures(total))

    def _begin_epoch(self, epoch: int) -> None:
        self._in_epoch = epoch
        policy = self.power_policy
        self._wants_iterations = bool(isinstance(policy, IterationControl) and policy.wants_iterations(self))
        self.monitor.begin_window(f"epoch-{epoch}")
        self._marks = []
        self.mark()
        if self._timed is not None:
            self._due = self._timed.next_action(self)
            self._act_if_due()

    def _end_epoch(self, epoch: int) -> None:
        if self._in_epoch != epoch:
            return
        m = self.combine_ranks(self.monitor.end_window(f"epoch-{epoch}"))
        self._charge(m)
        self._in_epoch = None
        self._due = None
        self.epochs_done += 1
        self.epoch_measurements.append(m)
        self.epoch_costs.append(self.cost(m.total_system_energy, m.time))
        self.epoch_profiled.append(self._wants_iterations)
        self._wants_iterations = False
        if self.power_policy is not None:
            self.power_policy.on_epoch_end(self, epoch, m)


def _joules(devices: DeviceGroup) -> float:
    """The devices' cumulative energy, summed (for where to cut an epoch's energy)."""
    return float(sum(devices.read_energy().values()))

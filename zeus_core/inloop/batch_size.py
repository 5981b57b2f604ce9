"""Zeus inside the user's own training loop: :class:`BatchSizeOptimizer` chooses each try's batch size.

The batch size of each try of a recurring job, chosen by a registered batch-size policy
through the job's :class:`~zeus_core.engine.history.History` (or any
:class:`~zeus_core.engine.history.JobHistory`, such as a remote optimizer's client):
recurrences, cost bounds and what the policy learns are the runner's. Under several
ranks every rank creates the same object and makes the same calls; rank 0 decides
(:mod:`zeus_core.engine.ranks`). See :mod:`zeus_core.inloop.power` for the identity a
script declares.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zeus_core.backends import ProcessGroup
from zeus_core.cost import zeus_cost
from zeus_core.engine.assembly import script_job
from zeus_core.engine.history import HistoryService, JobHistory, TryPlan
from zeus_core.engine.ranks import agree, combine_measurements, decide, process_group
from zeus_core.engine.remote import ServesHistory
from zeus_core.engine.session import target_reached
from zeus_core.errors import RunFailed, ZeusError
from zeus_core.identity import IdentityMismatch
from zeus_core.inloop.monitor import ZeusMonitor
from zeus_core.inloop.script import job_identity, registry_or_default, script_assembly
from zeus_core.measurement import Measurement
from zeus_core.results import SCHEDULER_KEY, TryRecord
from zeus_core.scheduler import context as scheduler_context
from zeus_core.stopping import epochs_within
from zeus_core.windows import Monitor

if TYPE_CHECKING:  # annotations only
    from zeus_core.backends import JobStore
    from zeus_core.engine.registry import Registry
    from zeus_core.inloop.power import PowerLimitOptimizer


def counted_energy(m: Measurement) -> float:
    """The energy a try's cost counts of a measurement: the GPUs' where it has any (upstream Zeus's
    ``total_energy``, and what a ``[device]`` of GPUs measures under ``zeus run``), else every device's."""
    return m.total_gpu_energy if m.gpu_energy else m.total_system_energy


class BatchSizeTry:
    """One try as a script sees it: train at :attr:`batch_size` until the target, or until
    :meth:`should_stop` says the try can no longer pay off."""

    def __init__(self, owner: BatchSizeOptimizer, recurrence: int, try_index: int, batch_size: int, cost_bound: float) -> None:
        self._owner = owner
        self.recurrence = recurrence
        self.try_index = try_index
        self.batch_size = batch_size
        #: the try stops before the epoch that would push its cost past this (inf: no bound yet)
        self.cost_bound = cost_bound
        self.epochs = 0
        self.stopped: str | None = None
        self._last_cost = 0.0

    def cost(self, energy_j: float, time_s: float) -> float:
        """The job's cost metric of ``energy_j`` joules over ``time_s`` seconds (all ranks' maximum power)."""
        return self._owner.cost(energy_j, time_s)

    def should_stop(self, cost_so_far: float | Measurement) -> bool:
        """Call once after each epoch with the try's cost so far (or its measurement so far,
        counted as :func:`counted_energy` says):
        True when the next epoch would push the cost past :attr:`cost_bound` (judged at the
        last epoch's cost, as ``zeus run`` does), or ``max_epochs`` epochs have run.

        Under several ranks call it on every rank: a measurement is combined over ranks
        (energy summed, time of the slowest); with a number, rank 0's counts. Every rank
        gets rank 0's answer.
        """
        owner = self._owner
        if isinstance(cost_so_far, Measurement):
            parts = owner.group.gather(cost_so_far)
            whole = None if parts is None else combine_measurements(parts)
            value = None if whole is None else owner.cost(counted_energy(whole), whole.time)
        else:
            value = float(cost_so_far)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"cost_so_far must be a finite cost >= 0, got {cost_so_far!r}")
        self.epochs += 1

        def judge() -> str | None:
            assert value is not None
            last, self._last_cost = value - self._last_cost, value
            limit = owner.max_epochs or 10**9
            if owner.max_epochs is not None and self.epochs >= owner.max_epochs:
                return "max-epochs"
            if self.epochs >= epochs_within(self.cost_bound, max(last, 0.0), limit):
                return "early-stop"
            return None

        self.stopped = decide(owner.group, "should_stop", judge)
        return self.stopped is not None

    def __repr__(self) -> str:
        return (
            f"BatchSizeTry(recurrence={self.recurrence}, try_index={self.try_index}, batch_size={self.batch_size}, "
            f"cost_bound={self.cost_bound:g})"
        )


class UserLoop:
    """The user's own loop, as the workload a batch-size policy is built beside
    (:class:`~zeus_core.parts.OffersBatchSizes`): the batch sizes it can train and its default."""

    def __init__(self, batch_sizes: list[int] | None, default_batch_size: int | None) -> None:
        self.batch_sizes = batch_sizes
        self.default_batch_size = default_batch_size


def _batch_sizes(value: Any) -> list[int] | None:
    if value is None:
        return None
    try:
        out = list(value)
    except TypeError:
        raise ValueError(f"batch_sizes must be a list of positive whole numbers, got {value!r}") from None
    if not out or any(isinstance(b, bool) or not isinstance(b, int) or b <= 0 for b in out) or len(set(out)) != len(out):
        raise ValueError(f"batch_sizes must list distinct positive whole numbers, got {value!r}")
    return out


class BatchSizeOptimizer:
    """Chooses the batch size of each try of a recurring job, from the user's script.

    ``job``: the job's name (its store: ``store``, a path or a URL, default
    ``.zeus/<job>.sqlite``, shared with ``zeus run`` of the same job). ``policy``: a
    registered batch-size policy (``mab``, ``fixed``, a third party's), ``options`` its
    ``[batch_size]`` table. ``batch_sizes`` and ``default``: what the policy chooses
    among and starts from (a ``[workload]``'s ``batch_sizes`` and
    ``default_batch_size``). ``monitor`` (a :class:`~zeus_core.ZeusMonitor`) or
    ``max_power_w``: the devices' maximum power of the cost metric (the monitor's GPUs;
    with neither, the GPUs a plain ``ZeusMonitor()`` finds). ``eta_knob``,
    ``beta_knob``, ``target_metric``, ``higher_is_better``, ``max_epochs``,
    ``max_tries``, ``seed``: the ``[job]`` keys of the same names. ``fresh``: forget
    what the store learned (in the first write). ``history``: a
    :class:`~zeus_core.engine.history.JobHistory` to use instead of the store (an optimizer
    service's client). ``group``: the ranks (default: found).

    Each :meth:`next` is one try (a new recurrence after one that reached the target);
    :meth:`report` records it with what the policy learns. A recurrence that does not
    reach the target in ``max_tries`` tries raises :class:`~zeus_core.RunFailed`.
    """

    def __init__(
        self,
        job: str,
        policy: str = "mab",
        batch_sizes: list[int] | None = None,
        default: int | None = None,
        *,
        options: dict[str, Any] | None = None,
        monitor: Monitor | None = None,
        max_power_w: float | None = None,
        eta_knob: float = 0.5,
        beta_knob: float = 2.0,
        target_metric: float | None = None,
        higher_is_better: bool = True,
        max_epochs: int | None = None,
        max_tries: int = 20,
        seed: int = 0,
        store: str | Path | None = None,
        history: JobHistory | None = None,
        fresh: bool = False,
        group: ProcessGroup | None = None,
        registry: Registry | None = None,
    ) -> None:
        if job is None:
            raise ValueError('job must name the job (its recurrences share one history), e.g. job="resnet-cifar"')
        sizes = _batch_sizes(batch_sizes)
        if default is not None and (isinstance(default, bool) or not isinstance(default, int) or default <= 0):
            raise ValueError(f"default must be a positive whole batch size, got {default!r}")
        if sizes is not None and default is not None and default not in sizes:
            raise ValueError(f"default {default} is not one of batch_sizes {sizes}; add it to the list")
        if max_power_w is not None and not (isinstance(max_power_w, (int, float)) and math.isfinite(max_power_w) and max_power_w > 0):
            raise ValueError(f"max_power_w must be a positive number of watts, got {max_power_w!r}")
        if monitor is not None and not isinstance(monitor, Monitor):
            raise ValueError(f"monitor must be a zeus_core.ZeusMonitor, got {type(monitor).__name__}")
        if history is not None and not isinstance(history, JobHistory):
            raise ValueError("history must be a zeus_core.engine.history.JobHistory (begin_recurrence, next_try, record)")
        knobs: dict[str, Any] = {
            "eta_knob": eta_knob,
            "beta_knob": beta_knob,
            "higher_is_better": higher_is_better,
            "max_tries": max_tries,
            "seed": seed,
        }
        if target_metric is not None:
            knobs["target_metric"] = target_metric
        if max_epochs is not None:
            knobs["max_epochs"] = max_epochs
        try:
            jobopts = script_job(job, **knobs)
        except (TypeError, ValueError) as e:
            raise ValueError(str(e)) from None
        reg = registry_or_default(registry)
        self.group = group = process_group(group, reg)
        jobopts.processes = group.world_size
        self.job = jobopts
        self.max_epochs = max_epochs
        self.target_metric = target_metric
        agree(
            group,
            {
                "job": job,
                "policy": policy,
                "options": options,
                "batch_sizes": sizes,
                "default": default,
                "eta_knob": eta_knob,
                "beta_knob": beta_knob,
                "target_metric": target_metric,
                "max_epochs": max_epochs,
                "max_tries": max_tries,
            },
            "BatchSizeOptimizer",
        )
        local_power, device_identity = self._power(monitor, max_power_w, reg)
        powers = group.gather(local_power)
        self.max_power_w = float(group.broadcast(sum(powers) if powers else 0.0))
        self._trial: BatchSizeTry | None = None
        self._pending: TryPlan | None = None
        self._recurrence: int | None = None
        self._tries = 0
        self._cost_acc = 0.0
        self.store: JobStore | None = None
        self.history: JobHistory | None = None
        self.policy = None
        if group.rank != 0:
            return
        keys = (
            ("eta_knob", "beta_knob", "higher_is_better", "processes")
            + (("target_metric",) if target_metric is not None else ())
            + (("max_epochs",) if max_epochs is not None else ())
        )
        identity: dict[str, Any] = {
            "job": job_identity(jobopts, keys),
            "workload": {"batch_sizes": sizes or [], "default_batch_size": default},
        }
        if device_identity is not None:
            identity["device"] = device_identity
        assembly = script_assembly(
            reg,
            jobopts,
            "batch_size",
            policy,
            options,
            arg="policy",
            parts={"workload": UserLoop(sizes, default)},
            identity=identity,
            group=group,
            store=store,
            fresh=fresh,
        )
        self.policy = assembly.parts["batch_size"]
        self.identity = assembly.identity
        if history is not None:
            self.history = history
            return
        self.store = assembly.open_store()
        if not isinstance(self.store, ServesHistory):  # zeus serve checks the identity it is sent itself
            try:
                assembly.check_identity()
            except IdentityMismatch:
                self.store.close()
                raise
        self.history = assembly.history(max_power_w=self.max_power_w)

    @staticmethod
    def _power(monitor: Monitor | None, max_power_w: float | None, reg: Registry) -> tuple[float, dict[str, Any] | None]:
        """This rank's maximum power for the cost metric, and its ``[device]`` identity when known."""
        if max_power_w is not None:
            return float(max_power_w), None
        if monitor is not None:
            got = monitor.primary() if isinstance(monitor, ZeusMonitor) else None
            if got is not None:
                return float(got[0].max_power_w), got[1]
            return float(monitor.devices.max_power_w), None
        with ZeusMonitor(cpu_indices=[], registry=reg) as probe:
            got = probe.primary()
            if got is None:
                raise ValueError(
                    "the cost metric needs the devices' maximum power and no GPU was found: pass monitor= (the "
                    "ZeusMonitor that measures the training) or max_power_w="
                )
            return float(got[0].max_power_w), got[1]

    # -- the cost metric --

    def cost(self, energy_j: float, time_s: float) -> float:
        """The job's cost metric of ``energy_j`` joules over ``time_s`` seconds."""
        return float(zeus_cost(energy_j, time_s, self.job.eta_knob, self.max_power_w))

    # -- tries --

    def next(self) -> BatchSizeTry:
        """The next try: its batch size and cost bound (a new recurrence after one that reached the target)."""
        if self._trial is not None:
            raise RuntimeError(f"report {self._trial!r} first (bso.report(trial, energy_j=..., time_s=..., reached=...))")

        def choose() -> tuple[int, int, int, float]:
            assert self.history is not None
            if self._recurrence is None:
                self._recurrence = self.history.begin_recurrence()
                self._tries, self._cost_acc = 0, 0.0
            self._tries += 1
            self._pending = self.history.next_try(self._recurrence, self._tries)
            t = self._pending
            return t.recurrence, t.try_index, int(t.batch_size), float(t.cost_bound)

        rec, try_index, batch_size, bound = decide(self.group, "next", choose)
        self._trial = BatchSizeTry(self, rec, try_index, batch_size, bound)
        return self._trial

    def report(
        self,
        trial: BatchSizeTry,
        *,
        energy_j: float,
        time_s: float,
        reached: bool | None = None,
        metric: float | None = None,
        epochs: int | None = None,
        power: PowerLimitOptimizer | None = None,
        extra: dict[str, Any] | None = None,
    ) -> TryRecord:
        """Record ``trial``: its energy and time (this rank's; ranks are summed), whether it
        ``reached`` the target (or its ``metric``, judged against ``target_metric``), how
        many ``epochs`` it ran (default: the :meth:`BatchSizeTry.should_stop` calls), and
        ``power``: the :class:`PowerLimitOptimizer` that steered it (its limit and
        steady-state cost go into the record). Returns the record (every rank)."""
        if trial is not self._trial:
            raise ValueError(f"report the trial the last next() returned ({self._trial!r}), got {trial!r}")
        if reached is None:
            if metric is None or self.target_metric is None:
                raise ValueError(
                    "say whether the try reached the target: reached=True or False, or metric=<validation metric> "
                    "with target_metric= given when creating the BatchSizeOptimizer"
                )
            reached = target_reached(float(metric), self.target_metric, self.job.higher_is_better)
        for name, value in (("energy_j", energy_j), ("time_s", time_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        mine = {"energy_j": float(energy_j), "time_s": float(time_s), "reached": bool(reached)}
        parts = self.group.gather(mine)
        power_limit = power.held_limit if power is not None else None
        steady = power.steady_cost() if power is not None else None

        def record() -> TryRecord:
            assert parts is not None and self._pending is not None and self.history is not None
            split = sorted({p["reached"] for p in parts})
            if len(split) > 1:
                raise ValueError(
                    f"the ranks disagree whether try {trial.try_index} reached the target: "
                    f"{[p['reached'] for p in parts]} by rank; report the same reached= on every rank"
                )
            energy = float(sum(p["energy_j"] for p in parts))
            seconds = float(max(p["time_s"] for p in parts))
            n = trial.epochs if epochs is None else int(epochs)
            details = dict(extra or {}) | ({"metric": float(metric)} if metric is not None else {})
            if steady is not None:
                details["steady_cost"] = steady
            context = scheduler_context()  # the Slurm job, pod or rank the try ran in
            if context:
                details[SCHEDULER_KEY] = context
            rec = TryRecord(
                recurrence=trial.recurrence,
                try_index=trial.try_index,
                batch_size=trial.batch_size,
                power_limit=power_limit,
                epochs=n,
                time_s=seconds,
                energy_j=energy,
                cost=self.cost(energy, seconds),
                reached=bool(reached),
                stopped=None if reached else (trial.stopped or "ended"),
                extra=details,
                steady_cost=steady,
            )
            self._cost_acc += rec.cost  # a try that never ran reports (about) nothing
            self.history.record(self._pending, rec, recurrence_cost=self._cost_acc if rec.reached else None)
            return rec

        try:
            rec = decide(self.group, "report", record)
        finally:
            self._trial = self._pending = None
        if rec.reached:
            self._recurrence = None
        elif trial.try_index >= self.job.max_tries:
            self._recurrence = None
            raise RunFailed(
                f"recurrence {trial.recurrence} did not reach the target in {self.job.max_tries} tries; raise max_tries "
                "or max_epochs, or check the target (target_metric=, reached=)"
            )
        return rec

    def close(self) -> None:
        """Give the store back; a recurrence begun and not ended is recorded as abandoned."""
        if self._recurrence is not None and isinstance(self.history, HistoryService):
            rec, self._recurrence = self._recurrence, None
            try:
                self.history.abandon(rec, "the script closed its BatchSizeOptimizer before a try reached the target")
            except ZeusError:
                pass  # the store cannot be reached: the recurrence stays open, and the job's next run records it
        if self.store is not None:
            self.store.close()
            self.store = None

    def __enter__(self) -> BatchSizeOptimizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["BatchSizeOptimizer", "BatchSizeTry", "counted_energy"]

"""The recurring-job loop that composes the chosen parts (DESIGN.md, "Data flow").

Per recurrence, tries run until one reaches the target metric:

1. the batch-size policy chooses (its state is loaded from and saved to the
   store in one short transaction, so several processes may run one job);
2. a :class:`RunSession` is built and the workload trains through it; the
   session measures every epoch with a window over the device group, lets the
   power policy steer, and stops early before the epoch that would push the
   run's cost past ``beta_knob x`` the cheapest finished recurrence so far
   (the Zeus rule: the horizon uses the steady-state cost of one epoch);
3. the batch-size policy observes the try's result; its state and the result
   row commit together.

A recurrence's cost is the sum over all its tries. Parts that only plan
(allocators, frequency plans, profilers) run once before the recurrences.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import numpy as np
from rich.console import Console

from zeus_core.cost import zeus_cost
from zeus_core.job import JobOptions, JobSpec
from zeus_core.measurement import DeviceError, Measurement, Monitor
from zeus_core.registry import Registry
from zeus_core.results import JobSummary, TryRecord
from zeus_core.store import Store

#: Order in which parts are built: later parts may look at earlier ones.
BUILD_ORDER = ("device", "workload", "batch_size", "power", "frequency_plan", "allocation", "profiler")
PLANNER_SECTIONS = ("profiler", "allocation", "frequency_plan")


class PartMismatch(ValueError):
    """The chosen parts do not fit together (said plainly, before anything runs)."""


class RunFailed(RuntimeError):
    """A part failed while the job ran; earlier results stay in the store."""


@attrs.define
class BuildContext:
    """What a factory sees: the job, the store, and the parts built before it."""

    spec: JobSpec
    store: Store
    console: Console
    registry: Registry
    parts: dict[str, Any] = attrs.field(factory=dict)

    @property
    def job(self) -> JobOptions:
        return self.spec.job

    @property
    def job_dir(self) -> Path:
        return self.spec.job_dir

    def resolve_path(self, p: str | Path) -> Path:
        """A path from job.toml, relative to the job file's folder."""
        p = Path(p).expanduser()
        return p if p.is_absolute() else self.job_dir / p


@attrs.define
class PolicyContext:
    """What a batch-size policy sees when it chooses and observes."""

    job: JobOptions
    recurrence: int
    try_index: int
    min_cost: float
    batch_sizes: list[int] | None
    default_batch_size: int | None
    max_power_w: float

    @property
    def cost_bound(self) -> float:
        return self.job.beta_knob * self.min_cost

    def cost(self, energy_j: float, time_s: float) -> float:
        return zeus_cost(energy_j, time_s, self.job.eta_knob, self.max_power_w)


def call_optional(obj: Any, method: str, *args: Any) -> Any:
    """Call ``obj.method`` if it exists, passing only as many positional args as it takes."""
    fn = getattr(obj, method, None)
    if fn is None:
        return None
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return fn(*args)
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return fn(*args)
    n = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    return fn(*args[:n])


class RunSession:
    """One try: the workload's handle on epochs, iterations, metrics and measurement."""

    def __init__(
        self,
        *,
        job: JobOptions,
        batch_size: int,
        recurrence: int,
        try_index: int,
        cost_bound: float,
        devices: Any,
        monitor: Monitor,
        power_policy: Any | None,
        frequency_plan: Any | None = None,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.job = job
        self.batch_size = int(batch_size)
        self.recurrence = recurrence
        self.try_index = try_index
        self.cost_bound = cost_bound
        self.devices = devices
        self.monitor = monitor
        self.power_policy = power_policy
        self.frequency_plan = frequency_plan
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
        #: A part may install ``f(session) -> float | None`` predicting the cost of
        #: one steady-state epoch (lets early stopping act even before epoch 1).
        self.predict_epoch_cost: Callable[[RunSession], float | None] | None = None
        #: A data-parallel workload may install ``f(Measurement) -> Measurement`` that
        #: combines the ranks' measurements (energy summed, time of the slowest rank).
        self.reduce_measurement: Callable[[Measurement], Measurement] | None = None
        self.extra: dict[str, Any] = {}
        #: Iterations in the current epoch, as the workload announced them to
        #: :meth:`iterations` or :meth:`chunks` (lets a power policy fit its windows).
        self.epoch_iterations: int | None = None
        self._wants_iterations = False
        self._in_epoch: int | None = None

    # -- facts --

    @property
    def max_power_w(self) -> float:
        return float(self.devices.max_power_w)

    @property
    def power_limit(self) -> float | None:
        get = getattr(self.devices, "power_limit", None)
        return None if get is None else float(get())

    def cost(self, energy_j: float, time_s: float) -> float:
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
        if self._wants_iterations and self.power_policy is not None:
            hook = self.power_policy.on_iteration
            for i in range(count):
                hook(self, i)
                yield i
        else:
            yield from range(count)

    def chunks(self, count: int) -> Iterator[tuple[int, int]]:
        """Like :meth:`iterations` for simulated workloads: (start, n) ranges, split only
        where the power policy wants control."""
        self.epoch_iterations = int(count)
        if self._wants_iterations and self.power_policy is not None:
            for i in self.iterations(count):
                yield (i, 1)
        elif count > 0:
            yield (0, count)

    def report_metric(self, value: float) -> bool:
        """Report the validation metric; returns whether the target is reached."""
        self.metric = float(value)
        target = self.job.target_metric
        if target is not None:
            if (self.metric >= target) if self.job.higher_is_better else (self.metric <= target):
                self.reached = True
        return self.reached

    def mark_reached(self) -> None:
        """Say the target is reached (for workloads that know it without a metric)."""
        self.reached = True

    # -- internals --

    def _steady_epoch_cost(self) -> float | None:
        if self.predict_epoch_cost is not None:
            v = self.predict_epoch_cost(self)
            if v is not None:
                return float(v)
        if self.power_policy is not None:
            v = call_optional(self.power_policy, "steady_epoch_cost", self)
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
        return (self.epochs_done + 1) * cpe > self.cost_bound * (1 + 1e-12)

    def _begin_epoch(self, epoch: int) -> None:
        self._in_epoch = epoch
        self._wants_iterations = bool(
            self.power_policy is not None and call_optional(self.power_policy, "wants_iterations", self)
        )
        self.monitor.begin_window(f"epoch-{epoch}")

    def _end_epoch(self, epoch: int) -> None:
        if self._in_epoch != epoch:
            return
        self._in_epoch = None
        m = self.monitor.end_window(f"epoch-{epoch}")
        if self.reduce_measurement is not None:
            m = self.reduce_measurement(m)
        self.epochs_done += 1
        self.epoch_measurements.append(m)
        self.epoch_costs.append(self.cost(m.total_system_energy, m.time))
        self.epoch_profiled.append(self._wants_iterations)
        self._wants_iterations = False
        if self.power_policy is not None:
            call_optional(self.power_policy, "on_epoch_end", self, epoch, m)


_DEFAULT_RUNNER_STATE = {"next_recurrence": 1, "min_cost": None}


class Runner:
    """Builds the parts of a validated job and runs it."""

    def __init__(self, spec: JobSpec, registry: Registry, console: Console | None = None, store: Store | None = None) -> None:
        self.spec = spec
        self.registry = registry
        self.console = console or Console()
        self.store = store or Store(spec.store_path())
        self.ctx = BuildContext(spec, self.store, self.console, registry)
        self.parts: dict[str, Any] = self.ctx.parts
        self.hook = registry.pm.hook
        self.monitor: Monitor | None = None

    # -- building --

    def build(self) -> None:
        """Call each factory (device first) and check that the parts fit together."""
        parts = self.spec.parts
        for section in BUILD_ORDER:
            ps = parts.get(section)
            if ps is None:
                continue
            try:
                part = ps.registration.factory(ps.options, self.ctx)
            except (PartMismatch, ValueError, FileNotFoundError) as e:
                raise PartMismatch(f"[{section}] plugin {ps.plugin!r}: {e}") from e
            self.parts[section] = part
            self._check_requirements(section, ps.plugin, part)
        if "device" in self.parts:
            self.monitor = Monitor(self.parts["device"], on_measurement=self._on_measurement)

    def _check_requirements(self, section: str, plugin: str, part: Any) -> None:
        needs = getattr(part, "requires_device", ()) or ()
        if not needs:
            return
        device = self.parts.get("device")
        if device is None:
            raise PartMismatch(f"[{section}] plugin {plugin!r} needs a [device], and the job has none")
        missing = [m for m in needs if not callable(getattr(device, m, None))]
        if missing:
            dev_name = self.spec.parts["device"].plugin
            raise PartMismatch(
                f"[{section}] plugin {plugin!r} needs a device that supports {', '.join(missing)}, "
                f"but device {dev_name!r} does not. Choose another device plugin, or power policy \"max\""
            )

    def _on_measurement(self, name: str, m: Measurement) -> None:
        self.hook.zeus_on_measurement(name=name, measurement=m)

    def close(self) -> None:
        """Close parts in reverse build order (devices last: they restore settings)."""
        errors = []
        for section in reversed(BUILD_ORDER):
            part = self.parts.get(section)
            if part is not None and hasattr(part, "close"):
                try:
                    part.close()
                except Exception as e:  # noqa: BLE001 - keep closing the others
                    errors.append(f"[{section}] close failed: {e}")
        self.store.close()
        if errors:
            raise RunFailed("; ".join(errors))

    # -- state --

    def _load_policy_states(self, tx, sections=("batch_size", "power")) -> None:
        for section in sections:
            part = self.parts.get(section)
            if part is not None and hasattr(part, "set_state"):
                state = tx.get(f"policy:{section}")
                if state is not None:
                    part.set_state(state)

    def _save_policy_states(self, tx, sections=("batch_size", "power")) -> None:
        for section in sections:
            part = self.parts.get(section)
            if part is not None and hasattr(part, "get_state"):
                state = part.get_state()
                if state is not None:
                    tx.set(f"policy:{section}", state)

    # -- running --

    def plan(self) -> None:
        for section in PLANNER_SECTIONS:
            part = self.parts.get(section)
            if part is not None and hasattr(part, "plan"):
                plugin = self.spec.parts[section].plugin if section in self.spec.parts else section
                try:
                    part.plan(self.ctx)
                except (PartMismatch, RunFailed):
                    raise
                except (ValueError, FileNotFoundError) as e:  # bad input the plan reveals (infeasible, NaN)
                    raise PartMismatch(f"[{section}] plugin {plugin!r}: {e}") from e
                except Exception as e:
                    raise RunFailed(f"[{section}] plugin {plugin!r} failed while planning: {type(e).__name__}: {e}") from e

    def run(self, progress: Callable[[str, dict], None] | None = None) -> JobSummary:
        """Plan, then run ``job.recurrences`` recurrences. Returns the job summary."""
        self.hook.zeus_on_job_start(job=self.spec.job, context=self.ctx)
        self.plan()
        if "workload" in self.parts:
            for _ in range(self.spec.job.recurrences):
                rec, records = self.run_recurrence()
                if progress:
                    progress("recurrence", {"recurrence": rec, "records": records})
        summary = self.summary()
        self.hook.zeus_on_job_end(summary=summary)
        return summary

    def run_recurrence(self) -> tuple[int, list[TryRecord]]:
        job = self.spec.job
        with self.store.transaction() as tx:
            st = dict(tx.get("runner") or _DEFAULT_RUNNER_STATE)
            rec = int(st["next_recurrence"])
            st["next_recurrence"] = rec + 1
            tx.set("runner", st)
        records: list[TryRecord] = []
        cost_acc = 0.0
        for try_index in range(1, job.max_tries + 1):
            record = self.run_try(rec, try_index)
            records.append(record)
            if record.epochs > 0:
                cost_acc += record.cost
            if record.reached:
                with self.store.transaction() as tx:
                    st = dict(tx.get("runner") or _DEFAULT_RUNNER_STATE)
                    prev = st.get("min_cost")
                    st["min_cost"] = cost_acc if prev is None else min(prev, cost_acc)
                    tx.set("runner", st)
                self.hook.zeus_on_recurrence_end(recurrence=rec, records=records)
                return rec, records
        self.hook.zeus_on_recurrence_end(recurrence=rec, records=records)
        raise RunFailed(
            f"recurrence {rec} did not reach the target metric in {job.max_tries} tries "
            f"(batch sizes tried: {[r.batch_size for r in records]}); raise job.max_tries or job.max_epochs, "
            "or check job.target_metric"
        )

    def _policy_context(self, rec: int, try_index: int, min_cost: float) -> PolicyContext:
        workload = self.parts["workload"]
        bss = getattr(workload, "batch_sizes", None)
        return PolicyContext(
            job=self.spec.job,
            recurrence=rec,
            try_index=try_index,
            min_cost=min_cost,
            batch_sizes=None if bss is None else list(bss),
            default_batch_size=getattr(workload, "default_batch_size", None),
            max_power_w=float(self.parts["device"].max_power_w),
        )

    def run_try(self, rec: int, try_index: int) -> TryRecord:
        job = self.spec.job
        bs_policy = self.parts["batch_size"]
        power = self.parts.get("power")
        with self.store.transaction() as tx:
            st = tx.get("runner") or _DEFAULT_RUNNER_STATE
            min_cost = math.inf if st.get("min_cost") is None else float(st["min_cost"])
            self._load_policy_states(tx)
            ctx = self._policy_context(rec, try_index, min_cost)
            batch_size = int(bs_policy.choose(ctx))
            # A policy may stop its own exploratory tries sooner than beta x min cost.
            own_bound = call_optional(bs_policy, "try_cost_bound", ctx, batch_size)
            self._save_policy_states(tx, ("batch_size",))
        cost_bound = job.beta_knob * min_cost
        if own_bound is not None:
            cost_bound = min(cost_bound, float(own_bound))
        session = RunSession(
            job=job,
            batch_size=batch_size,
            recurrence=rec,
            try_index=try_index,
            cost_bound=cost_bound,
            devices=self.parts["device"],
            monitor=self.monitor,
            power_policy=power,
            frequency_plan=self.parts.get("frequency_plan"),
        )
        assert self.monitor is not None
        self.monitor.begin_window("run")
        try:
            if power is not None:
                power.begin_run(session)
            self.parts["workload"].run(session)
            if power is not None:
                power.end_run(session)
        except DeviceError as e:  # already says what is wrong and the fix
            self.monitor.end_window("run", cancel=True)
            raise RunFailed(f"recurrence {rec}, try {try_index} (batch size {batch_size}): {e}") from e
        except Exception as e:
            self.monitor.end_window("run", cancel=True)
            raise RunFailed(
                f"recurrence {rec}, try {try_index} (batch size {batch_size}) failed in the workload: "
                f"{type(e).__name__}: {e}. Results of earlier tries are kept in {self.store.path}"
            ) from e
        whole = self.monitor.end_window("run")
        if session.reduce_measurement is not None and not session.epoch_measurements:
            whole = session.reduce_measurement(whole)
        if session.epoch_measurements:
            time_s = float(sum(m.time for m in session.epoch_measurements))
            energy_j = float(sum(m.total_system_energy for m in session.epoch_measurements))
        else:
            time_s, energy_j = whole.time, whole.total_system_energy
        stopped = None if session.reached else (session.stopped or "ended")
        record = TryRecord(
            recurrence=rec,
            try_index=try_index,
            batch_size=batch_size,
            power_limit=session.power_limit,
            epochs=session.epochs_done,
            time_s=time_s,
            energy_j=energy_j,
            cost=session.cost(energy_j, time_s),
            reached=session.reached,
            stopped=stopped,
            extra={k: v for k, v in session.extra.items()} | (
                {"metric": session.metric} if session.metric is not None else {}
            ),
        )
        with self.store.transaction() as tx:
            # Observe on the latest committed state, so concurrent runners of one
            # job each add their observation instead of overwriting the other's.
            self._load_policy_states(tx, ("batch_size",))
            bs_policy.observe(ctx, record)
            self._save_policy_states(tx, ("batch_size",))
            self._save_policy_states(tx, ("power",))
            tx.add_try(record)
        self.hook.zeus_on_try_end(record=record)
        return record

    # -- results --

    def summary(self) -> JobSummary:
        records = self.store.tries()
        reached = [r for r in records if r.reached]
        knobs: dict[str, Any] = {}
        if reached:
            last = reached[-1]
            knobs = {"batch_size": last.batch_size, "power_limit": last.power_limit}
            counts: dict[str, int] = {}
            for r in reached:
                counts[str(r.batch_size)] = counts.get(str(r.batch_size), 0) + 1
            knobs["batch_size_counts"] = counts
        summary = JobSummary(
            job=self.spec.job.name,
            recurrences=len({r.recurrence for r in records}),
            tries=len(records),
            energy_j=float(np.sum([r.energy_j for r in records])) if records else 0.0,
            time_s=float(np.sum([r.time_s for r in records])) if records else 0.0,
            cost=float(np.sum([r.cost for r in records])) if records else 0.0,
            knobs=knobs,
            records=records,
        )
        for section, part in self.parts.items():
            extra = call_optional(part, "summary", summary)
            if extra:
                summary.extra[section] = extra
        return summary

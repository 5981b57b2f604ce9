"""The recurring-job loop that composes the chosen parts (docs/architecture.md, "The flow of zeus run").

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

Under a launcher (``torchrun --nproc-per-node=N --no-python zeus run job.toml``,
or a script calling the torch plugin's ``run_job``) every rank runs this: the
ranks form one job (:func:`zeus_core.engine.ranks.process_group`), ``job.processes`` is the
launcher's world size, rank 0 runs the recurrences and alone opens the store,
and every other rank builds only its ``[device]`` and the workload, which serves
rank 0 (:class:`~zeus_core.parts.ServesRanks`). Each rank reports whether it
built its parts before any rank trains, so one that cannot start (no device, a
bad allocation) stops the job on every rank with its message.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from typing import Any

from rich.console import Console

from zeus_core.attribution import charged_to
from zeus_core.backends import JobStore, ProcessGroup
from zeus_core.contexts import BuildContext
from zeus_core.engine.assembly import Assembly
from zeus_core.engine.history import History, HistoryService, TryPlan, ledger, load_policy_states
from zeus_core.engine.ranks import ranks_charged
from zeus_core.engine.registry import Registry
from zeus_core.engine.session import RunSession
from zeus_core.errors import DeviceError, PartMismatch, RunFailed
from zeus_core.grid import job_totals, record_currency
from zeus_core.job import BUILD_ORDER, PLAN_ORDER, JobSpec
from zeus_core.measurement import Measurement, energy_method
from zeus_core.parts import Summarizes
from zeus_core.results import ATTRIBUTION_KEY, ENERGY_KEY, GRID_KEY, SCHEDULER_KEY, JobSummary, ThisRun, TryRecord
from zeus_core.scheduler import context as scheduler_context
from zeus_core.windows import Monitor

log = logging.getLogger("zeus.engine")


def stop_reason(e: BaseException) -> str:
    """Why a recurrence stopped, in a line: the signal, or the error and its message."""
    import signal

    signum = getattr(e, "signum", signal.SIGINT if isinstance(e, KeyboardInterrupt) else None)
    if signum is not None:
        return f"interrupted by {signal.Signals(signum).name}"
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


class Runner:
    """Runs a validated job: its parts come from one :class:`~zeus_core.engine.assembly.Assembly`."""

    def __init__(
        self,
        spec: JobSpec,
        registry: Registry,
        console: Console | None = None,
        store: JobStore | None = None,
        fresh: bool = False,
        group: ProcessGroup | None = None,
        wait: bool = False,
    ) -> None:
        self.spec = spec
        self.registry = registry
        self.console = console or Console()
        #: ``zeus run --fresh``: forget what the store learned, in the job's first write (so a
        #: start that fails before it leaves the store as it was).
        self.fresh = fresh
        #: ``zeus run --fresh --wait``: start over once the job's other live runners ended their
        #: open recurrences, instead of refusing (:class:`~zeus_core.engine.history.FreshRefused`).
        self.wait = wait
        self.assembly = Assembly.for_job(spec, registry, console=self.console, store=store, group=group, fresh=fresh)
        self.hook = registry.pm.hook
        self.monitor: Monitor | None = None
        self.history: HistoryService | None = None
        #: the recurrence numbers this runner began (None until :meth:`run`: a report runs none)
        self.began: list[int] | None = None

    @property
    def parts(self) -> dict[str, Any]:
        return self.assembly.parts

    @property
    def store(self) -> JobStore | None:
        return self.assembly.store

    @property
    def leads(self) -> bool:
        """Whether this process runs the job: rank 0 of a launched job, or the only process."""
        return self.assembly.leads

    @property
    def ctx(self) -> BuildContext:
        return self.assembly.context

    # -- building --

    def build(self, sections: tuple[str, ...] = BUILD_ORDER) -> None:
        """Build the parts (device first), check that they fit together and that the store learned
        this job, and find where its history is kept. ``sections`` limits which parts are built
        (``zeus report`` builds no planner)."""
        self.assembly.build(sections)
        if not self.leads:
            return
        if "device" in self.parts:
            self.monitor = Monitor(self.parts["device"], on_measurement=self._on_measurement, attribute_min_s=0.0)
        self.assembly.check_identity()
        if "workload" in self.parts:
            self.history = self.assembly.history(wait=self.wait)
            if isinstance(self.history, History) and not self.fresh:
                # A stored state its policy cannot read refuses the store now, before the first write.
                load_policy_states(self.history.store, self.parts.get("batch_size"), self.parts.get("power"))

    def _on_measurement(self, name: str, m: Measurement) -> None:
        self.hook.zeus_on_measurement(name=name, measurement=m)

    def close(self) -> None:
        """Close parts in reverse build order (devices last: they restore settings), then the store."""
        errors = self.assembly.close_parts()
        if self.history is not None:
            self.history.close()
        if self.store is not None:
            self.store.close()
        if errors:
            raise RunFailed("; ".join(errors))

    # -- running --

    def plan(self) -> None:
        for section in PLAN_ORDER:
            part = self.parts.get(section)
            if part is not None:
                plugin = self.assembly.plugin_of(section)
                try:
                    part.plan(self.ctx)
                except (PartMismatch, RunFailed):
                    raise
                except (ValueError, FileNotFoundError) as e:  # bad input the plan reveals (infeasible, NaN)
                    raise PartMismatch(f"[{section}] plugin {plugin!r}: {e}") from e
                except Exception as e:
                    raise RunFailed(f"[{section}] plugin {plugin!r} failed while planning: {type(e).__name__}: {e}") from e

    def run(self, progress: Callable[[str, dict], None] | None = None) -> JobSummary:
        """Plan, then run ``job.recurrences`` recurrences. Returns the job summary
        (on a rank other than 0 of a launched job: serve rank 0, then an empty summary)."""
        if not self.leads:
            self.parts["workload"].serve_rank()
            return JobSummary(job=self.spec.job.name, recurrences=0, tries=0, energy_j=0.0, time_s=0.0, cost=0.0, knobs={})
        self.hook.zeus_on_job_start(job=self.spec.job, context=self.ctx)
        log.info(
            "job %r: planning, then %d recurrence(s) with %s",
            self.spec.job.name,
            self.spec.job.recurrences,
            ", ".join(f"{s}={p.plugin}" for s, p in self.spec.parts.items()),
        )
        self.plan()
        self.began = []
        if "workload" in self.parts:
            for _ in range(self.spec.job.recurrences):
                rec, records = self.run_recurrence()
                if progress:
                    progress("recurrence", {"recurrence": rec, "records": records})
        summary = self.summary()
        self.hook.zeus_on_job_end(summary=summary)
        return summary

    def run_recurrence(self) -> tuple[int, list[TryRecord]]:
        """One recurrence: tries until one reaches the target. One that ends otherwise (a failure,
        a signal, ``max_tries``) is recorded as abandoned with the reason, where the store can
        still be reached; else it stays open, and the job's next run on this machine records it."""
        assert self.history is not None
        rec = self.history.begin_recurrence()
        if self.began is not None:
            self.began.append(rec)
        try:
            return self._tries_of(rec)
        except BaseException as e:
            self._abandon(rec, e)
            raise

    def _abandon(self, rec: int, e: BaseException) -> None:
        assert self.history is not None
        try:
            self.history.abandon(rec, stop_reason(e))
        except Exception as failed:  # noqa: BLE001 - the store is what failed, most likely; the run's error stands
            log.warning(
                "recurrence %d is left open (it could not be recorded as abandoned: %s); the job's next run on this machine records it",
                rec,
                str(failed)[:300],
            )

    def _tries_of(self, rec: int) -> tuple[int, list[TryRecord]]:
        job = self.spec.job
        assert self.history is not None
        records: list[TryRecord] = []
        cost_acc = 0.0
        for try_index in range(1, job.max_tries + 1):
            plan = self.history.next_try(rec, try_index)
            record = self.run_try(plan)
            records.append(record)
            if record.epochs > 0:
                cost_acc += record.cost
            self.history.record(plan, record, recurrence_cost=cost_acc if record.reached else None)
            self.hook.zeus_on_try_end(record=record)
            if record.reached:
                self.hook.zeus_on_recurrence_end(recurrence=rec, records=records)
                return rec, records
        self.hook.zeus_on_recurrence_end(recurrence=rec, records=records)
        raise RunFailed(
            f"recurrence {rec} did not reach the target metric in {job.max_tries} tries "
            f"(batch sizes tried: {[r.batch_size for r in records]}); raise job.max_tries or job.max_epochs, "
            "or check job.target_metric"
        )

    def run_try(self, plan: TryPlan) -> TryRecord:
        """Train one try through a session; the result, not yet stored."""
        job = self.spec.job
        power = self.parts.get("power")
        rec, try_index, batch_size = plan.recurrence, plan.try_index, plan.batch_size
        assert self.monitor is not None and self.store is not None  # built by build() on rank 0
        session = RunSession(
            job=job,
            batch_size=batch_size,
            recurrence=rec,
            try_index=try_index,
            cost_bound=plan.cost_bound,
            devices=self.parts["device"],
            monitor=self.monitor,
            power_policy=power,
            workload=self.parts["workload"],
            grid=self.ctx.grid,
        )
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
                f"{type(e).__name__}: {e}. Results of earlier tries are kept in {self.store.location}"
            ) from e
        whole = self.monitor.end_window("run")
        if not session.epoch_measurements:
            whole = session.combine_ranks(whole)
        if session.epoch_measurements:
            time_s = float(sum(m.time for m in session.epoch_measurements))
            energy_j = float(sum(m.total_system_energy for m in session.epoch_measurements))
            # the bound of a sum of windows is the sum of their bounds
            method = energy_method(m.method for m in session.epoch_measurements)
            error_j = float(sum(m.error_j() for m in session.epoch_measurements))
        else:
            time_s, energy_j = whole.time, whole.total_system_energy
            method, error_j = whole.method, whole.error_j()
            if session.grid_meter is not None and session.grid is not None:  # no epochs: the run is one interval
                end = session.grid.now(session.devices)
                session.grid_meter.add(end - whole.time, end, energy_j)
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
            extra={k: v for k, v in session.extra.items()} | ({"metric": session.metric} if session.metric is not None else {}),
            steady_cost=session.steady_cost(),
        )
        if method:  # how the energy was measured, and its +/- bound (None: unknown): recurrences.csv's last columns
            record.extra[ENERGY_KEY] = {"method": method, "error_j": error_j if math.isfinite(error_j) else None}
        if session.grid_meter is not None:
            figures = session.grid_meter.figures(energy_j)
            if figures:
                record.extra[GRID_KEY] = figures
            if session.grid_meter.held_s > 0:
                record.extra["grid_held_s"] = session.grid_meter.held_s
        context = scheduler_context()  # the Slurm job, pod or rank the try ran in
        if context:
            record.extra[SCHEDULER_KEY] = context
        # the try's own processes' share of the GPUs they shared, where the driver listed them (epochs: shorter
        # windows, finer shares): this process's, or over several ranks every rank's (each rank's monitor stamps
        # its PID on its GPUs' attributions, which reach rank 0 with its measurements)
        windows = session.epoch_measurements or [whole]
        charged = charged_to([m.attribution for m in windows], [os.getpid()]) if session.ranks is None else ranks_charged(windows)
        if charged is not None:
            record.extra[ATTRIBUTION_KEY] = charged
        log.debug(
            "recurrence %d, try %d: batch size %d at %s W, %d epoch(s), %.6g s, %.6g J, cost %.6g, %s",
            rec,
            try_index,
            batch_size,
            record.power_limit,
            record.epochs,
            time_s,
            energy_j,
            record.cost,
            "reached" if record.reached else stopped,
        )
        return record

    # -- results --

    def summary(self) -> JobSummary:
        import numpy as np  # pairwise sums of the totals; imported here so `zeus --help` stays light

        if self.history is not None and not isinstance(self.history, History) and self.store is not None:
            # A service ran the batch-size policy: its latest state, for the parts' summaries.
            load_policy_states(self.store, self.parts.get("batch_size"), self.parts.get("power"))
        records = self.store.tries() if self.store is not None else []
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
        if self.began is not None:
            mine = set(self.began)
            summary.this_run = ThisRun(recurrences=sorted(mine), tries=sum(1 for r in records if r.recurrence in mine))
        if self.store is not None and "workload" in self.parts:
            account = ledger(self.store)
            summary.first_began = account.first_began
            summary.begun = account.begun
            summary.abandoned = [{"recurrence": n, "reason": str(e.get("reason", ""))} for n, e in account.abandoned.items()]
            summary.open = list(account.open)
        grid = self.ctx.grid if self.ctx is not None else None
        if grid is not None or any(r.grid for r in records):  # the job's [grid], or what its store was charged
            summary.grid = job_totals(records, summary.energy_j, grid.currency if grid is not None else record_currency(records))
            info = grid.describe() if grid is not None else {}
            info["tries_charged"] = sum(1 for r in records if r.grid)
            held = float(sum(r.extra.get("grid_held_s", 0.0) for r in records))
            if held > 0:
                info["held_s"] = held
            summary.extra["grid"] = info
        for section, part in self.parts.items():
            extra = part.summary(summary) if isinstance(part, Summarizes) else None
            if extra:
                summary.extra[section] = extra
        return summary

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

Under a launcher (``torchrun --nproc-per-node=N --no-python zeus run job.toml``,
or a script calling the torch plugin's ``run_job``) every rank runs this: the
ranks form one job (:func:`zeus_core.process_group`), ``job.processes`` is the
launcher's world size, rank 0 runs the recurrences and alone opens the store,
and every other rank builds only its ``[device]`` and the workload, which serves
rank 0 (:class:`~zeus_core.parts.ServesRanks`). Each rank reports whether it
built its parts before any rank trains, so one that cannot start (no device, a
bad allocation) stops the job on every rank with its message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
from rich.console import Console

from zeus_core.contexts import BuildContext
from zeus_core.errors import DeviceError, PartMismatch, RunFailed
from zeus_core.job import JobSpec
from zeus_core.measurement import Measurement
from zeus_core.monitor import Monitor
from zeus_core.identity import with_facts
from zeus_core.parts import Closeable, HasIdentity, NeedsDevice, OffersBatchSizes, ServesRanks, Summarizes
from zeus_core.ranks import ProcessGroup, launched_local_rank, process_group
from zeus_core.registry import SECTION_KIND, Registry
from zeus_core.results import JobSummary, TryRecord
from zeus_core.session import RunSession
from zeus_core.stores import JobStore, open_store
from zeus_core.trials import Trial, Trials, TrialService, check_store_identity, load_policy_states
from zeus_core.trialsetup import ServesTrials, TrialSetup

#: Order in which parts are built: later parts may look at earlier ones.
BUILD_ORDER = ("device", "workload", "batch_size", "power", "frequency_plan", "allocation", "profiler")
PLANNER_SECTIONS = ("profiler", "allocation", "frequency_plan")


class Runner:
    """Builds the parts of a validated job and runs it."""

    def __init__(
        self, spec: JobSpec, registry: Registry, console: Console | None = None, store: JobStore | None = None,
        fresh: bool = False, group: ProcessGroup | None = None,
    ) -> None:
        self.spec = spec
        self.registry = registry
        self.console = console or Console()
        self.group = self._join(group) if "workload" in spec.parts else None
        #: rank 0 (or the only process) runs the job; other ranks of a launched job serve it
        self.leads = self.group is None or self.group.rank == 0
        if self.leads:
            self.store: JobStore | None = store if store is not None else open_store(spec.store_location(), registry, job=spec.job.name)
        else:
            self.store = None
        self.ctx = BuildContext(spec, self.store, self.console, registry,
                                group=self.group if self.group is not None and self.group.world_size > 1 else None)
        self.parts: dict[str, Any] = self.ctx.parts
        self.hook = registry.pm.hook
        self.monitor: Monitor | None = None
        #: What this job optimises: declared by the options now, plus the built parts' facts after build().
        self.identity: dict[str, Any] = spec.identity()
        #: ``zeus run --fresh``: forget what the store learned, in the job's first write (so a
        #: start that fails before it leaves the store as it was).
        self.fresh = fresh
        self.trials: TrialService | None = None
        if not fresh:
            self.check_identity()

    def _join(self, group: ProcessGroup | None) -> ProcessGroup:
        """The ranks a launcher started (one process: a group of one); ``job.processes`` follows them."""
        try:
            got = process_group(group, self.registry)
        except (RuntimeError, TypeError) as e:
            raise PartMismatch(str(e)) from e
        job = self.spec.job
        if got.world_size > 1:
            if job.processes not in (1, got.world_size):
                raise PartMismatch(
                    f"job.processes = {job.processes}, but the launcher started {got.world_size} ranks; leave "
                    f"job.processes out under a launcher (it is the launcher's world size), or start {job.processes} ranks"
                )
            job.processes = got.world_size
        return got

    @property
    def launched(self) -> bool:
        """Whether several ranks a launcher started run this job."""
        return self.group is not None and self.group.world_size > 1

    # -- identity --

    def check_identity(self) -> None:
        """Refuse (:class:`IdentityMismatch`) a store that learned another job (not with ``--fresh``)."""
        if not self.fresh and self.store is not None:
            check_store_identity(self.store, self.identity)

    # -- building --

    def build(self, sections: tuple[str, ...] = BUILD_ORDER) -> None:
        """Call each factory (device first) and check that the parts fit together.
        ``sections`` limits which parts are built (``zeus report`` builds no planner)."""
        parts = self.spec.parts
        if not self.leads:  # another rank of a launched job: its device, and the workload that serves rank 0
            sections = tuple(s for s in sections if s in ("device", "workload"))
        for section in BUILD_ORDER:
            ps = parts.get(section) if section in sections else None
            if ps is None:
                continue
            try:
                try:
                    part = self._build_part(section, ps)
                except (PartMismatch, ValueError, FileNotFoundError) as e:
                    raise PartMismatch(f"[{section}] plugin {ps.plugin!r}: {e}") from e
                if self.launched and section == "workload" and not isinstance(part, ServesRanks):
                    raise PartMismatch(
                        f"[workload] plugin {ps.plugin!r} cannot train on ranks a launcher started (it does not serve "
                        "rank 0); run zeus once, without the launcher (job.processes for data-parallel workloads)"
                    )
            except Exception as e:
                if self.launched and section in ("device", "workload"):
                    self._ranks_ready(f"{type(e).__name__}: {e}" if not isinstance(e, PartMismatch) else str(e))
                raise
            self.parts[section] = part
            if self.launched and section == "device":
                self.ctx.rank_max_power_w = self._ranks_ready(None, float(part.max_power_w))
            elif self.launched and section == "workload":
                self._ranks_ready(None)
            self._check_requirements(section, ps.plugin, part)
        if not self.leads:
            return
        if "device" in self.parts:
            self.monitor = Monitor(self.parts["device"], on_measurement=self._on_measurement)
        facts = {section: part.identity() for section, part in self.parts.items() if isinstance(part, HasIdentity)}
        if facts:
            self.identity = with_facts(self.identity, facts)
            self.check_identity()
        workload = self.parts.get("workload")
        if workload is not None and isinstance(self.store, ServesTrials):
            # The store is a service that runs the batch-size policy itself; the power policy stays here.
            bs = self.spec.parts["batch_size"]
            setup = TrialSetup.of_parts(
                self.spec.job, self.identity, bs.plugin, bs.options, max_power_w=float(self.parts["device"].max_power_w),
                device=self.parts["device"], workload=workload, fresh=self.fresh,
            )
            self.trials = self.store.trial_service(setup, power_policy=self.parts.get("power"))
        elif workload is not None:
            offers = isinstance(workload, OffersBatchSizes)
            self.trials = Trials(
                self.spec.job, self.store, self.parts["batch_size"], identity=self.identity,
                max_power_w=float(self.parts["device"].max_power_w),
                batch_sizes=list(workload.batch_sizes) if offers and workload.batch_sizes is not None else None,
                default_batch_size=workload.default_batch_size if offers else None,
                power_policy=self.parts.get("power"), fresh=self.fresh,
            )

    def _build_part(self, section: str, ps: Any) -> Any:
        """Call the part's factory. Under a launcher with several ranks on a machine, a ``[device]``
        that measures GPUs and names none measures this rank's own (``LOCAL_RANK``-th) GPU, by the
        option its registration declares (``measures``), so that the ranks' sum counts each GPU once;
        where that GPU is not visible (the launcher gave each rank one GPU), its table as written."""
        local = launched_local_rank() if section == "device" and self.launched else None
        option = ps.registration.measures.get("gpu") if local is not None else None
        if option is not None and getattr(ps.options, option) is None:
            try:
                return ps.registration.factory(attrs.evolve(ps.options, **{option: [local]}), self.ctx)
            except Exception:  # noqa: BLE001 - e.g. CUDA_VISIBLE_DEVICES names one GPU per rank
                pass
        return ps.registration.factory(ps.options, self.ctx)

    def _ranks_ready(self, error: str | None, value: Any = None) -> list[Any]:
        """Every rank says whether it built its part (and a value, its device's maximum power):
        the values by rank, or :class:`PartMismatch` on every rank naming each rank that failed."""
        g = self.group
        assert g is not None
        got = g.gather((error, value))
        verdict = None
        if g.rank == 0:
            assert got is not None
            bad = [f"rank {r} of {g.world_size} could not start: {e}" for r, (e, _) in enumerate(got) if e]
            verdict = ("error", "; ".join(bad)) if bad else ("ok", [v for _, v in got])
        kind, payload = g.broadcast(verdict)
        if kind == "error":
            raise PartMismatch(payload)
        return payload

    def _check_requirements(self, section: str, plugin: str, part: Any) -> None:
        if not isinstance(part, NeedsDevice) or not part.needs_device:
            return
        device = self.parts.get("device")
        if device is None:
            raise PartMismatch(f"[{section}] plugin {plugin!r} needs a [device], and the job has none")
        missing = [cap for cap in part.needs_device if not isinstance(device, cap)]
        if missing:
            dev_name = self.spec.parts["device"].plugin
            what = ", ".join(f"{cap.__name__} ({_methods(cap)})" for cap in missing)
            fix = "Choose another device plugin"
            default = self.registry.default(SECTION_KIND[section])
            if default is not None and default != plugin:
                fix += f", or the default {section} plugin {default!r}"
            raise PartMismatch(f"[{section}] plugin {plugin!r} needs a device with {what}, but device {dev_name!r} has none. {fix}")

    def _on_measurement(self, name: str, m: Measurement) -> None:
        self.hook.zeus_on_measurement(name=name, measurement=m)

    def close(self) -> None:
        """Close parts in reverse build order (devices last: they restore settings)."""
        errors = []
        for section in reversed(BUILD_ORDER):
            part = self.parts.get(section)
            if isinstance(part, Closeable):
                try:
                    part.close()
                except Exception as e:  # noqa: BLE001 - keep closing the others
                    errors.append(f"[{section}] close failed: {e}")
        if self.trials is not None:
            self.trials.close()
        if self.store is not None:
            self.store.close()
        if errors:
            raise RunFailed("; ".join(errors))

    # -- running --

    def plan(self) -> None:
        for section in PLANNER_SECTIONS:
            part = self.parts.get(section)
            if part is not None:
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
        """Plan, then run ``job.recurrences`` recurrences. Returns the job summary
        (on a rank other than 0 of a launched job: serve rank 0, then an empty summary)."""
        if not self.leads:
            self.parts["workload"].serve_rank()
            return JobSummary(job=self.spec.job.name, recurrences=0, tries=0, energy_j=0.0, time_s=0.0, cost=0.0, knobs={})
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
        assert self.trials is not None
        rec = self.trials.begin_recurrence()
        records: list[TryRecord] = []
        cost_acc = 0.0
        for try_index in range(1, job.max_tries + 1):
            trial = self.trials.next_trial(rec, try_index)
            record = self.run_try(trial)
            records.append(record)
            if record.epochs > 0:
                cost_acc += record.cost
            self.trials.record(trial, record, recurrence_cost=cost_acc if record.reached else None)
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

    def run_try(self, trial: Trial) -> TryRecord:
        """Train one try through a session; the result, not yet stored."""
        job = self.spec.job
        power = self.parts.get("power")
        rec, try_index, batch_size = trial.recurrence, trial.try_index, trial.batch_size
        session = RunSession(
            job=job,
            batch_size=batch_size,
            recurrence=rec,
            try_index=try_index,
            cost_bound=trial.cost_bound,
            devices=self.parts["device"],
            monitor=self.monitor,
            power_policy=power,
            workload=self.parts["workload"],
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
                f"{type(e).__name__}: {e}. Results of earlier tries are kept in {self.store.location}"
            ) from e
        whole = self.monitor.end_window("run")
        if not session.epoch_measurements:
            whole = session.combine_ranks(whole)
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
            steady_cost=session.steady_cost(),
        )
        return record

    # -- results --

    def summary(self) -> JobSummary:
        import numpy as np  # pairwise sums, as before; imported here so `zeus --help` stays light

        if self.trials is not None and not isinstance(self.trials, Trials) and self.store is not None:
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
        for section, part in self.parts.items():
            extra = part.summary(summary) if isinstance(part, Summarizes) else None
            if extra:
                summary.extra[section] = extra
        return summary


def _methods(protocol: type) -> str:
    """The methods a capability protocol asks for, for error messages."""
    names = [n for n in vars(protocol) if not n.startswith("_") and callable(getattr(protocol, n))]
    return ", ".join(f"{n}()" for n in names) or ", ".join(getattr(protocol, "__annotations__", {}))

"""What each kind of part is, and the optional abilities a part may declare.

The core talks to parts only through these protocols (and the device ones in
:mod:`zeus_core.device`). A *part protocol* (:class:`Workload`,
:class:`BatchSizePolicy`, :class:`PowerPolicy`, :class:`Planner`) lists what
every part of that kind has. A *capability* is a small ``runtime_checkable``
protocol with one fixed signature per method: a part has it by defining those
methods, and the core asks ``isinstance(part, SteadyEpochCost)``, never counts
parameters or looks names up by string. Implement a capability completely or
not at all.

:class:`Session` is what a workload trains through and a power policy steers:
the runner hands each try's :class:`~zeus_core.engine.session.RunSession` to both.

Parts never call each other through anything but these protocols (a plugin
never imports another plugin), so what two plugins share is declared here or
in :mod:`zeus_core.device`: the ``trace`` device predicts epochs
(:class:`~zeus_core.device.EpochPredictor`) that the ``mab`` policy plans
with, and a power policy reports its steady-state epoch cost
(:class:`SteadyEpochCost`) that the runner turns into
:attr:`~zeus_core.results.TryRecord.steady_cost` for any batch-size policy.

``docs/parts.md`` is generated from this module and :mod:`zeus_core.device`
(``python -m zeus_core.docgen``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only; none of these modules imports this one
    from rich.console import Console

    from zeus_core.contexts import BuildContext, PolicyContext
    from zeus_core.device import DeviceGroup
    from zeus_core.files import FileChecks
    from zeus_core.job import JobOptions
    from zeus_core.measurement import Measurement
    from zeus_core.results import JobSummary, TryRecord
    from zeus_core.windows import Monitor


# =========================================================================== the session


class Session(Protocol):
    """One try, as a workload and a power policy see it (implemented by
    :class:`~zeus_core.engine.session.RunSession`).

    Facts: ``job`` (the ``[job]`` options), ``batch_size``, ``recurrence`` and
    ``try_index`` (from 1), ``cost_bound`` (the try stops before the epoch that
    would pass it), ``devices`` (the job's device group), ``monitor`` (windows
    over it), ``power_policy``, ``rank``/``world_size``, ``max_epochs``.

    Progress: ``epochs_done``, and per finished epoch ``epoch_measurements``,
    ``epoch_costs`` and ``epoch_profiled`` (whether the power policy acted
    between its iterations); ``epoch_iterations`` (iterations of the current
    epoch, as the workload announced them); ``metric``, ``reached``,
    ``stopped`` (``early-stop``, ``max-epochs``, ``never-ran``, or None).

    ``extra`` holds the workload's own JSON-able details for the try's record
    (``TryRecord.extra``); no other part reads them. ``ranks`` is None, or the
    :class:`RankCombiner` a data-parallel workload installs.

    Example::

        # a workload's run(): train until the session ends the epochs
        def run(self, session: Session) -> None:
            for epoch in session.epochs():
                for i in session.iterations(len(self.loader)):
                    self.step(session.batch_size)
                if session.report_metric(self.evaluate()):
                    break
    """

    job: JobOptions
    batch_size: int
    recurrence: int
    try_index: int
    cost_bound: float
    devices: DeviceGroup
    monitor: Monitor
    power_policy: PowerPolicy | None
    rank: int
    world_size: int
    max_epochs: int
    epochs_done: int
    epoch_measurements: list[Measurement]
    epoch_costs: list[float]
    epoch_profiled: list[bool]
    epoch_iterations: int | None
    metric: float | None
    reached: bool
    stopped: str | None
    extra: dict[str, Any]
    ranks: RankCombiner | None

    @property
    def max_power_w(self) -> float: ...

    @property
    def power_limit(self) -> float | None: ...

    @property
    def cost_so_far(self) -> float: ...

    def cost(self, energy_j: float, time_s: float) -> float: ...

    def epochs(self) -> Iterator[int]: ...

    def iterations(self, count: int) -> Iterator[int]: ...

    def chunks(self, count: int) -> Iterator[tuple[int, int]]: ...

    def report_metric(self, value: float) -> bool: ...

    def mark_reached(self) -> None: ...


# =========================================================================== workloads


class Workload(Protocol):
    """What is trained: ``[workload]``. ``run(session)`` trains one try at ``session.batch_size``.

    It drives the session's epochs (and, where a power policy may act between
    iterations, its iterations or chunks) and reports the validation metric with
    ``session.report_metric`` or says ``session.mark_reached()``.

    Example::

        class Loop:
            def __init__(self, options, context):
                self.train = load_callable(options.entry, context.job_dir)

            def run(self, session: Session) -> None:
                for epoch in session.epochs():
                    for i in session.iterations(100):
                        self.train.step(session.batch_size)
                    session.report_metric(self.train.accuracy())
    """

    def run(self, session: Session) -> None: ...


@runtime_checkable
class OffersBatchSizes(Protocol):
    """A workload that lists the batch sizes it can train (``batch_sizes``) and the
    user's own (``default_batch_size``, None when it has none); policies that are
    given no list use these.

    Example::

        batch_sizes = [32, 64, 128, 256]
        default_batch_size = 128
    """

    batch_sizes: list[int]
    default_batch_size: int | None


@runtime_checkable
class EpochCostPredictor(Protocol):
    """A workload that knows what the next epoch of a try will cost at its steady state
    (a replayed trace), so early stopping can act before the first epoch has run.
    None means "measure it".

    Example::

        def predict_epoch_cost(self, session: Session) -> float | None:
            t, e = self.device.epoch_time_energy()
            return session.cost(e, t)
    """

    def predict_epoch_cost(self, session: Session) -> float | None: ...


@runtime_checkable
class RankCombiner(Protocol):
    """What a data-parallel workload installs as ``session.ranks``: combines rank 0's
    measurement of an epoch (or of the whole try) with every other rank's: energy summed,
    time of the slowest rank.

    Example::

        def combine_ranks(self, measurement: Measurement) -> Measurement:
            return combine(self.group.gather(measurement))
    """

    def combine_ranks(self, measurement: Measurement) -> Measurement: ...


# =========================================================================== policies


class BatchSizePolicy(Protocol):
    """Chooses the batch size of each try and learns from its result: ``[batch_size]``.

    The runner loads the policy's state (``set_state``) from the store before it
    chooses and before it observes, and saves it (``get_state``, JSON-able or
    None) in the same transaction, so concurrent runners of one job each add
    their observation to the latest state.

    Example::

        class Smallest:
            def __init__(self, options, context):
                self.tried = []

            def choose(self, ctx: PolicyContext) -> int:
                return min(ctx.batch_sizes)

            def observe(self, ctx: PolicyContext, record: TryRecord) -> None:
                self.tried.append(record.batch_size)

            def get_state(self):
                return {"tried": self.tried}

            def set_state(self, state) -> None:
                self.tried = list(state["tried"])
    """

    def choose(self, ctx: PolicyContext) -> int: ...

    def observe(self, ctx: PolicyContext, record: TryRecord) -> None: ...

    def get_state(self) -> Any: ...

    def set_state(self, state: Any) -> None: ...


@runtime_checkable
class TryCostBound(Protocol):
    """A batch-size policy that may stop a try sooner than ``beta_knob x`` the best
    recurrence (an exploratory try that can no longer beat the best size): the runner
    stops the try at the smaller of the two. None keeps the runner's bound.

    Example::

        def try_cost_bound(self, ctx: PolicyContext, batch_size: int) -> float | None:
            if batch_size in self.known_good:
                return None
            return 1.2 * self.best_cost
    """

    def try_cost_bound(self, ctx: PolicyContext, batch_size: int) -> float | None: ...


class PowerPolicy(Protocol):
    """Chooses the power limit while a try trains: ``[power]``.

    ``begin_run`` is called before the first epoch, ``on_epoch_end`` after each
    epoch with its measurement, and ``end_run`` after the last. State is kept
    like a batch-size policy's. A policy that must act between iterations also
    has :class:`IterationControl`; one that steers the device declares what it
    needs with :class:`NeedsDevice`.

    Example::

        class Hold200:
            needs_device = (PowerLimitControl,)

            def __init__(self, options, context):
                pass

            def begin_run(self, session: Session) -> None:
                session.devices.set_power_limit(200.0)

            def on_epoch_end(self, session, epoch, measurement) -> None:
                pass

            def end_run(self, session) -> None:
                pass

            def get_state(self):
                return None

            def set_state(self, state) -> None:
                pass
    """

    def begin_run(self, session: Session) -> None: ...

    def on_epoch_end(self, session: Session, epoch: int, measurement: Measurement) -> None: ...

    def end_run(self, session: Session) -> None: ...

    def get_state(self) -> Any: ...

    def set_state(self, state: Any) -> None: ...


@runtime_checkable
class IterationControl(Protocol):
    """A power policy that acts between iterations (a just-in-time profiler).

    ``wants_iterations(session)`` is asked at each epoch start; when True the
    session calls ``on_iteration(session, i)`` before every iteration of that
    epoch, and the epoch counts as a profiling epoch (``session.epoch_profiled``).

    Example::

        def wants_iterations(self, session: Session) -> bool:
            return session.batch_size not in self.chosen

        def on_iteration(self, session: Session, iteration: int) -> None:
            if iteration % 10 == 0:
                session.devices.set_power_limit(self.next_limit())
    """

    def wants_iterations(self, session: Session) -> bool: ...

    def on_iteration(self, session: Session, iteration: int) -> None: ...


@runtime_checkable
class TimedControl(Protocol):
    """A power policy that acts at moments of time rather than at chosen iterations (a carbon-aware
    policy changes the limit when the grid's period changes).

    ``next_action(session)`` is the device-clock time (``session.devices.clock()``) at which
    it next wants ``on_time(session)``, or None for none; it is asked at every epoch's start
    and after every action. The session calls ``on_time`` between iterations once that time
    has come (at most one iteration late; a simulated workload's chunks are cut there), and
    charges the energy before and after each action to its own time on the grid. Unlike
    :class:`IterationControl`, acting on time does not make an epoch a profiling epoch.

    Example::

        def next_action(self, session: Session) -> float | None:
            return self.period_end  # device clock

        def on_time(self, session: Session) -> None:
            session.devices.set_power_limit(self.limit_for_now())
            self.period_end += 1800.0
    """

    def next_action(self, session: Session) -> float | None: ...

    def on_time(self, session: Session) -> None: ...


@runtime_checkable
class SteadyEpochCost(Protocol):
    """A power policy that knows what one epoch costs at the limit it settled on, once it
    has: early stopping then judges a profiling try by that, and the try's record gets
    its :attr:`~zeus_core.results.TryRecord.steady_cost`. None: not known yet.

    Example::

        def steady_epoch_cost(self, session: Session) -> float | None:
            choice = self.chosen.get(session.batch_size)
            return None if choice is None else choice.cost_per_iteration * session.epoch_iterations
    """

    def steady_epoch_cost(self, session: Session) -> float | None: ...


@runtime_checkable
class NeedsDevice(Protocol):
    """A part that only works on a device with certain capabilities: ``needs_device`` lists
    them (capability protocols of this module). The runner refuses the job before it runs
    when the ``[device]`` lacks one, naming both.

    Example::

        needs_device = (PowerLimitControl,)
    """

    needs_device: ClassVar[tuple[type, ...]]


@runtime_checkable
class HasIdentity(Protocol):
    """Any part: facts it learns when built that change what the job optimises (the GPU
    model behind ``gpus = [0]``), added to the job's identity (:mod:`zeus_core.identity`)
    next to its options. The store refuses a run whose identity differs.

    Example::

        def identity(self) -> dict[str, Any]:
            return {"gpu_models": [g.name for g in self.gpus]}
    """

    def identity(self) -> dict[str, Any]: ...


@runtime_checkable
class ChecksFiles(Protocol):
    """An *options class* whose part reads files: ``zeus validate`` (and ``zeus run``, before
    anything runs) calls ``check_files`` to open and check them as the part will, so a
    missing trace folder, NaN in a CSV or a broken profile is reported with every other
    mistake, at the option's path. A file an earlier part of the same job writes is
    deferred (:class:`zeus_core.files.FileChecks`).

    Example::

        def check_files(self, files: FileChecks) -> None:
            path = files.path("profile", self.profile)
            if path is None:
                return  # written by an earlier part of this job
            try:
                read_profile(path)
            except (OSError, ValueError) as e:
                files.problem("profile", str(e))
    """

    def check_files(self, files: FileChecks) -> None: ...


@runtime_checkable
class WritesFiles(Protocol):
    """An *options class* whose part writes files that later parts of the same job may read
    (a profiler's ``save_to``): paths as written in ``job.toml``, relative to its folder.

    Example::

        def files_written(self) -> list[str]:
            return [self.save_to] if self.save_to else []
    """

    def files_written(self) -> list[str]: ...


# =========================================================================== planners


class Planner(Protocol):
    """A part that computes a plan once per ``zeus run``, before any recurrence: profilers
    (``[profiler]``), allocators (``[allocation]``) and frequency-plan policies
    (``[frequency_plan]``). A job may consist of planners only.

    ``plan`` raising ValueError means the input cannot be planned (infeasible,
    bad profile): ``zeus run`` exits 2; any other exception exits 1. What a
    planner reports, writes and adds to ``summary.json`` it declares with
    :class:`Reports`, :class:`WritesOutputs` and :class:`Summarizes`.

    Example::

        class EvenSplit:
            def __init__(self, options, context):
                self.options = options

            def plan(self, ctx: BuildContext) -> None:
                n = self.options.gpus
                self.local = [self.options.global_batch // n] * n
    """

    def plan(self, ctx: BuildContext) -> None: ...


@runtime_checkable
class Summarizes(Protocol):
    """Any part: a JSON-able dict merged into ``summary.json`` under the part's section
    (``"power": {...}``), or None for nothing.

    Example::

        def summary(self, job: JobSummary) -> dict | None:
            return {"power_limit_by_batch_size": self.choices}
    """

    def summary(self, job: JobSummary) -> dict[str, Any] | None: ...


@runtime_checkable
class Reports(Protocol):
    """Any part: prints its own table after the job's (rich console).

    Example::

        def report(self, console: Console, job: JobSummary) -> None:
            console.print(f"chosen plan: {self.chosen}")
    """

    def report(self, console: Console, job: JobSummary) -> None: ...


@runtime_checkable
class Compares(Protocol):
    """Any part that knows what the job's recurrences would have spent under fixed choices (the
    default knobs, the oracle's): the closing verdict of ``zeus run`` and ``zeus report`` states the
    job's energy, time and cost against them. Each is named (``default``, ``oracle``, ``best fixed``)
    and holds ``energy_j``, ``time_s`` and ``cost`` over the same recurrences as the job's totals;
    a choice not known (the default never reached the target) is left out.

    Example::

        def baselines(self, job: JobSummary) -> dict[str, dict[str, float]]:
            n = job.recurrences
            return {"default": {"energy_j": 9e5 * n, "time_s": 3600.0 * n, "cost": 1.2e6 * n}}
    """

    def baselines(self, job: JobSummary) -> dict[str, dict[str, float]]: ...


@runtime_checkable
class Concludes(Protocol):
    """Any part whose result is not the job's tries (a planner that replays a cluster, as the Alibaba
    simulation does): what it ran, by name (``rule paper``), each with ``energy_j``, ``time_s`` and
    ``cost`` (``carbon_g`` too with ``[grid]``). The closing verdict of ``zeus run`` and ``zeus report``
    states each against the part's :class:`Compares` baselines.

    Example::

        def concluded(self, job: JobSummary) -> dict[str, dict[str, float]]:
            return {"replay": {"energy_j": self.energy_j, "time_s": self.time_s, "cost": self.cost}}
    """

    def concluded(self, job: JobSummary) -> dict[str, dict[str, float]]: ...


@runtime_checkable
class WritesOutputs(Protocol):
    """Any part: writes its files under ``--output`` (through
    :func:`~zeus_core.files.write_atomic`) and returns their paths.

    Example::

        def write_outputs(self, out_dir: Path, job: JobSummary) -> list[Path]:
            return [write_atomic(out_dir / "plan.json", json.dumps(self.plan))]
    """

    def write_outputs(self, out_dir: Path, job: JobSummary) -> list[Path]: ...


@runtime_checkable
class Closeable(Protocol):
    """Any part that holds something to give back (a device setting, a process, a file):
    closed in reverse build order when the job ends, however it ends.

    Example::

        def close(self) -> None:
            self.controller.stop()
    """

    def close(self) -> None: ...


@runtime_checkable
class ServesRanks(Protocol):
    """A workload that trains on ranks a launcher started (``torchrun``, ``srun``): every
    rank runs ``zeus run`` (or the script), rank 0 runs the job, and on every other rank
    the runner builds only the ``[device]`` and the workload and calls ``serve_rank()``,
    which trains what rank 0 decides until the job ends. A workload without it is
    refused under a launcher, on every rank, before anything trains.

    Example::

        def serve_rank(self) -> None:
            while (task := self.link.receive()) is not None:
                self.train(task.batch_size)
    """

    def serve_rank(self) -> None: ...


#: Every part capability (device ones: :data:`zeus_core.device.DEVICE_CAPABILITIES`).
PART_CAPABILITIES: tuple[type, ...] = (
    OffersBatchSizes,
    EpochCostPredictor,
    RankCombiner,
    ServesRanks,
    TryCostBound,
    IterationControl,
    TimedControl,
    SteadyEpochCost,
    NeedsDevice,
    HasIdentity,
    ChecksFiles,
    WritesFiles,
    Summarizes,
    Reports,
    Compares,
    Concludes,
    WritesOutputs,
    Closeable,
)

#: Every part protocol, in the order the docs list them.
PART_PROTOCOLS: tuple[type, ...] = (Session, Workload, BatchSizePolicy, PowerPolicy, Planner)

"""Every hook zeus calls: the contract between the core and every plugin. Read this first.

A plugin is a module with functions marked ``@hookimpl`` whose names are hooks
below, reached through one entry point in the ``zeus`` group::

    # pyproject.toml
    [project.entry-points.zeus]
    greedy = "zeus_greedy_policy"

Registration hooks follow ``llm``'s pattern: the core calls each with a
``register`` callback, and the plugin calls it once per part it provides::

    register(name, factory, options=OptionsClass, help="one line", default=False)

``job.toml`` then selects a part by that name (``[batch_size] plugin =
"greedy"``). ``factory(options, context)`` returns the part: ``options`` is an
instance of the attrs class ``OptionsClass``, structured from the part's table
by cattrs (so a misspelt key fails ``zeus validate`` with its path), and
``context`` is a :class:`zeus_core.BuildContext` (the job, its store, the
parts built before). Without ``options`` the factory's ``Options`` attribute
is used, and without that the part takes no keys besides ``plugin``.
``default=True`` makes the part what a job without that section gets where the
core needs one (at most one per kind). What each kind of part must have, and
the capabilities it may declare, are the protocols in :mod:`zeus_core.parts`
and :mod:`zeus_core.device`.

Keep the module the entry point names light: register factories that import
the heavy parts (numpy, torch, scipy) when they are called, so that ``zeus
--help`` does not pay for them. ``options`` may also name the class as
``"package.module:Class"``: it is imported (and checked) when a job or ``zeus
validate`` first uses the part, so that no command loads every plugin's options.

Event hooks (``zeus_on_*``) are for observers (loggers, exporters, plots).
They must not change the run; their return values are ignored.

Every hook is typed here, as pytest types its hooks: the ``register`` callbacks are
the protocols of this module (``RegisterPart`` for the part kinds and privileged
services, ``RegisterRestorer``, ``RegisterStore``, ``RegisterProcessGroup``,
``RegisterGridSignal``), which an implementation may use in its annotations
(``def zeus_register_devices(register: RegisterPart) -> None``).

``docs/hooks.md`` is generated from this module (``python -m zeus_core.docgen``);
a test fails when it is stale or a hook has no example.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:  # annotations only: the face's names (importing zeus_core imports this module first)
    import click

    from zeus_core import BuildContext, JobOptions, JobSummary, Measurement, TryRecord
    from zeus_core.backends import JobStore, ProcessGroup
    from zeus_core.grid import GridSignal, SourceRequest

PROJECT = "zeus"

hookspec = pluggy.HookspecMarker(PROJECT)
#: The decorator that marks a plugin's functions as implementations of zeus's hooks (``@hookimpl``).
hookimpl = pluggy.HookimplMarker(PROJECT)

#: Every kind of part: its name, the hook that registers parts of that kind, and the
#: ``job.toml`` section that selects one by name.
PART_KINDS: tuple[tuple[str, str, str], ...] = (
    ("device", "zeus_register_devices", "device"),
    ("workload", "zeus_register_workloads", "workload"),
    ("profiler", "zeus_register_profilers", "profiler"),
    ("batch_size_policy", "zeus_register_batch_size_policies", "batch_size"),
    ("power_policy", "zeus_register_power_policies", "power"),
    ("allocator", "zeus_register_allocators", "allocation"),
    ("frequency_plan_policy", "zeus_register_frequency_plan_policies", "frequency_plan"),
)


# --- what the registration hooks are called with ---------------------------------
# The ``register`` callbacks, as a plugin's hook implementation may annotate them
# (``def zeus_register_devices(register: RegisterPart) -> None``).


class RegisterPart(Protocol):
    """``register`` of the hooks that register parts, and of ``zeus_register_privileged_operations``."""

    def __call__(
        self,
        name: str,
        factory: Callable[..., Any],
        options: type | str | None = None,
        help: str = "",
        default: bool = False,
        measures: dict[str, str | None] | None = None,
    ) -> None: ...


class RegisterRestorer(Protocol):
    """``register`` of ``zeus_register_restorers``: ``restore(key, original)`` puts a journaled setting back."""

    def __call__(self, owner: str, restore: Callable[[str, Any], object]) -> None: ...


class RegisterStore(Protocol):
    """``register`` of ``zeus_register_stores``: ``opener(location, timeout_s, job=name)`` opens a store."""

    def __call__(self, scheme: str, opener: Callable[..., JobStore], help: str = "") -> None: ...


class RegisterProcessGroup(Protocol):
    """``register`` of ``zeus_register_process_groups``: ``join()`` returns a
    :class:`zeus_core.backends.ProcessGroup` or None."""

    def __call__(self, name: str, join: Callable[[], ProcessGroup | None], help: str = "") -> None: ...


class RegisterGridSignal(Protocol):
    """``register`` of ``zeus_register_grid_signals``: ``opener(spec, request)`` opens a signal."""

    def __call__(
        self, scheme: str, opener: Callable[[str, SourceRequest], GridSignal], help: str = "", suffixes: Iterable[str] = ()
    ) -> None: ...


# --- registration hooks -------------------------------------------------------


@hookspec
def zeus_register_devices(register: RegisterPart) -> None:
    """Register measurement and control backends (``nvml``, ``rapl``, ``cpu-estimate``, ``trace``).

    A device part is a :class:`zeus_core.DeviceGroup`: it reads cumulative energy
    and a clock, and declares what else it can do with the capabilities of
    :mod:`zeus_core.device` (``PowerLimitControl``, ``ClockControl``, ...).

    ``measures`` (devices only) says what hardware the plugin measures, and which of
    its options selects devices by index: ``{"gpu": "gpus"}`` (CUDA-visible GPU
    indices), ``{"cpu": "packages"}`` (CPU packages), ``None`` as the option for a
    plugin that measures all of them. :class:`zeus_core.ZeusMonitor` finds "the
    plugin that measures GPUs" (``gpu_indices``) and "the one that measures CPUs"
    (``cpu_indices``) by it, without naming a plugin; a device without ``measures``
    is opened only by name (``ZeusMonitor(device="my-gpu")``, ``[device]`` tables).

    Example::

        @hookimpl
        def zeus_register_devices(register):
            register("my-gpu", MyGpus, options=MyGpuOptions, measures={"gpu": "gpus"},
                     help="GPUs through my vendor's library.")
    """


@hookspec
def zeus_register_workloads(register: RegisterPart) -> None:
    """Register what is trained (``torch``, ``trace``).

    A workload part is a :class:`zeus_core.Workload`: its ``run(session)`` trains
    one try at ``session.batch_size`` through the session's epochs and reports
    the validation metric.

    Example::

        @hookimpl
        def zeus_register_workloads(register):
            register("my-loop", make_my_loop, options=MyLoopOptions, help="My training loop.")
    """


@hookspec
def zeus_register_profilers(register: RegisterPart) -> None:
    """Register sweeps that produce time/energy tables (``power-sweep``, ``perseus-stage``).

    A profiler part is a :class:`zeus_core.Planner`: it runs once before the
    recurrences and may write its table under ``--output``.

    Example::

        @hookimpl
        def zeus_register_profilers(register):
            register("clock-sweep", ClockSweep, options=ClockSweepOptions, help="Time and energy per SM clock.")
    """


@hookspec
def zeus_register_batch_size_policies(register: RegisterPart) -> None:
    """Register policies that choose the batch size of each try (``fixed``, ``mab``).

    A batch-size policy is a :class:`zeus_core.BatchSizePolicy`; it may stop its
    own tries sooner with :class:`zeus_core.TryCostBound`.

    Example::

        @hookimpl
        def zeus_register_batch_size_policies(register):
            register("greedy", GreedyPolicy, options=GreedyOptions, help="Tries each size once, then keeps the cheapest.")
    """


@hookspec
def zeus_register_power_policies(register: RegisterPart) -> None:
    """Register policies that choose the power limit devices run at (``max``, ``fixed``, ``jit``).

    A power policy is a :class:`zeus_core.PowerPolicy`; it declares the device
    capabilities it needs with :class:`zeus_core.NeedsDevice` and acts between
    iterations with :class:`zeus_core.IterationControl`.

    Example::

        @hookimpl
        def zeus_register_power_policies(register):
            register("hold-min", HoldMinimum, help="Hold the lowest limit the device allows.")
    """


@hookspec
def zeus_register_allocators(register: RegisterPart) -> None:
    """Register allocators of per-device local batch and power limit over mixed GPUs (``even``, ``hetero``).

    An allocator is a :class:`zeus_core.Planner`; a data-parallel workload trains
    by the ``allocation.json`` it writes (:func:`zeus_core.read_allocation`).

    Example::

        @hookimpl
        def zeus_register_allocators(register):
            register("proportional", ProportionalSplit, options=SplitOptions, help="Local batch proportional to speed.")
    """


@hookspec
def zeus_register_frequency_plan_policies(register: RegisterPart) -> None:
    """Register policies that give each pipeline instruction an SM clock (``max``, ``perseus``).

    A frequency-plan policy is a :class:`zeus_core.Planner` that may lock clocks
    on a :class:`zeus_core.ClockControl` device.

    Example::

        @hookimpl
        def zeus_register_frequency_plan_policies(register):
            register("all-min", AllMinimum, help="Every instruction at the lowest clock.")
    """


@hookspec
def zeus_register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``zeus`` command line; ``cli`` is the root ``click.Group``.

    Import what the command needs inside it, not at module level, so that other
    commands start fast.

    Example::

        @hookimpl
        def zeus_register_commands(cli):
            @cli.command("hello")
            def hello():
                \"\"\"Say hello.\"\"\"
                click.echo("hello")
    """


@hookspec
def zeus_register_restorers(register: RegisterRestorer) -> None:
    """Register functions that undo a device setting recorded in the journal.

    ``register(owner, restore)`` where ``restore(key, original)`` puts device
    setting ``key`` (a string chosen by the plugin, e.g. ``"gpu:UUID:power_limit"``)
    back to ``original`` (the JSON value journaled before the change). The core
    calls these at every ``zeus`` start for entries a killed process left behind;
    the plugin's :class:`zeus_core.SettingsGuard` uses the same function.

    Example::

        @hookimpl
        def zeus_register_restorers(register):
            register("my-gpu", restore_setting)   # restore_setting(key, original)
    """


@hookspec
def zeus_register_stores(register: RegisterStore) -> None:
    """Register backends of the job store, by URL scheme: ``job.store = "postgresql://..."``.

    ``register(scheme, opener, help="...")`` where ``opener(location, timeout_s, job=name)``
    returns a :class:`zeus_core.backends.JobStore` for ``location`` (the whole URL) holding the
    job named ``job``: a server that many jobs share keeps each job's state apart by
    that name (a backend with one job per location, such as a SQLite file, may
    ignore it). Opening must not write: it reads what the store is (schema version,
    the identity of the job it learned, how many results) and raises
    :class:`zeus_core.backends.StoreError`, naming the store (credentials masked with
    :func:`zeus_core.engine.stores.locations.mask`) and the fix, for one it cannot use, or
    :class:`zeus_core.backends.StoreUnavailable` for a server it cannot reach now. A store
    that runs the try bookkeeping itself (a service) also implements
    :class:`zeus_core.engine.remote.ServesHistory`. A ``job.store`` without a scheme is a SQLite
    file (the core's own ``sqlite`` backend, registered through this hook like any
    other).

    Example::

        @hookimpl
        def zeus_register_stores(register):
            def open_redis(location, timeout_s, job=None):
                return RedisStore(location, job=job, timeout_s=timeout_s)

            register("redis", open_redis, help="Job state in a Redis server.")
    """


@hookspec
def zeus_register_process_groups(register: RegisterProcessGroup) -> None:
    """Register how the ranks of one job reach each other when a launcher started them
    (``torchrun``, SLURM's ``srun``, ``torch.multiprocessing``).

    ``register(name, join, help="...")`` where ``join()`` returns a
    :class:`zeus_core.backends.ProcessGroup` when this process is one rank of several in that
    framework (joining or creating its process group), and None otherwise. It is
    called once per process, before zeus decides anything: keep it cheap when there
    is nothing to join (read the environment, look in ``sys.modules``; import the
    framework only when it is there). :func:`zeus_core.engine.ranks.process_group` asks every
    registered ``join`` in name order and uses the first group; with none, the
    process is a job of its own.

    Example::

        @hookimpl
        def zeus_register_process_groups(register):
            register("mpi", join_mpi, help="Ranks started by mpirun (MPI_COMM_WORLD).")
    """


@hookspec
def zeus_register_grid_signals(register: RegisterGridSignal) -> None:
    """Register sources of grid signals (carbon intensity, electricity price), by scheme:
    ``[grid] carbon_intensity = "electricitymaps:DE"``.

    ``register(scheme, opener, help="...", suffixes=(".csv",))`` where ``opener(spec,
    request)`` returns a :class:`zeus_core.grid.GridSignal` for ``spec`` (the value after
    ``scheme:``, or a path, or a number as text) and a :class:`zeus_core.grid.SourceRequest`
    (the quantity, the job's folder, time zone, currency, limits). A ``[grid]`` number is
    the ``constant`` scheme's; a path is read by the source that registered its suffix.
    The opener raises ValueError for a spec it cannot use, naming the row or field and
    the fix (``zeus validate`` reports it at its ``[grid]`` key); it must not need the
    network (a live source asks its service when the job first reads it, and from then on
    never raises: it holds its last value and warns).

    Example::

        @hookimpl
        def zeus_register_grid_signals(register):
            def open_watttime(spec, request):
                return WattTimeSignal(region=spec, timeout_s=request.timeout_s)

            register("watttime", open_watttime, help="Live marginal intensity from WattTime.")
    """


@hookspec
def zeus_register_privileged_operations(register: RegisterPart) -> None:
    """Register services whose operations ``zeus daemon`` performs for unprivileged clients.

    ``register(name, service_class, options=OptionsClass)``. The daemon builds
    ``service_class(options, ctx)`` once at start when its configuration has a
    ``[serve.<name>]`` table (structured into ``OptionsClass``), and clients may
    then call every method marked with :func:`zeus_core.daemon.operation` as
    ``<name>.<method>``, with arguments checked against the operation's attrs
    class. A method changes a device setting only through
    ``client.change(owner, key, original, apply)``, so the daemon journals the
    original under the restorer ``owner`` (``zeus_register_restorers``) and puts
    it back when the client disconnects or dies, at daemon exit, and at its next
    start after a SIGKILL. See :mod:`zeus_core.privileged`. This hook is
    called when the services are first needed (``zeus daemon``, ``zeus plugins``),
    not at every start: import the service's module inside it.

    Example::

        @hookimpl
        def zeus_register_privileged_operations(register):
            from my_plugin.service import NvmlServeOptions, NvmlService

            register("nvml", NvmlService, options=NvmlServeOptions)  # [serve.nvml] in the daemon's TOML
    """


# --- event hooks ----------------------------------------------------------------


@hookspec
def zeus_on_job_start(job: JobOptions, context: BuildContext) -> None:
    """Called once after the parts are built and before the first recurrence, with the
    ``[job]`` options (:class:`zeus_core.JobOptions`) and the :class:`zeus_core.BuildContext`.

    Example::

        @hookimpl
        def zeus_on_job_start(job, context):
            print(f"job {job.name} with {sorted(context.parts)}")
    """


@hookspec
def zeus_on_measurement(name: str, measurement: Measurement) -> None:
    """Called when a measurement window named ``name`` ends, with its :class:`zeus_core.Measurement`.

    Example::

        @hookimpl
        def zeus_on_measurement(name, measurement):
            if name.startswith("epoch-"):
                print(name, measurement.time, measurement.total_system_energy)
    """


@hookspec
def zeus_on_try_end(record: TryRecord) -> None:
    """Called after each try (one training run) with its :class:`zeus_core.TryRecord`.

    Example::

        @hookimpl
        def zeus_on_try_end(record):
            print(record.batch_size, record.cost, "reached" if record.reached else record.stopped)
    """


@hookspec
def zeus_on_recurrence_end(recurrence: int, records: list[TryRecord]) -> None:
    """Called when recurrence number ``recurrence`` ends, with the list of its :class:`zeus_core.TryRecord` s.

    Example::

        @hookimpl
        def zeus_on_recurrence_end(recurrence, records):
            print(recurrence, sum(r.energy_j for r in records))
    """


@hookspec
def zeus_on_job_end(summary: JobSummary) -> None:
    """Called once when the job ends, with the :class:`zeus_core.JobSummary`.

    Example::

        @hookimpl
        def zeus_on_job_end(summary):
            print(f"{summary.recurrences} recurrences, {summary.energy_j:.0f} J")
    """


__all__ = [
    "PROJECT",
    "hookspec",
    "hookimpl",
    "PART_KINDS",
    "RegisterPart",
    "RegisterRestorer",
    "RegisterStore",
    "RegisterProcessGroup",
    "RegisterGridSignal",
]

"""The contract between the core and every plugin. Read this module first.

Registration hooks follow the ``llm`` pattern: the core calls each hook with a
``register`` callback, and the plugin calls ``register(name, factory)`` once per
part it provides. ``job.toml`` then selects a part by that name
(``[device] plugin = "nvml"``).

``factory`` is called as ``factory(options, context)`` and returns the part.
``options`` is an instance of the factory's attrs options class, structured from
the part's table in ``job.toml``: pass it as ``register(name, factory,
options=MyOptions)``, or give the factory an ``Options`` attribute. A factory
without an options class accepts no keys besides ``plugin``. ``context`` is a
:class:`zeus_core.runner.BuildContext` (the job, the store, the parts built so
far). The protocols each kind of part satisfies live in
:mod:`zeus_core.parts`.

Event hooks (``zeus_on_*``) are for observers: loggers, exporters, plots. They
must not change the run; their return values are ignored.
"""

from __future__ import annotations

import pluggy

PROJECT = "zeus"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# --- registration hooks -------------------------------------------------------


@hookspec
def zeus_register_devices(register):
    """Register measurement and control backends (``nvml``, ``rapl``, ``cpu-estimate``, ``trace``).

    A device part satisfies :class:`zeus_core.parts.DeviceGroup`: it reads energy
    counters and a clock, and may expose power-limit and clock control.
    """


@hookspec
def zeus_register_workloads(register):
    """Register what is trained (``torch``, ``trace``).

    A workload part satisfies :class:`zeus_core.parts.Workload`: given a
    :class:`zeus_core.runner.RunSession` it trains one run at the session's batch
    size, epoch by epoch, and reports the validation metric.
    """


@hookspec
def zeus_register_profilers(register):
    """Register sweeps that produce time/energy tables (``power-sweep``, ``perseus-stage``).

    A profiler part satisfies :class:`zeus_core.parts.Planner` (it runs once before
    the recurrences and may write output files).
    """


@hookspec
def zeus_register_batch_size_policies(register):
    """Register policies that choose the batch size of each try (``fixed``, ``mab``).

    A batch-size policy satisfies :class:`zeus_core.parts.BatchSizePolicy`.
    """


@hookspec
def zeus_register_power_policies(register):
    """Register policies that choose the power limit devices run at (``max``, ``fixed``, ``jit``).

    A power policy satisfies :class:`zeus_core.parts.PowerPolicy`.
    """


@hookspec
def zeus_register_allocators(register):
    """Register allocators of per-device local batch and power limit over mixed GPUs (``even``, ``hetero``).

    An allocator satisfies :class:`zeus_core.parts.Planner`.
    """


@hookspec
def zeus_register_frequency_plan_policies(register):
    """Register policies that give each pipeline instruction an SM clock (``max``, ``perseus``).

    A frequency-plan policy satisfies :class:`zeus_core.parts.Planner`.
    """


@hookspec
def zeus_register_commands(cli):
    """Add subcommands to the ``zeus`` command line; ``cli`` is the root ``click.Group``."""


@hookspec
def zeus_register_restorers(register):
    """Register functions that undo a device setting recorded in the journal.

    ``register(owner, restore)`` where ``restore(key, original)`` puts device
    setting ``key`` (a string chosen by the plugin, e.g. ``"gpu:UUID:power_limit"``)
    back to ``original`` (the JSON value journaled before the change). The core
    calls these at every ``zeus`` start for entries a killed process left behind.
    """


@hookspec
def zeus_register_privileged_operations(register):
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
    start after a SIGKILL. See :mod:`zeus_core.daemon.service`.

    Example::

        @hookimpl
        def zeus_register_privileged_operations(register):
            register("nvml", NvmlService, options=NvmlServeOptions)  # [serve.nvml] in the daemon's TOML
    """


# --- event hooks ----------------------------------------------------------------


@hookspec
def zeus_on_job_start(job, context):
    """Called once after the parts are built and before the first recurrence."""


@hookspec
def zeus_on_measurement(name, measurement):
    """Called when a measurement window named ``name`` ends with a :class:`zeus_core.measurement.Measurement`."""


@hookspec
def zeus_on_try_end(record):
    """Called after each try (one training run) with its :class:`zeus_core.results.TryRecord`."""


@hookspec
def zeus_on_recurrence_end(recurrence, records):
    """Called when recurrence number ``recurrence`` ends, with the list of its :class:`TryRecord` s."""


@hookspec
def zeus_on_job_end(summary):
    """Called once when the job ends, with the :class:`zeus_core.results.JobSummary`."""

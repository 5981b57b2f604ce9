"""Registers the ``trace`` device and workload, the ``alibaba`` group replay, and the
``zeus traces`` and ``zeus sweep`` commands.

Nothing else is imported here: the options classes load when a job (or ``zeus
validate``) first uses a part, the parts (and numpy) when a job builds them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core import hookimpl
from zeus_core.hookspecs import RegisterPart

if TYPE_CHECKING:  # annotations: the options classes load with the job that uses them
    import click

    from zeus_plugins_trace.options import AlibabaReplayOptions, TraceDeviceOptions, TraceWorkloadOptions


def make_device(options: TraceDeviceOptions, context):
    """A simulated GPU replaying a Zeus NSDI'23 power trace."""
    from zeus_plugins_trace.device import TraceDevice

    return TraceDevice(options, context)


def make_workload(options: TraceWorkloadOptions, context):
    """Replays seeded runs of a Zeus NSDI'23 train trace."""
    from zeus_plugins_trace.workload import TraceWorkload

    return TraceWorkload(options, context)


def make_alibaba(options: AlibabaReplayOptions, context):
    """Replays recurring groups whose jobs overlap in time (the NSDI'23 Alibaba simulation)."""
    from zeus_plugins_trace.alibaba import AlibabaReplay

    return AlibabaReplay(options, context)


@hookimpl
def zeus_register_devices(register: RegisterPart) -> None:
    register(
        "trace",
        make_device,
        options="zeus_plugins_trace.options:TraceDeviceOptions",
        help="A simulated GPU replaying a Zeus NSDI'23 power trace.",
    )


@hookimpl
def zeus_register_workloads(register: RegisterPart) -> None:
    register(
        "trace",
        make_workload,
        options="zeus_plugins_trace.options:TraceWorkloadOptions",
        help="Replays seeded runs of a Zeus NSDI'23 train trace.",
    )


@hookimpl
def zeus_register_profilers(register: RegisterPart) -> None:
    register(
        "alibaba",
        make_alibaba,
        options="zeus_plugins_trace.options:AlibabaReplayOptions",
        help="Replays recurring groups of a cluster (Alibaba format) whose jobs overlap, per in-flight rule, on the trace device.",
    )


@hookimpl
def zeus_register_commands(cli: click.Group) -> None:
    from zeus_plugins_trace.commands import traces_group
    from zeus_plugins_trace.sweep import sweep_cmd

    cli.add_command(traces_group)
    cli.add_command(sweep_cmd)

"""Registers the ``trace`` device and workload and the ``zeus traces`` commands."""

from __future__ import annotations

from zeus_core import hookimpl

from zeus_plugins_trace.device import TraceDevice, TraceDeviceOptions
from zeus_plugins_trace.workload import TraceWorkload, TraceWorkloadOptions


@hookimpl
def zeus_register_devices(register):
    register("trace", TraceDevice, options=TraceDeviceOptions, help="A simulated GPU replaying a Zeus NSDI'23 power trace.")


@hookimpl
def zeus_register_workloads(register):
    register("trace", TraceWorkload, options=TraceWorkloadOptions, help="Replays seeded runs of a Zeus NSDI'23 train trace.")


@hookimpl
def zeus_register_commands(cli):
    from zeus_plugins_trace.commands import traces_group

    cli.add_command(traces_group)

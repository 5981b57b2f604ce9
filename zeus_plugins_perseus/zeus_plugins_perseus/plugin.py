"""Entry point of zeus-plugins-perseus: the ``perseus`` frequency-plan policy, the ``perseus-stage``
profiler and the ``zeus perseus`` commands.

Every ``zeus`` command imports this module, so it imports nothing of the plugin: the
options classes load with the job that uses them (registered by name), and scipy,
matplotlib, torch, FastAPI and httpx when a part is built or a ``zeus perseus``
command runs.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from zeus_core import hookimpl
from zeus_core.hookspecs import RegisterPart

if TYPE_CHECKING:  # annotations: the options classes load with the job that uses them
    import click

    from zeus_plugins_perseus.options import PerseusOptions, StageProfilerOptions


def perseus_policy(options: PerseusOptions, context: Any):
    """Factory of the ``perseus`` part (imports the planner only when a job uses it).

    The policy's worker process starts first, so that its own start-up (an interpreter, numpy, scipy, the
    planner) overlaps this process importing the planner.
    """
    from zeus_plugins_perseus.background import planner_worker

    worker = planner_worker()
    worker.start()
    try:
        from zeus_plugins_perseus.policy import PerseusPolicy

        return PerseusPolicy(options, context, background=worker)
    except BaseException:
        worker.__exit__(*sys.exc_info())
        raise


def stage_profiler(options: StageProfilerOptions, context: Any):
    """Factory of the ``perseus-stage`` part."""
    from zeus_plugins_perseus.stage_profiler import StageProfiler

    return StageProfiler(options, context)


@hookimpl
def zeus_register_frequency_plan_policies(register: RegisterPart) -> None:
    register(
        "perseus",
        perseus_policy,
        options="zeus_plugins_perseus.options:PerseusOptions",
        help="Every Pareto-optimal per-instruction SM-clock plan of a pipeline (Perseus); picks one by deadline.",
    )


@hookimpl
def zeus_register_commands(cli: click.Group) -> None:
    from zeus_plugins_perseus.cli import perseus_group

    cli.add_command(perseus_group)


@hookimpl
def zeus_register_profilers(register: RegisterPart) -> None:
    register(
        "perseus-stage",
        stage_profiler,
        options="zeus_plugins_perseus.options:StageProfilerOptions",
        help="Per-instruction time and energy of a pipeline stage at every SM clock, measured during training.",
    )

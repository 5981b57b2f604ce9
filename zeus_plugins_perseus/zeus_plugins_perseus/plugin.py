"""Entry point of zeus-plugins-perseus: the ``perseus`` frequency-plan policy, the ``perseus-stage`` profiler and the ``zeus perseus`` commands."""

from __future__ import annotations

from zeus_core import hookimpl

from zeus_plugins_perseus.options import PerseusOptions
from zeus_plugins_perseus.policy import PerseusPolicy


@hookimpl
def zeus_register_frequency_plan_policies(register):
    register(
        "perseus",
        PerseusPolicy,
        options=PerseusOptions,
        help="Every Pareto-optimal per-instruction SM-clock plan of a pipeline (Perseus); picks one by deadline.",
    )


@hookimpl
def zeus_register_commands(cli):
    from zeus_plugins_perseus.cli import perseus_group

    cli.add_command(perseus_group)


@hookimpl
def zeus_register_profilers(register):
    from zeus_plugins_perseus.stage_profiler import StageProfiler, StageProfilerOptions

    register(
        "perseus-stage",
        StageProfiler,
        options=StageProfilerOptions,
        help="Per-instruction time and energy of a pipeline stage at every SM clock, measured during training.",
    )

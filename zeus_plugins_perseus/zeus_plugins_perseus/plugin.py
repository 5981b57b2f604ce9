"""Entry point of zeus-plugins-perseus: the ``perseus`` frequency-plan policy and the ``perseus`` CLI group."""

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

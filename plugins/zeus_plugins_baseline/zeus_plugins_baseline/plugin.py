"""Registers the baseline parts through the same entry-point path as any third party."""

from __future__ import annotations

from zeus_core import hookimpl
from zeus_core.hookspecs import RegisterPart
from zeus_plugins_baseline.policies import (
    FixedBatchSize,
    FixedPower,
    FixedPowerOptions,
    MaxFrequencyPlan,
    MaxPower,
)


@hookimpl
def zeus_register_batch_size_policies(register: RegisterPart) -> None:
    register("fixed", FixedBatchSize, help="Always the same batch size (the workload's default unless set).")


@hookimpl
def zeus_register_power_policies(register: RegisterPart) -> None:
    register(
        "max", MaxPower, default=True, help="Hold every device at its maximum power limit (no-op where limits can't be set). The default."
    )
    register("fixed", FixedPower, options=FixedPowerOptions, help="Hold one power limit, in watts.")


@hookimpl
def zeus_register_frequency_plan_policies(register: RegisterPart) -> None:
    register("max", MaxFrequencyPlan, help="Every instruction at the default (maximum) SM clock.")

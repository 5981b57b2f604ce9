"""The ``[allocation]`` table of a job (plugin ``hetero`` or ``even``), as attrs classes.

The keys are the published contract::

    [allocation]
    plugin = "hetero"
    global_batch_size = 1024
    batch_granularity = 8
    allreduce_time_s = 0.01
    objective = "zeus-cost"        # or "min-energy"
    eta_knob = 0.5                 # default: [job] eta_knob
    max_slowdown = 1.1             # min-energy only

    [[allocation.gpus]]
    name = "A10"
    count = 1
    profile = "profiles/a10.json"  # relative to the job file's folder
    profile_steps = 10
    idle_power_w = 20

Validators see only the value (the core calls them field by field), so each
says the allowed range on its own; a cross-field problem (two types with one
name) is checked on the list.
"""

import math
from typing import Optional

import attrs
from zeus_core.cost import check_eta
from zeus_core.validators import at_least, nonempty, nonnegative

from zeus_plugins_hetero.model import OBJECTIVES


def _slowdown(_inst, attribute, value):
    if not (math.isfinite(value) and value >= 1):
        raise ValueError(f"{attribute.name} must be a finite number >= 1 (1.1 allows 10% slower steps), got {value!r}")


def _objective(_inst, attribute, value):
    if value not in OBJECTIVES:
        raise ValueError(f"{attribute.name} must be one of {', '.join(map(repr, OBJECTIVES))}, got {value!r}")


def _eta_or_none(_inst, _attribute, value):
    if value is not None:
        check_eta(value)


def _gpu_list(_inst, attribute, value):
    if not value:
        raise ValueError("add at least one [[allocation.gpus]] table (name, count, profile, profile_steps, idle_power_w)")
    names = [g.name for g in value]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"GPU type names must be unique; repeated: {', '.join(repeated)}")


@attrs.define
class GpuTypeOptions:
    """One ``[[allocation.gpus]]`` table: ``count`` identical GPUs sharing one profile."""

    name: str = attrs.field(validator=nonempty)
    count: int = attrs.field(validator=at_least(1))
    profile: str = attrs.field(validator=nonempty)
    profile_steps: int = attrs.field(validator=at_least(1))
    idle_power_w: float = attrs.field(validator=nonnegative)


@attrs.define
class HeteroOptions:
    """Options of the ``hetero`` and ``even`` allocators."""

    global_batch_size: int = attrs.field(validator=at_least(1))
    gpus: list[GpuTypeOptions] = attrs.field(validator=_gpu_list)
    batch_granularity: int = attrs.field(default=1, validator=at_least(1))
    allreduce_time_s: float = attrs.field(default=0.0, validator=nonnegative)
    objective: str = attrs.field(default="zeus-cost", validator=_objective)
    eta_knob: Optional[float] = attrs.field(default=None, validator=_eta_or_none)
    max_slowdown: float = attrs.field(default=1.1, validator=_slowdown)

"""The ``[frequency_plan]`` table of a job with ``plugin = "perseus"`` (the published contract)::

    [frequency_plan]
    plugin = "perseus"
    profile = "profiles/gpt3.csv"   # relative to the job file's folder
    stages = 8                      # default: the profile's stage count
    microbatches = 12
    schedule = "1f1b"               # or "gpipe"
    unit_time_s = 0.001
    blocking_power_w = 83.64
    model = "measured"              # or "exponential" (the published fitted model)
    max_slowdown = 1.0              # or deadline = 3.0 (seconds per iteration)

Validators see only their own value (the core calls them field by field), so
each states the allowed range; choosing both ``deadline`` and
``max_slowdown`` is a cross-field error raised when the class is built.
"""

from __future__ import annotations

import math
from typing import Optional

import attrs

from zeus_plugins_perseus.costmodel import MODELS
from zeus_plugins_perseus.schedule import SCHEDULES


def _positive_int(_inst, attribute, value):
    if value is not None and value < 1:
        raise ValueError(f"{attribute.name} must be a whole number >= 1, got {value!r}")


def _positive(_inst, attribute, value):
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ValueError(f"{attribute.name} must be a finite number > 0, got {value!r}")


def _nonnegative(_inst, attribute, value):
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{attribute.name} must be a finite number >= 0 (watts), got {value!r}")


def _one_of(choices):
    def check(_inst, attribute, value):
        if value not in choices:
            raise ValueError(f"{attribute.name} must be one of {', '.join(map(repr, choices))}, got {value!r}")

    return check


def _slowdown(_inst, attribute, value):
    if value is not None and not (math.isfinite(value) and value >= 1):
        raise ValueError(
            f"{attribute.name} must be a finite number >= 1 (1.0: no slower than all-max clocks, 1.05: 5% slower), got {value!r}"
        )


def _path(_inst, attribute, value):
    if not value.strip():
        raise ValueError(f"{attribute.name} must name a profile CSV")


@attrs.define
class PerseusOptions:
    """Options of the ``perseus`` frequency-plan policy."""

    profile: str = attrs.field(validator=_path)
    microbatches: int = attrs.field(validator=_positive_int)
    blocking_power_w: float = attrs.field(validator=_nonnegative)
    stages: Optional[int] = attrs.field(default=None, validator=_positive_int)
    schedule: str = attrs.field(default="1f1b", validator=_one_of(tuple(SCHEDULES)))
    unit_time_s: float = attrs.field(default=0.001, validator=_positive)
    model: str = attrs.field(default="measured", validator=_one_of(MODELS))
    deadline: Optional[float] = attrs.field(default=None, validator=_positive)
    max_slowdown: Optional[float] = attrs.field(default=None, validator=_slowdown)

    def __attrs_post_init__(self):
        if self.deadline is not None and self.max_slowdown is not None:
            raise ValueError("give deadline (seconds per iteration) or max_slowdown (a factor >= 1), not both")

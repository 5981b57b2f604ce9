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
    max_gap_plans = 32              # measured model: real-time plans at the fast end (one LP each)

Validators see only their own value (the core calls them field by field), so
each states the allowed range; choosing both ``deadline`` and
``max_slowdown`` is a cross-field error raised when the class is built.
"""

from __future__ import annotations

from typing import Optional

import attrs
from attrs.validators import optional
from zeus_core import FileChecks
from zeus_core.validators import at_least, finite, nonempty, nonnegative, one_of, positive

from zeus_plugins_perseus.schedule import SCHEDULES

#: energy models of the planner (:mod:`~zeus_plugins_perseus.costmodel`); named here, where
#: nothing heavy is imported, because the plugin's registration reads them
MODELS = ("measured", "exponential")


@attrs.define
class PerseusOptions:
    """Options of the ``perseus`` frequency-plan policy."""

    profile: str = attrs.field(validator=nonempty)
    microbatches: int = attrs.field(validator=at_least(1))
    blocking_power_w: float = attrs.field(validator=nonnegative)
    stages: Optional[int] = attrs.field(default=None, validator=optional(at_least(1)))
    schedule: str = attrs.field(default="1f1b", validator=one_of(*SCHEDULES))
    unit_time_s: float = attrs.field(default=0.001, validator=[positive, finite])
    model: str = attrs.field(default="measured", validator=one_of(*MODELS))
    deadline: Optional[float] = attrs.field(default=None, validator=optional([positive, finite]))
    # 1.0: no slower than all-max clocks; 1.05: up to 5% slower
    max_slowdown: Optional[float] = attrs.field(default=None, validator=optional([at_least(1), finite]))
    # measured model: real-time plans filling the gap rounding leaves at the fast end (one LP each;
    # they dominate the planning time of large pipelines: fewer plans there, much faster)
    max_gap_plans: int = attrs.field(default=32, validator=nonnegative)

    def __attrs_post_init__(self):
        if self.deadline is not None and self.max_slowdown is not None:
            raise ValueError("give deadline (seconds per iteration) or max_slowdown (a factor >= 1), not both")

    def check_files(self, files: FileChecks) -> None:
        """The profile is read as the planner will read it (``zeus validate``), unless an earlier
        part of the job (a ``perseus-stage`` profiler's ``save_to``) writes it."""
        from zeus_plugins_perseus.profile import read_profile

        path = files.path("profile", self.profile)
        if path is None:
            return
        try:
            profile = read_profile(path)
            stages = self.stages if self.stages is not None else len(profile.stages)
            profile.check_stages(stages, ("forward", "backward"))
        except (OSError, ValueError) as e:
            files.problem("profile", str(e))

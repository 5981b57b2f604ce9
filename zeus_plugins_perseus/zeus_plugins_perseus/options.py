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
    max_gap_plans = 32              # measured model: real-time plans at the fast end

Validators see only their own value (the core calls them field by field), so
each states the allowed range; choosing both ``deadline`` and
``max_slowdown`` is a cross-field error raised when the class is built.
"""

from __future__ import annotations

import attrs
from attrs.validators import and_, optional

from zeus_core import FileChecks
from zeus_core.validators import at_least, between, callable_spec, finite, nonempty, nonnegative, one_of, positive

#: energy models of the planner (:mod:`~zeus_plugins_perseus.costmodel`); named here, where
#: nothing heavy is imported, because the plugin's registration reads them
MODELS = ("measured", "exponential")
#: The pipeline schedules the planner builds DAGs for (:data:`zeus_plugins_perseus.schedule.SCHEDULES`);
#: named here so that validating a job needs no numpy.
SCHEDULE_NAMES = ("1f1b", "gpipe", "gpipe-fifo")
#: The plausible largest blocking power of a GPU (W), and the coarsest time quantum (s): past them a
#: value is refused before the planner's arithmetic on it could overflow.
MAX_BLOCKING_POWER_W = 10_000.0
MAX_UNIT_TIME_S = 1.0


@attrs.define
class PerseusOptions:
    """Options of the ``perseus`` frequency-plan policy."""

    profile: str = attrs.field(validator=nonempty)
    microbatches: int = attrs.field(validator=at_least(1))
    blocking_power_w: float = attrs.field(
        validator=between(0.0, MAX_BLOCKING_POWER_W, hint=("watts a GPU draws while blocked on communication"))
    )
    stages: int | None = attrs.field(default=None, validator=optional(at_least(1)))
    schedule: str = attrs.field(default="1f1b", validator=one_of(*SCHEDULE_NAMES))
    unit_time_s: float = attrs.field(
        default=0.001,
        validator=[
            positive,
            between(0.0, MAX_UNIT_TIME_S, hint=("the planner's time quantum; microbatch times are a fraction of a second")),
        ],
    )
    model: str = attrs.field(default="measured", validator=one_of(*MODELS))
    deadline: float | None = attrs.field(default=None, validator=optional(and_(positive, finite)))
    # 1.0: no slower than all-max clocks; 1.05: up to 5% slower
    max_slowdown: float | None = attrs.field(default=None, validator=optional([at_least(1), finite]))
    # measured model: real-time plans filling the gap rounding leaves at the fast end (all from one
    # parametric flow; each costs its reclamation passes)
    max_gap_plans: int = attrs.field(default=32, validator=nonnegative)

    def __attrs_post_init__(self):
        if self.deadline is not None and self.max_slowdown is not None:
            raise ValueError("give deadline (seconds per iteration) or max_slowdown (a factor >= 1), not both")

    def check_files(self, files: FileChecks) -> None:
        """The profile is read as the planner will read it (``zeus validate``), unless an earlier
        part of the job (a ``perseus-stage`` profiler's ``save_to``) writes it."""
        from zeus_plugins_perseus.profile import ProfileError, check_units, read_profile

        path = files.path("profile", self.profile)
        if path is None:
            return
        try:
            profile = read_profile(path)
            stages = self.stages if self.stages is not None else len(profile.stages)
            profile.check_stages(stages, ("forward", "backward"))
        except (OSError, ValueError) as e:
            files.problem("profile", str(e) if isinstance(e, ProfileError) else f"{path}: {e}")
            return
        try:
            check_units(profile, self.unit_time_s)
        except ProfileError as e:
            files.problem("unit_time_s", str(e))


@attrs.define
class StageProfilerOptions:
    """The ``[profiler]`` table of plugin ``perseus-stage``."""

    step: str = attrs.field(validator=callable_spec())
    stage: int = attrs.field(default=0, validator=nonnegative)
    frequencies: list[int] = attrs.field(factory=list)
    min_frequency: int = attrs.field(default=0, validator=nonnegative)
    warmup_steps: int = attrs.field(default=1, validator=nonnegative)
    profile_steps: int = attrs.field(default=3, validator=at_least(1))
    stop_after_rises: int = attrs.field(default=0, validator=nonnegative)
    devices: list[str] = attrs.field(factory=list)
    save_to: str = ""
    max_steps: int | None = attrs.field(default=None, validator=optional(at_least(1)))
    #: warm up each clock until power and temperature settle (zeus_core.profiling), at most max_warmup_steps more;
    #: on by default: where they are constant (the simulated drivers without their temperature quirk) it adds no step
    thermally_stable: bool = True
    max_warmup_steps: int = attrs.field(default=100, validator=nonnegative)

    def check_files(self, files: FileChecks) -> None:
        files.callable_file("step", self.step)

    def files_written(self) -> list[str]:
        return [self.save_to] if self.save_to else []

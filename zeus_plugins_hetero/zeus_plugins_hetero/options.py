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

import attrs

from zeus_core import FileChecks
from zeus_core.validators import at_least, between, callable_spec, distinct_numbers, finite, nonempty, one_of

#: What the allocator minimises: the Zeus cost metric, or energy alone.
OBJECTIVES = ("zeus-cost", "min-energy")
#: The plausible largest idle power of a GPU (W) and all-reduce time of one step (s): past them a
#: value is refused before the allocator's arithmetic on it could overflow.
MAX_IDLE_POWER_W = 10_000.0
MAX_ALLREDUCE_TIME_S = 3600.0


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
    idle_power_w: float = attrs.field(validator=between(0.0, MAX_IDLE_POWER_W, hint="watts a GPU draws while idle"))


@attrs.define
class HeteroOptions:
    """Options of the ``hetero`` and ``even`` allocators."""

    global_batch_size: int = attrs.field(validator=at_least(1))
    gpus: list[GpuTypeOptions] = attrs.field(validator=_gpu_list)
    batch_granularity: int = attrs.field(default=1, validator=at_least(1))
    allreduce_time_s: float = attrs.field(
        default=0.0, validator=between(0.0, MAX_ALLREDUCE_TIME_S, hint=("seconds one step's all-reduce takes"))
    )
    objective: str = attrs.field(default="zeus-cost", validator=one_of(*OBJECTIVES))
    eta_knob: float | None = attrs.field(default=None, validator=attrs.validators.optional(between(0.0, 1.0)))
    max_slowdown: float = attrs.field(default=1.1, validator=[finite, at_least(1, hint="1.1 allows 10% slower steps")])

    def check_files(self, files: FileChecks) -> None:
        """Each GPU type's profile is read as the allocator will read it (``zeus validate``)."""
        from zeus_plugins_hetero.profile import HeteroError, Profile  # numpy: only when a job is checked

        for i, g in enumerate(self.gpus):
            path = files.path(("gpus", i, "profile"), g.profile)
            if path is None:
                continue
            try:
                Profile.load(path, g.profile_steps)
            except HeteroError as e:
                files.problem(("gpus", i, "profile"), str(e))


@attrs.define
class PowerSweepOptions:
    """The ``[profiler]`` table of plugin ``power-sweep``."""

    step: str = attrs.field(validator=callable_spec())
    batch_sizes: list[int] = attrs.field(validator=distinct_numbers(1, what="batch sizes"))
    power_limits: list[float] = attrs.field(factory=list, validator=distinct_numbers(1, what="power limits in watts", allow_empty=True))
    limit_step_w: float = attrs.field(default=25.0, validator=at_least(1))
    warmup_steps: int = attrs.field(default=5, validator=at_least(0))
    profile_steps: int = attrs.field(default=10, validator=at_least(1))
    devices: list[str] = attrs.field(factory=list)
    save_to: str = ""
    #: profile thermally stably (zeus_core.profiling): per batch size, ``trials`` rounds over the limits in a
    #: balanced seeded order, a cooldown to ``cooldown_band_c`` over the first temperature before each, and a
    #: warm-up past ``warmup_steps`` until power and temperature settle; each figure the mean of its trials
    thermally_stable: bool = False
    trials: int = attrs.field(default=3, validator=at_least(1))
    seed: int = 0
    cooldown_band_c: float = attrs.field(default=2.0, validator=at_least(0))
    cooldown_timeout_s: float = attrs.field(default=60.0, validator=at_least(0))

    def check_files(self, files: FileChecks) -> None:
        files.callable_file("step", self.step)

    def files_written(self) -> list[str]:
        return [self.save_to] if self.save_to else []

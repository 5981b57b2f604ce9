"""What a part's factory sees (:class:`BuildContext`) and what a batch-size policy sees
when it chooses and observes (:class:`PolicyContext`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from zeus_core.cost import zeus_cost

if TYPE_CHECKING:  # annotations only
    from rich.console import Console

    from zeus_core.backends import JobStore, ProcessGroup
    from zeus_core.grid import Grid
    from zeus_core.job import JobOptions, JobSpec
    from zeus_core.registrations import PluginRegistry


@attrs.define
class BuildContext:
    """What a factory is called with, next to its options: ``factory(options, context)``.

    ``parts`` holds the parts built before this one, by section, in the order
    device, workload, batch_size, power, frequency_plan, allocation, profiler
    (a workload can look at its device, a policy at its workload). ``store`` is
    the job's store, for parts that keep state of their own beyond the policy
    state the runner saves. Outside a job (:func:`zeus_core.engine.assembly.open_device`)
    ``spec`` and ``store`` are None, ``job`` is None and paths resolve against
    the current folder.
    """

    spec: JobSpec | None
    store: JobStore | None
    console: Console
    registry: PluginRegistry
    parts: dict[str, Any] = attrs.field(factory=dict)
    #: The ranks of the job when a launcher started several (``torchrun``): rank 0 runs the
    #: job, the others serve it (:class:`zeus_core.parts.ServesRanks`); None for one process.
    group: ProcessGroup | None = None
    #: Under a launcher: every rank's ``[device]`` maximum power, by rank (gathered once the
    #: devices are built, before the workload).
    rank_max_power_w: list[float] | None = None
    #: The job's grid signals (``[grid]``), bound to its device's clock once the device is built;
    #: None for a job without ``[grid]``. A carbon-aware power policy acts on it.
    grid: Grid | None = None

    @classmethod
    def outside_job(cls, console: Console, registry: PluginRegistry) -> BuildContext:
        return cls(None, None, console, registry)

    @property
    def job(self) -> JobOptions | None:
        return None if self.spec is None else self.spec.job

    @property
    def job_dir(self) -> Path:
        return Path.cwd() if self.spec is None else self.spec.job_dir

    def resolve_path(self, p: str | Path) -> Path:
        """A path from ``job.toml``, relative to the job file's folder."""
        p = Path(p).expanduser()
        return p if p.is_absolute() else self.job_dir / p


@attrs.define
class PolicyContext:
    """What a batch-size policy sees when it chooses a try's batch size and observes its result.

    ``min_cost`` is the cost of the cheapest finished recurrence so far (inf
    before the first); ``batch_sizes`` and ``default_batch_size`` are the
    workload's (:class:`~zeus_core.parts.OffersBatchSizes`), None when it offers
    none; ``max_power_w`` is the device group's, for :meth:`cost`.
    """

    job: JobOptions
    recurrence: int
    try_index: int
    min_cost: float
    batch_sizes: list[int] | None
    default_batch_size: int | None
    max_power_w: float

    @property
    def cost_bound(self) -> float:
        """``beta_knob x min_cost``: the runner's bound on a try's cost."""
        return self.job.beta_knob * self.min_cost

    def cost(self, energy_j: float, time_s: float) -> float:
        """The job's cost metric (``eta_knob``, ``max_power_w``) of a result."""
        return zeus_cost(energy_j, time_s, self.job.eta_knob, self.max_power_w)

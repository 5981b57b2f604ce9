"""Protocols that each kind of registered part satisfies.

The core only talks to parts through these methods, so a plugin is free in how
it implements them. Optional methods are noted; the core checks for them with
``getattr`` and says plainly when a job needs one that a part lacks (for
example a power policy other than ``max`` on a device that cannot set limits).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from zeus_core.results import TryRecord
    from zeus_core.runner import PolicyContext, RunSession


@runtime_checkable
class DeviceGroup(Protocol):
    """One or more devices measured and steered together.

    ``names`` label the devices (``"gpu0"``, ``"cpu0-package"``); ``read_energy``
    returns one cumulative, never-decreasing energy value in joules per name;
    ``clock`` is the time source of windows on these devices (``time.monotonic``
    for real hardware, a virtual clock for simulated devices). ``energy_sources``
    says per name where energy comes from: ``counter``, ``polling`` or ``estimate``.
    ``max_power_w`` is the sum of the devices' maximum power limits (MAXPOWER of
    the cost metric).

    Names follow ``gpu<i>`` (CUDA-visible index), ``cpu<i>-package`` and
    ``cpu<i>-dram`` so that :class:`~zeus_core.measurement.Measurement` can
    offer ZeusMonitor's ``gpu_energy`` / ``cpu_energy`` / ``dram_energy``.

    Optional control methods: ``power_limit_range() -> (min_w, max_w)``,
    ``power_limit() -> float``, ``set_power_limit(watts)`` (every device),
    ``set_power_limits({name: watts})`` (per device), ``supported_clocks() ->
    list[int]``, ``lock_clocks(mhz)`` (SM clock; a device whose hardware needs
    the memory clock locked too does that itself), ``reset_clocks()``.
    Optional readings: ``read_power() -> {name: watts}`` (for ``zeus monitor``),
    ``sync_indices`` (CUDA indices the window's sync hook waits on),
    ``control_paths -> {name: "local" | "daemon"}`` (whether the device's privileged
    operations run in this process or through ``zeus daemon``; ``zeus monitor``'s ``via``).
    Every setter journals the original value first (:mod:`zeus_core.journal`)
    and raises :class:`~zeus_core.measurement.DeviceError` with the fix when it
    lacks permission. ``close()`` restores whatever the device changed.

    ``lock_clocks`` may also lock other clocks the SM clock depends on: the
    ``nvml`` device holds the memory clock at its highest supported value from
    the first lock on (where the GPU allows it), journaled like the SM clock,
    and ``reset_clocks`` unlocks both. Outside a job (tools, helper processes)
    a device plugin is opened by name with :func:`zeus_core.devices.open_device`.
    """

    names: list[str]
    energy_sources: dict[str, str]
    max_power_w: float

    def clock(self) -> float: ...

    def read_energy(self) -> dict[str, float]: ...

    def close(self) -> None: ...


class Workload(Protocol):
    """What is trained. ``run`` trains one run at ``session.batch_size``.

    It drives the session's epoch and iteration iterators and reports the
    validation metric (``session.report_metric``) or that the target was reached
    (``session.mark_reached``). ``batch_sizes`` (optional attribute) lists the
    batch sizes the workload supports, used by policies that are not given a list.
    ``default_batch_size`` (optional) is the user's batch size.
    """

    def run(self, session: RunSession) -> None: ...


class BatchSizePolicy(Protocol):
    """Chooses the batch size of each try and learns from its result.

    Optional ``try_cost_bound(ctx, batch_size) -> float | None``: a cost after
    which this try is not worth finishing (e.g. an exploratory try that can no
    longer beat the best batch size). The runner stops the try at the smaller
    of this and ``beta_knob x min_cost``.

    State that must survive the process is returned by ``get_state`` (JSON-able)
    and handed back by ``set_state``; the runner commits it together with the
    try's result in one transaction.
    """

    def choose(self, ctx: PolicyContext) -> int: ...

    def observe(self, ctx: PolicyContext, record: TryRecord) -> None: ...

    def get_state(self) -> Any: ...

    def set_state(self, state: Any) -> None: ...


class PowerPolicy(Protocol):
    """Chooses the power limit while a run trains.

    ``begin_run`` is called before the first epoch and ``end_run`` after the last.
    ``wants_iterations(session)`` returning True at an epoch start makes the session
    call ``on_iteration(session, i)`` before every iteration of that epoch (a JIT
    profiler); otherwise the epoch runs without per-iteration calls.
    ``on_epoch_end(session, epoch, measurement)`` sees each epoch's measurement.
    ``steady_epoch_cost(session)`` (optional) predicts the cost of one epoch at
    the limit it holds, for early stopping after a profiling epoch.
    """

    def begin_run(self, session: RunSession) -> None: ...

    def wants_iterations(self, session: RunSession) -> bool: ...

    def on_iteration(self, session: RunSession, iteration: int) -> None: ...

    def on_epoch_end(self, session: RunSession, epoch: int, measurement: Any) -> None: ...

    def end_run(self, session: RunSession) -> None: ...

    def get_state(self) -> Any: ...

    def set_state(self, state: Any) -> None: ...


class Planner(Protocol):
    """A part that computes a plan once per ``zeus run``: profilers, allocators and
    frequency-plan policies.

    ``plan(ctx)`` runs before any recurrence (a job may consist of planners
    only). ``report(console)`` prints a summary; ``write_outputs(out_dir)`` writes
    its files under ``--output`` and returns their paths; ``summary()`` returns a
    JSON-able dict merged into ``summary.json`` under the part's section name.
    All but ``plan`` are optional; each optional method may also take the
    :class:`~zeus_core.results.JobSummary` as its last argument.

    ``plan`` raising ValueError means the input cannot be planned (infeasible,
    bad profile): ``zeus run`` exits 2; any other exception exits 1.

    An allocator may offer ``ranks() -> list[dict]`` with one entry per
    data-parallel rank: ``{"rank", "gpu", "local_batch", "power_limit"}``;
    data-parallel workloads use it to split the global batch unevenly
    (see :mod:`zeus_core.parallel` for the matching gradient weighting).
    """

    def plan(self, ctx: Any) -> None: ...

    def report(self, console: Console) -> None: ...

    def write_outputs(self, out_dir: Path) -> list[Path]: ...

    def summary(self) -> dict: ...

"""Zeus inside the user's own training loop: :class:`PowerLimitOptimizer` (this module) and
:class:`~zeus_core.inloop.batch_size.BatchSizeOptimizer`.

The second way in (docs/architecture.md, "Three ways in"): the same registered
policies, the same protocols and the same store as ``zeus run``, driven by the
events of a loop zeus does not own::

    monitor = ZeusMonitor(gpu_indices=[0])
    plo = PowerLimitOptimizer(monitor, policy="jit", job="resnet-cifar")
    for epoch in range(epochs):
        plo.on_epoch_begin()
        for batch in loader:
            plo.on_step_begin()
            ...
            plo.on_step_end()
        plo.on_epoch_end()

* :class:`PowerLimitOptimizer` drives any registered power policy through a
  :class:`~zeus_core.engine.session.RunSession` (the object the runner hands a policy),
  fed by the loop's events: the policy sees the same calls as under ``zeus
  run`` (``begin_run``, ``wants_iterations``/``on_iteration``, ``on_epoch_end``).
  Its state (the chosen limit per batch size) lives in the job's store, merged
  like the runner's (no lost update), under the job's identity.
* :class:`BatchSizeOptimizer` chooses each try's batch size with a registered
  batch-size policy through :class:`~zeus_core.engine.history.History` (or any
  :class:`~zeus_core.engine.history.JobHistory`, such as a remote optimizer's client):
  recurrences, cost bounds and what the policy learns are the runner's.

**Identity.** A script declares only what it knows about its job
(:mod:`zeus_core.identity`): ``job`` with the knobs it was given (``eta_knob``,
``beta_knob``, ``processes``, and ``target_metric``/``max_epochs`` when given),
``device`` as the monitor's ``[device]`` section (plugin, options, GPU models),
``power`` (the power optimizer's plugin and options), ``batch_size`` (the
batch-size policy's) and, in part, ``workload`` (``batch_sizes`` and
``default_batch_size``, what a ``[workload]`` offers). So the same job run by
``zeus run`` and driven from a script share one history, and anything that
changes the problem (another GPU model, eta, policy options) is refused with
what differs.

**Ranks.** Under a launcher (torchrun, SLURM) or in a ``torch.distributed``
group, every rank creates the same objects and calls the same events; rank 0
decides and writes the store, the others follow (:mod:`zeus_core.engine.ranks`):

* at each decision point (construction, epoch begin and end, each step of an
  epoch the power policy profiles, a try's choice and report) rank 0 acts, and
  every window it opens or closes and every limit it sets is repeated by the
  other ranks on their own devices in the same order; a window's measurement is
  the ranks' combined (energy summed, time of the slowest rank);
* a rank whose calls diverge from rank 0's (another event, or one step more)
  stops at that point with an error naming both;
* in epochs the policy does not profile, steps involve no collective at all.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from zeus_core import catalog
from zeus_core.backends import ProcessGroup
from zeus_core.cost import check_eta, zeus_cost
from zeus_core.device import PowerLimitControl
from zeus_core.engine.assembly import script_job
from zeus_core.engine.history import History
from zeus_core.engine.ranks import Follower, MirroredDevices, MirroredMonitor, agree, all_ok, lead, process_group
from zeus_core.engine.session import RunSession
from zeus_core.errors import DeviceError
from zeus_core.grid import CARBON_COLUMN
from zeus_core.identity import IdentityMismatch
from zeus_core.inloop.monitor import ZeusMonitor
from zeus_core.inloop.script import job_identity, registry_or_default, script_assembly, script_grid
from zeus_core.windows import Monitor

if TYPE_CHECKING:  # annotations only
    from zeus_core.backends import JobStore
    from zeus_core.engine.registry import Registry


class EpochLog(TypedDict):
    """One epoch as :attr:`PowerLimitOptimizer.epochs` records it (every rank's steered devices, combined)."""

    time_s: float
    energy_j: float
    cost: float
    power_limit: float | None
    #: With ``grid=``: the epoch's emissions (gCO2eq), and every grid column of it (``carbon_g``,
    #: ``carbon_intensity_g_per_kwh``, ``cost_<currency>``, ...; :mod:`zeus_core.grid`).
    carbon_g: NotRequired[float]
    grid: NotRequired[dict[str, float]]


class PowerLimitOptimizer:
    """A registered power policy steering the devices of ``monitor`` from the user's loop.

    ``monitor``: a :class:`~zeus_core.ZeusMonitor` (or :class:`~zeus_core.Monitor`)
    whose devices include one that can set power limits (the GPUs); the policy steers
    that group and measures it with windows of its own. ``policy``: a registered power
    policy (``jit``, ``max``, ``fixed``, a third party's), ``options`` its ``[power]``
    table. ``job``: the job's name; its state (the chosen limit per batch size) is
    kept in the job's store (``store``: a path or a URL, default
    ``.zeus/<job>.sqlite``) and shared with ``zeus run`` of the same job; None keeps
    it for this process only. ``batch_size``: the batch size this run trains at (the
    policy remembers its choice per batch size; None: one batch size, recorded as 0).
    ``eta_knob``: the cost metric's energy/time weight. ``fresh``: forget what the
    store learned (in this object's first write). ``state``: the policy's state to
    start from instead of the store's (what the policy learned elsewhere, such as a
    saved profile); what it learns from there is saved as usual. ``group``: the ranks (default:
    found, see :func:`zeus_core.engine.ranks.process_group`); every rank creates this object with
    the same arguments and calls the same events.

    Call :meth:`on_epoch_begin`, :meth:`on_step_begin`, :meth:`on_step_end` and
    :meth:`on_epoch_end` around the loop's epochs and steps, and :meth:`close` (or
    use ``with``) at the end: the device goes back to the limit it had, and the
    device's own journal puts it back on exit, exceptions, signals and after a kill.
    """

    def __init__(
        self,
        monitor: Monitor,
        policy: str = "jit",
        job: str | None = None,
        *,
        options: dict[str, Any] | None = None,
        batch_size: int | None = None,
        eta_knob: float = 0.5,
        store: str | Path | None = None,
        fresh: bool = False,
        state: Any = None,
        group: ProcessGroup | None = None,
        registry: Registry | None = None,
        grid: Any = None,
    ) -> None:
        if not isinstance(monitor, Monitor):
            raise ValueError(f"monitor must be a zeus_core.ZeusMonitor (or Monitor), got {type(monitor).__name__}")
        try:
            eta = check_eta(eta_knob)
        except (TypeError, ValueError) as e:
            raise ValueError(f"eta_knob: {e}") from None
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0):
            raise ValueError(f"batch_size must be a positive whole number (or None), got {batch_size!r}")
        reg = registry_or_default(registry)
        self.group = group = process_group(group, reg)
        self.job = script_job(job, eta_knob=eta, beta_knob=math.inf, processes=group.world_size)
        self.batch_size = batch_size or 0
        agree(group, {"job": job, "policy": policy, "options": options, "batch_size": batch_size, "eta_knob": eta}, "PowerLimitOptimizer")
        found = (
            monitor.controllable()
            if isinstance(monitor, ZeusMonitor)
            else ((monitor.devices, None) if isinstance(monitor.devices, PowerLimitControl) else None)
        )
        if found is None:
            names = ", ".join(monitor.devices.names) or "nothing"
            raise ValueError(
                f"the monitor measures {names}, and no device among them can set power limits, which policy={policy!r} "
                f"steers; measure the GPUs (ZeusMonitor(gpu_indices=[...]) after {catalog.hint('device', 'nvml')}) or a device plugin "
                "with power control (device=...)"
            )
        self.devices: Any = found[0]
        device_identity = found[1]
        #: The job's grid (``grid=``: a ``[grid]`` table), placed on the devices' clock; None without one.
        self.grid = script_grid(grid, reg, self.devices) if grid is not None else None
        identity: dict[str, Any] = {"job": job_identity(self.job, ("eta_knob", "processes"))}
        if device_identity is not None:
            identity["device"] = device_identity
        assembly = script_assembly(
            reg,
            self.job,
            "power",
            policy,
            options,
            arg="policy",
            parts={"device": self.devices},
            identity=identity,
            group=group,
            store=store,
            fresh=fresh,
            fit_fix="measure a device that offers it (gpu_indices=[...] on a GPU, or device= a plugin that does)",
            grid=self.grid,
        )
        self.policy: Any = assembly.parts.get("power")  # rank 0's; None on the other ranks, which follow it
        self.policy_name = policy
        self.identity = assembly.identity
        powers = group.gather(float(self.devices.max_power_w))
        self.max_power_w = float(group.broadcast(sum(powers) if powers else 0.0))
        sync = monitor.sync
        self.store: JobStore | None = assembly.open_store() if group.rank == 0 and job is not None else None
        self.history: History | None = None
        self._base: Any = None
        self._original: float | None = None
        self._closed = False
        self._epoch_open = False
        self._in_step = False
        self._acting = False
        self._timed = False
        self._step = 0
        self._last_steps: int | None = None
        self.epochs: list[EpochLog] = []
        if group.rank == 0:
            if self.store is not None:
                try:
                    assembly.check_identity()
                except IdentityMismatch:
                    self.store.close()
                    raise
                self.history = assembly.local_history(max_power_w=self.max_power_w)
            session_devices = MirroredDevices(self.devices, self.max_power_w, group)
            session_monitor = (
                MirroredMonitor(session_devices, group, sync=sync)
                if group.world_size > 1
                else Monitor(session_devices, sync=sync, attribute_min_s=0.0)
            )
            self.session: RunSession | None = RunSession(
                job=self.job,
                batch_size=self.batch_size,
                recurrence=0,
                try_index=1,
                cost_bound=math.inf,
                devices=session_devices,
                monitor=session_monitor,
                power_policy=self.policy,
                rank=group.rank,
                world_size=group.world_size,
                grid=self.grid,
            )
            self._follower = None
        else:
            self.session = None
            self._follower = Follower(group, self.devices, Monitor(self.devices, sync=sync, attribute_min_s=0.0))
        # Can this process steer its device at all? Move the limit and back (journaled first, before
        # any training): a process without the privilege fails here, before anything is learned or
        # written, with the device plugin's fixes.
        error = None
        try:
            lo, hi = (float(x) for x in self.devices.power_limit_range())
            current = self.devices.power_limit()
            self._original = float(current) if current is not None else hi
            if lo != hi:
                self.devices.set_power_limit(lo if self._original != lo else hi)
            self.devices.set_power_limit(self._original)
        except Exception as e:  # noqa: BLE001 - reported on every rank
            error = f"{type(e).__name__}: {e}" if not isinstance(e, DeviceError) else str(e)
        try:
            all_ok(group, error)
            if self.history is not None:
                self._base = self.history.load_power()
            if state is not None and self.session is not None and self.policy is not None:
                self.policy.set_state(state)
            self._point("begin_run", self._begin_run, self.session)
        except BaseException:
            if self.store is not None:
                self.store.close()
            raise

    # -- decision points --

    def _point(self, point: str, fn: Any, *args: Any) -> Any:
        """The decision ``point``: rank 0 runs ``fn(*args)``, the others follow it to its result."""
        if self._follower is not None:
            return self._follower.follow(point)
        return lead(self.group, point, fn, *args)

    def _begin_run(self, session: RunSession) -> None:
        self.policy.begin_run(session)

    def _lead_session(self) -> RunSession:
        """The session rank 0 steers through (its decisions are what the other ranks follow)."""
        assert self.session is not None, "only rank 0 decides"
        return self.session

    def _begin_epoch(self, steps: int | None) -> bool:
        session = self._lead_session()
        session.begin_epoch(steps if steps is not None else self._last_steps)
        return session.acting

    def _end_epoch(self, steps: int) -> EpochLog:
        session = self._lead_session()
        m = session.end_epoch(steps)
        log = EpochLog(time_s=m.time, energy_j=m.total_system_energy, cost=session.epoch_costs[-1], power_limit=session.power_limit)
        if session.epoch_grid:  # with grid=: carbon_g (and cost_<currency>) next to energy_j
            grid = session.epoch_grid[-1]
            log["grid"] = dict(grid)
            if CARBON_COLUMN in grid:
                log["carbon_g"] = grid[CARBON_COLUMN]
        return log

    # -- the loop's events --

    def on_epoch_begin(self, steps: int | None = None) -> None:
        """An epoch begins (``steps``: how many it will have, when known)."""
        if self._closed:
            raise RuntimeError("this PowerLimitOptimizer is closed; create a new one for another run")
        if self._epoch_open:
            raise RuntimeError("on_epoch_begin() was called twice without on_epoch_end() between them")
        self._acting = bool(self._point("epoch", self._begin_epoch, steps))
        # A policy that acts on time acts between steps of one process; several ranks act at epoch starts only.
        self._timed = self.group.world_size == 1 and self.session is not None and self.session.timed
        self._epoch_open = True
        self._step = 0

    def on_step_begin(self) -> None:
        """A training step begins: where the policy acts in epochs it profiles."""
        if not self._epoch_open:
            raise RuntimeError(
                "on_step_begin() before on_epoch_begin(): call plo.on_epoch_begin() at the start of every epoch "
                "(GlobalPowerLimitOptimizer begins epochs by itself)"
            )
        self._in_step = True
        if self._acting:
            self._point("iteration", self.session.begin_iteration if self.session is not None else None, self._step)
        elif self._timed and self.session is not None:  # one process: a policy that acts on time (carbon-aware)
            self.session.act_if_due()
        self._step += 1

    def on_step_end(self) -> None:
        """A training step ended."""
        if not self._in_step:
            raise RuntimeError("on_step_end() without on_step_begin(): call plo.on_step_begin() before each step")
        self._in_step = False

    def on_epoch_end(self) -> None:
        """The epoch ended: the policy sees its measurement; what it learned is saved to the store."""
        if not self._epoch_open:
            raise RuntimeError("on_epoch_end() without on_epoch_begin(): call plo.on_epoch_begin() at the start of every epoch")
        self._epoch_open = self._in_step = False
        self._last_steps = self._step
        self.epochs.append(self._point("epoch_end", self._end_epoch, self._step))
        self._save()

    def _save(self) -> None:
        if self.history is not None:
            self._base = self.history.save_power(self._base)

    # -- facts --

    @property
    def power_limit(self) -> float | None:
        """The limit this rank's device holds now."""
        got = self.devices.power_limit()
        return None if got is None else float(got)

    @property
    def held_limit(self) -> float | None:
        """The limit the devices held at the end of the last epoch (what a try's record says it ran at,
        also after :meth:`close` put the devices back); the current limit before any epoch ended."""
        if self.epochs and self.epochs[-1]["power_limit"] is not None:
            return float(self.epochs[-1]["power_limit"])
        return None if self._closed else self.power_limit

    @property
    def profiling(self) -> bool:
        """Whether the policy acts between the steps of the current epoch."""
        return self._acting

    def steady_cost(self) -> float | None:
        """What the run would have cost had its profiling epochs run at the limit the policy
        settled on (rank 0; None elsewhere, or when no epoch profiled)."""
        return None if self.session is None else self.session.steady_cost()

    def cost(self, energy_j: float, time_s: float) -> float:
        """The job's cost metric of ``energy_j`` over ``time_s`` (every rank's maximum power)."""
        return float(zeus_cost(energy_j, time_s, self.job.eta_knob, self.max_power_w))

    # -- lifetime --

    def _end_run(self, session: RunSession) -> None:
        if session.in_epoch:
            session.monitor.end_window(f"epoch-{session.epochs_done + 1}", cancel=True)
        self.policy.end_run(session)

    def close(self) -> None:
        """End the run (what the policy learned is saved) and put the device back at the limit it had."""
        if self._closed:
            return
        self._closed = True
        try:
            self._point("end_run", self._end_run, self.session)
            self._save()
        finally:
            try:
                if self._original is not None:
                    self.devices.set_power_limit(self._original)
            finally:
                if self.store is not None:
                    self.store.close()

    def __enter__(self) -> PowerLimitOptimizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["PowerLimitOptimizer"]

"""Zeus inside the user's own training loop: :class:`PowerLimitOptimizer` and :class:`BatchSizeOptimizer`.

The third way in (DESIGN.md, "Three ways in, one engine"): the same registered
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
  :class:`~zeus_core.session.RunSession` (the object the runner hands a policy),
  fed by the loop's events: the policy sees the same calls as under ``zeus
  run`` (``begin_run``, ``wants_iterations``/``on_iteration``, ``on_epoch_end``).
  Its state (the chosen limit per batch size) lives in the job's store, merged
  like the runner's (no lost update), under the job's identity.
* :class:`BatchSizeOptimizer` chooses each try's batch size with a registered
  batch-size policy through :class:`~zeus_core.trials.Trials` (or any
  :class:`~zeus_core.trials.JobHistory`, such as a remote optimizer's client):
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
decides and writes the store, the others follow (:mod:`zeus_core.ranks`):

* at each decision point (construction, epoch begin and end, each step of an
  epoch the power policy profiles, a try's choice and report) rank 0 acts, and
  every window it opens or closes and every limit it sets is repeated by the
  other ranks on their own devices in the same order; a window's measurement is
  the ranks' combined (energy summed, time of the slowest rank);
* in epochs the policy does not profile, steps involve no collective at all.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from zeus_core.contexts import BuildContext
from zeus_core.cost import check_eta, zeus_cost
from zeus_core.device import DEVICE_CAPABILITIES, PowerLimitControl, copy_capabilities
from zeus_core.errors import DeviceError, PartMismatch, RunFailed
from zeus_core.identity import IdentityMismatch, option_identity
from zeus_core.job import JobOptions, JobSpec, PartSpec, Problem, job_name, structure
from zeus_core.measurement import Measurement
from zeus_core.monitor import Monitor
from zeus_core.parts import NeedsDevice
from zeus_core.ranks import ProcessGroup, agree, combine_measurements, decide, lead, outcome, process_group
from zeus_core.registry import SECTION_KIND
from zeus_core.results import TryRecord
from zeus_core.session import RunSession, target_reached
from zeus_core.stopping import epochs_within
from zeus_core.stores import open_store, resolve_location
from zeus_core.trials import JobHistory, Trial, Trials
from zeus_core.trialsetup import ServesTrials, TrialSetup
from zeus_core.zeusmonitor import ZeusMonitor

if TYPE_CHECKING:  # annotations only
    from zeus_core.registry import Registry
    from zeus_core.stores import JobStore

#: Fixes an :class:`~zeus_core.IdentityMismatch` has from a script (the CLI's are ``--fresh`` and ``job.store``).
SCRIPT_FIXES = "pass fresh=True to start this job over (forgets what the store learned), or another job= name or store="


def _check_identity(trials: Trials, store: JobStore) -> None:
    try:
        trials.check_identity()
    except IdentityMismatch as e:
        store.close()
        raise IdentityMismatch(e.store, e.diffs, fixes=SCRIPT_FIXES) from None


# --------------------------------------------------------------------------- shared set-up


def _registry(registry: Registry | None) -> Registry:
    from zeus_core.registry import get_registry

    return registry if registry is not None else get_registry()


def _job_options(job: str | None, **knobs: Any) -> JobOptions:
    if job is not None:
        if not isinstance(job, str) or not job:
            raise ValueError(f"job must be the job's name (a non-empty string), got {job!r}")
        job_name(None, None, job)
    return JobOptions(name=job or "", **knobs)


def _build_part(
    reg: Registry, section: str, arg: str, name: Any, options: dict[str, Any] | None, job: JobOptions,
    parts: dict[str, Any],
) -> tuple[Any, Any, PartSpec]:
    """Build the ``section`` part named ``name`` with ``options`` (its job.toml table) outside a job file."""
    kind = SECTION_KIND[section]
    known = reg.names(kind)
    if not isinstance(name, str) or name not in known:
        from zeus_core.job import _catalog

        dist = _catalog().get(section, {}).get(name) if isinstance(name, str) else None
        hint = f" (pip install {dist})" if dist else ""
        raise ValueError(f"{arg}={name!r} is not a registered {section} policy{hint}; installed: {', '.join(known) or 'none'}")
    if options is not None and not isinstance(options, dict):
        raise ValueError(f"options must be a dict (the [{section}] table of a job file, without plugin), got {type(options).__name__}")
    r = reg.get(kind, name)
    problems: list[Problem] = []
    opts = structure(r.options, dict(options or {}), ("options",), problems)
    if opts is None:
        raise ValueError(f"{arg}={name!r}: " + "; ".join(f"{p.message} @ {p.jsonpath()}" for p in problems))
    ps = PartSpec(section, name, opts, r)
    spec = JobSpec(path=Path.cwd() / "script", job=job, parts={section: ps}, raw={}, overrides={}, lines={})
    try:
        part = r.factory(opts, BuildContext(spec, None, Console(stderr=True), reg, parts))
    except (ValueError, PartMismatch) as e:
        raise ValueError(f"{arg}={name!r}: {e}") from e
    return part, opts, ps


def _open_job_store(job: JobOptions, store: Any, reg: Registry) -> JobStore:
    """The job's store as ``zeus run`` finds it (a script's folder is the current one)."""
    location = resolve_location(str(store or ""), Path.cwd(), Path(".zeus") / f"{job.name}.sqlite")
    return open_store(location, reg, job=job.name)


def _job_identity(job: JobOptions, keys: tuple[str, ...]) -> dict[str, Any]:
    full = option_identity(job)
    return {k: full[k] for k in keys if k in full}


def _check_needs(part: Any, device: Any, arg: str, name: str) -> None:
    if isinstance(part, NeedsDevice):
        missing = [cap.__name__ for cap in part.needs_device if not isinstance(device, cap)]
        if missing:
            raise ValueError(
                f"{arg}={name!r} needs a device with {', '.join(missing)}, and the monitor's devices have none; "
                "measure a device that offers it (gpu_indices=[...] on a GPU, or device= a plugin that does)"
            )


def _all_ok(group: ProcessGroup, error: str | None) -> None:
    """Raise on every rank when any rank hit ``error`` while setting up."""
    if group.world_size == 1:
        if error:
            raise DeviceError(error)
        return
    got = group.gather(error)
    verdict = None
    if group.rank == 0:
        assert got is not None
        bad = [f"rank {r}: {e}" for r, e in enumerate(got) if e]
        verdict = "; ".join(bad) or None
    verdict = group.broadcast(verdict)
    if verdict:
        raise DeviceError(verdict)


# --------------------------------------------------------------------------- ranks following rank 0


class MirroredDevices:
    """Rank 0's steered device group: every limit set is repeated by the other ranks on theirs.

    ``max_power_w`` is every rank's, summed (the cost metric weighs time against the
    whole job's power). Capabilities are rank 0's group's, copied (not forwarded
    through ``__getattr__``, which ``isinstance`` on Python 3.12+ does not see).
    """

    def __init__(self, local: Any, max_power_w: float, group: ProcessGroup) -> None:
        self.local = local
        self.group = group
        self.max_power_w = float(max_power_w)
        self.names = list(local.names)
        self.energy_sources = dict(local.energy_sources)
        copy_capabilities(self, {cap: local for cap in DEVICE_CAPABILITIES if isinstance(local, cap)})
        self.set_power_limit = self._set_power_limit

    def _set_power_limit(self, watts: float) -> None:
        if self.group.world_size > 1:
            self.group.broadcast(("limit", float(watts)))
        self.local.set_power_limit(watts)

    def clock(self) -> float:
        return self.local.clock()

    def read_energy(self) -> dict[str, float]:
        return self.local.read_energy()

    def close(self) -> None:
        pass  # the monitor that opened the group closes it


class MirroredMonitor(Monitor):
    """Rank 0's windows, opened and closed on every rank at the same point; a window's
    measurement is every rank's combined (energy summed, time of the slowest)."""

    def __init__(self, devices: Any, group: ProcessGroup, sync: Any) -> None:
        super().__init__(devices, sync=sync)
        self.group = group

    def begin_window(self, name: str, sync_execution: bool = True, restart: bool = False) -> None:
        self.group.broadcast(("begin", name))
        super().begin_window(name, sync_execution, restart)

    def end_window(self, name: str, sync_execution: bool = True, cancel: bool = False) -> Measurement:
        self.group.broadcast(("end", name, cancel))
        m = super().end_window(name, sync_execution, cancel)
        if cancel:
            return m
        return combine_measurements(self.group.gather(m))


class Follower:
    """A rank other than 0: repeats, on its own devices, what rank 0 did at a decision point."""

    def __init__(self, group: ProcessGroup, devices: Any, monitor: Monitor) -> None:
        self.group = group
        self.devices = devices
        self.monitor = monitor

    def follow(self) -> Any:
        """Repeat rank 0's window and limit operations until it says the point is done; its result."""
        while True:
            msg = self.group.broadcast(None)
            op = msg[0]
            if op == "limit":
                self.devices.set_power_limit(msg[1])
            elif op == "begin":
                self.monitor.begin_window(msg[1], restart=True)
            elif op == "end":
                m = self.monitor.end_window(msg[1], cancel=msg[2])
                if not msg[2]:
                    self.group.gather(m)
            elif op in ("done", "error"):
                return outcome(self.group, msg)
            else:  # pragma: no cover - a message of another protocol
                raise RuntimeError(f"rank {self.group.rank} got {op!r} from rank 0: the ranks' calls diverged")


# --------------------------------------------------------------------------- power


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
    found, see :func:`zeus_core.process_group`); every rank creates this object with
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
    ) -> None:
        if not isinstance(monitor, Monitor):
            raise ValueError(f"monitor must be a zeus_core.ZeusMonitor (or Monitor), got {type(monitor).__name__}")
        try:
            eta = check_eta(eta_knob)
        except (TypeError, ValueError) as e:
            raise ValueError(f"eta_knob: {e}") from None
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0):
            raise ValueError(f"batch_size must be a positive whole number (or None), got {batch_size!r}")
        reg = _registry(registry)
        self.group = group = process_group(group, reg)
        self.job = _job_options(job, eta_knob=eta, beta_knob=math.inf, processes=group.world_size)
        self.batch_size = batch_size or 0
        agree(group, {"job": job, "policy": policy, "options": options, "batch_size": batch_size, "eta_knob": eta},
              "PowerLimitOptimizer")
        self.policy, opts, _ = _build_part(reg, "power", "policy", policy, options, self.job, {})
        self.policy_name = policy
        found = monitor.controllable() if isinstance(monitor, ZeusMonitor) else (
            (monitor.devices, None) if isinstance(monitor.devices, PowerLimitControl) else None
        )
        if found is None:
            names = ", ".join(monitor.devices.names) or "nothing"
            raise ValueError(
                f"the monitor measures {names}, and no device among them can set power limits, which policy={policy!r} "
                "steers; measure the GPUs (ZeusMonitor(gpu_indices=[...]) with zeus-plugins-nvml) or a device plugin "
                "with power control (device=...)"
            )
        self.devices, device_identity = found
        _check_needs(self.policy, self.devices, "policy", policy)
        powers = group.gather(float(self.devices.max_power_w))
        self.max_power_w = float(group.broadcast(sum(powers) if powers else 0.0))
        sync = monitor.sync
        self.store: JobStore | None = None
        self.trials: Trials | None = None
        self._base: Any = None
        self._original: float | None = None
        self._closed = False
        self._epoch_open = False
        self._in_step = False
        self._acting = False
        self._step = 0
        self._last_steps: int | None = None
        self.epochs: list[dict[str, float]] = []
        if group.rank == 0:
            identity = {"job": _job_identity(self.job, ("eta_knob", "processes")),
                        "power": {"plugin": policy, **option_identity(opts)}}
            if device_identity is not None:
                identity["device"] = device_identity
            self.identity = identity
            if job is not None:
                self.store = _open_job_store(self.job, store, reg)
                self.trials = Trials(self.job, self.store, None, identity=identity, max_power_w=self.max_power_w,
                                     power_policy=self.policy, fresh=fresh)
                _check_identity(self.trials, self.store)
            session_devices = MirroredDevices(self.devices, self.max_power_w, group)
            session_monitor = (MirroredMonitor if group.world_size > 1 else Monitor)(
                session_devices, **({"group": group} if group.world_size > 1 else {}), sync=sync)
            self.session = RunSession(
                job=self.job, batch_size=self.batch_size, recurrence=0, try_index=1, cost_bound=math.inf,
                devices=session_devices, monitor=session_monitor, power_policy=self.policy,
                rank=group.rank, world_size=group.world_size,
            )
            self._follower = None
        else:
            self.session = None
            self._follower = Follower(group, self.devices, Monitor(self.devices, sync=sync))
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
            _all_ok(group, error)
            if self.trials is not None:
                self._base = self.trials.load_power()
            if state is not None and self.session is not None:
                self.policy.set_state(state)
            self._point(self.policy.begin_run, self.session)
        except BaseException:
            if self.store is not None:
                self.store.close()
            raise

    # -- decision points --

    def _point(self, fn: Any, *args: Any) -> Any:
        if self._follower is not None:
            return self._follower.follow()
        return lead(self.group, fn, *args)

    def _begin_epoch(self, steps: int | None) -> bool:
        self.session.begin_epoch(steps if steps is not None else self._last_steps)
        return self.session.acting

    def _end_epoch(self, steps: int) -> dict[str, float]:
        m = self.session.end_epoch(steps)
        return {"time_s": m.time, "energy_j": m.total_system_energy, "cost": self.session.epoch_costs[-1],
                "power_limit": self.session.power_limit}

    # -- the loop's events --

    def on_epoch_begin(self, steps: int | None = None) -> None:
        """An epoch begins (``steps``: how many it will have, when known)."""
        if self._closed:
            raise RuntimeError("this PowerLimitOptimizer is closed; create a new one for another run")
        if self._epoch_open:
            raise RuntimeError("on_epoch_begin() was called twice without on_epoch_end() between them")
        self._acting = bool(self._point(self._begin_epoch, steps))
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
            self._point(self.session.begin_iteration if self.session is not None else None, self._step)
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
        self.epochs.append(self._point(self._end_epoch, self._step))
        self._save()

    def _save(self) -> None:
        if self.trials is not None:
            self._base = self.trials.save_power(self._base)

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
            self._point(self._end_run, self.session)
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


# --------------------------------------------------------------------------- batch size


def counted_energy(m: Measurement) -> float:
    """The energy a try's cost counts of a measurement: the GPUs' where it has any (upstream Zeus's
    ``total_energy``, and what a ``[device]`` of GPUs measures under ``zeus run``), else every device's."""
    return m.total_gpu_energy if m.gpu_energy else m.total_system_energy



class BatchSizeTrial:
    """One try as a script sees it: train at :attr:`batch_size` until the target, or until
    :meth:`should_stop` says the try can no longer pay off."""

    def __init__(self, owner: BatchSizeOptimizer, recurrence: int, try_index: int, batch_size: int, cost_bound: float) -> None:
        self._owner = owner
        self.recurrence = recurrence
        self.try_index = try_index
        self.batch_size = batch_size
        #: the try stops before the epoch that would push its cost past this (inf: no bound yet)
        self.cost_bound = cost_bound
        self.epochs = 0
        self.stopped: str | None = None
        self._last_cost = 0.0

    def cost(self, energy_j: float, time_s: float) -> float:
        """The job's cost metric of ``energy_j`` joules over ``time_s`` seconds (all ranks' maximum power)."""
        return self._owner.cost(energy_j, time_s)

    def should_stop(self, cost_so_far: float | Measurement) -> bool:
        """Call once after each epoch with the try's cost so far (or its measurement so far,
        counted as :func:`counted_energy` says):
        True when the next epoch would push the cost past :attr:`cost_bound` (judged at the
        last epoch's cost, as ``zeus run`` does), or ``max_epochs`` epochs have run.

        Under several ranks call it on every rank: a measurement is combined over ranks
        (energy summed, time of the slowest); with a number, rank 0's counts. Every rank
        gets rank 0's answer.
        """
        owner = self._owner
        if isinstance(cost_so_far, Measurement):
            parts = owner.group.gather(cost_so_far)
            whole = None if parts is None else combine_measurements(parts)
            value = None if whole is None else owner.cost(counted_energy(whole), whole.time)
        else:
            value = float(cost_so_far)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"cost_so_far must be a finite cost >= 0, got {cost_so_far!r}")
        self.epochs += 1

        def judge() -> str | None:
            assert value is not None
            last, self._last_cost = value - self._last_cost, value
            limit = owner.max_epochs or 10**9
            if owner.max_epochs is not None and self.epochs >= owner.max_epochs:
                return "max-epochs"
            if self.epochs >= epochs_within(self.cost_bound, max(last, 0.0), limit):
                return "early-stop"
            return None

        self.stopped = decide(owner.group, judge)
        return self.stopped is not None

    def __repr__(self) -> str:
        return (f"BatchSizeTrial(recurrence={self.recurrence}, try_index={self.try_index}, batch_size={self.batch_size}, "
                f"cost_bound={self.cost_bound:g})")


class UserLoop:
    """The user's own loop, as the workload a batch-size policy is built beside
    (:class:`~zeus_core.parts.OffersBatchSizes`): the batch sizes it can train and its default."""

    def __init__(self, batch_sizes: list[int] | None, default_batch_size: int | None) -> None:
        self.batch_sizes = batch_sizes
        self.default_batch_size = default_batch_size


def _batch_sizes(value: Any) -> list[int] | None:
    if value is None:
        return None
    try:
        out = list(value)
    except TypeError:
        raise ValueError(f"batch_sizes must be a list of positive whole numbers, got {value!r}") from None
    if not out or any(isinstance(b, bool) or not isinstance(b, int) or b <= 0 for b in out) or len(set(out)) != len(out):
        raise ValueError(f"batch_sizes must list distinct positive whole numbers, got {value!r}")
    return out


class BatchSizeOptimizer:
    """Chooses the batch size of each try of a recurring job, from the user's script.

    ``job``: the job's name (its store: ``store``, a path or a URL, default
    ``.zeus/<job>.sqlite``, shared with ``zeus run`` of the same job). ``policy``: a
    registered batch-size policy (``mab``, ``fixed``, a third party's), ``options`` its
    ``[batch_size]`` table. ``batch_sizes`` and ``default``: what the policy chooses
    among and starts from (a ``[workload]``'s ``batch_sizes`` and
    ``default_batch_size``). ``monitor`` (a :class:`~zeus_core.ZeusMonitor`) or
    ``max_power_w``: the devices' maximum power of the cost metric (the monitor's GPUs;
    with neither, the GPUs a plain ``ZeusMonitor()`` finds). ``eta_knob``,
    ``beta_knob``, ``target_metric``, ``higher_is_better``, ``max_epochs``,
    ``max_tries``, ``seed``: the ``[job]`` keys of the same names. ``fresh``: forget
    what the store learned (in the first write). ``history``: a
    :class:`~zeus_core.JobHistory` to use instead of the store (an optimizer
    service's client). ``group``: the ranks (default: found).

    Each :meth:`next` is one try (a new recurrence after one that reached the target);
    :meth:`report` records it with what the policy learns. A recurrence that does not
    reach the target in ``max_tries`` tries raises :class:`~zeus_core.RunFailed`.
    """

    def __init__(
        self,
        job: str,
        policy: str = "mab",
        batch_sizes: list[int] | None = None,
        default: int | None = None,
        *,
        options: dict[str, Any] | None = None,
        monitor: Monitor | None = None,
        max_power_w: float | None = None,
        eta_knob: float = 0.5,
        beta_knob: float = 2.0,
        target_metric: float | None = None,
        higher_is_better: bool = True,
        max_epochs: int | None = None,
        max_tries: int = 20,
        seed: int = 0,
        store: str | Path | None = None,
        history: JobHistory | None = None,
        fresh: bool = False,
        group: ProcessGroup | None = None,
        registry: Registry | None = None,
    ) -> None:
        if job is None:
            raise ValueError("job must name the job (its recurrences share one history), e.g. job=\"resnet-cifar\"")
        sizes = _batch_sizes(batch_sizes)
        if default is not None and (isinstance(default, bool) or not isinstance(default, int) or default <= 0):
            raise ValueError(f"default must be a positive whole batch size, got {default!r}")
        if sizes is not None and default is not None and default not in sizes:
            raise ValueError(f"default {default} is not one of batch_sizes {sizes}; add it to the list")
        if max_power_w is not None and not (isinstance(max_power_w, (int, float)) and math.isfinite(max_power_w) and max_power_w > 0):
            raise ValueError(f"max_power_w must be a positive number of watts, got {max_power_w!r}")
        if monitor is not None and not isinstance(monitor, Monitor):
            raise ValueError(f"monitor must be a zeus_core.ZeusMonitor, got {type(monitor).__name__}")
        if history is not None and not isinstance(history, JobHistory):
            raise ValueError("history must be a zeus_core.JobHistory (begin_recurrence, next_trial, record)")
        knobs: dict[str, Any] = {"eta_knob": eta_knob, "beta_knob": beta_knob, "higher_is_better": higher_is_better,
                                 "max_tries": max_tries, "seed": seed}
        if target_metric is not None:
            knobs["target_metric"] = target_metric
        if max_epochs is not None:
            knobs["max_epochs"] = max_epochs
        try:
            jobopts = _job_options(job, **knobs)
        except (TypeError, ValueError) as e:
            raise ValueError(str(e)) from None
        reg = _registry(registry)
        self.group = group = process_group(group, reg)
        jobopts.processes = group.world_size
        self.job = jobopts
        self.max_epochs = max_epochs
        self.target_metric = target_metric
        agree(group, {"job": job, "policy": policy, "options": options, "batch_sizes": sizes, "default": default,
                      "eta_knob": eta_knob, "beta_knob": beta_knob, "target_metric": target_metric,
                      "max_epochs": max_epochs, "max_tries": max_tries}, "BatchSizeOptimizer")
        local_power, device_identity = self._power(monitor, max_power_w, reg)
        powers = group.gather(local_power)
        self.max_power_w = float(group.broadcast(sum(powers) if powers else 0.0))
        self._trial: BatchSizeTrial | None = None
        self._pending: Trial | None = None
        self._recurrence: int | None = None
        self._tries = 0
        self._cost_acc = 0.0
        self.store: JobStore | None = None
        self.history: JobHistory | None = None
        self.policy = None
        if group.rank != 0:
            return
        self.policy, opts, _ = _build_part(reg, "batch_size", "policy", policy, options, jobopts,
                                           {"workload": UserLoop(sizes, default)})
        keys = ("eta_knob", "beta_knob", "higher_is_better", "processes") + (
            ("target_metric",) if target_metric is not None else ()) + (("max_epochs",) if max_epochs is not None else ())
        identity: dict[str, Any] = {
            "job": _job_identity(jobopts, keys),
            "batch_size": {"plugin": policy, **option_identity(opts)},
            "workload": {"batch_sizes": sizes or [], "default_batch_size": default},
        }
        if device_identity is not None:
            identity["device"] = device_identity
        self.identity = identity
        if history is not None:
            self.history = history
            return
        self.store = _open_job_store(jobopts, store, reg)
        if isinstance(self.store, ServesTrials):  # zeus serve: the service runs the policy and keeps the history
            setup = TrialSetup.of_parts(jobopts, identity, policy, opts, max_power_w=self.max_power_w,
                                        workload=UserLoop(sizes, default), fresh=fresh)
            self.history = self.store.trial_service(setup)
            return
        trials = Trials(jobopts, self.store, self.policy, identity=identity, max_power_w=self.max_power_w,
                        batch_sizes=sizes, default_batch_size=default, fresh=fresh)
        _check_identity(trials, self.store)
        self.history = trials

    @staticmethod
    def _power(monitor: Monitor | None, max_power_w: float | None, reg: Registry) -> tuple[float, dict[str, Any] | None]:
        """This rank's maximum power for the cost metric, and its ``[device]`` identity when known."""
        if max_power_w is not None:
            return float(max_power_w), None
        if monitor is not None:
            got = monitor.primary() if isinstance(monitor, ZeusMonitor) else None
            if got is not None:
                return float(got[0].max_power_w), got[1]
            return float(monitor.devices.max_power_w), None
        with ZeusMonitor(cpu_indices=[], registry=reg) as probe:
            got = probe.primary()
            if got is None:
                raise ValueError(
                    "the cost metric needs the devices' maximum power and no GPU was found: pass monitor= (the "
                    "ZeusMonitor that measures the training) or max_power_w="
                )
            return float(got[0].max_power_w), got[1]

    # -- the cost metric --

    def cost(self, energy_j: float, time_s: float) -> float:
        """The job's cost metric of ``energy_j`` joules over ``time_s`` seconds."""
        return float(zeus_cost(energy_j, time_s, self.job.eta_knob, self.max_power_w))

    # -- tries --

    def next(self) -> BatchSizeTrial:
        """The next try: its batch size and cost bound (a new recurrence after one that reached the target)."""
        if self._trial is not None:
            raise RuntimeError(f"report {self._trial!r} first (bso.report(trial, energy_j=..., time_s=..., reached=...))")

        def choose() -> tuple[int, int, int, float]:
            assert self.history is not None
            if self._recurrence is None:
                self._recurrence = self.history.begin_recurrence()
                self._tries, self._cost_acc = 0, 0.0
            self._tries += 1
            self._pending = self.history.next_trial(self._recurrence, self._tries)
            t = self._pending
            return t.recurrence, t.try_index, int(t.batch_size), float(t.cost_bound)

        rec, try_index, batch_size, bound = decide(self.group, choose)
        self._trial = BatchSizeTrial(self, rec, try_index, batch_size, bound)
        return self._trial

    def report(
        self,
        trial: BatchSizeTrial,
        *,
        energy_j: float,
        time_s: float,
        reached: bool | None = None,
        metric: float | None = None,
        epochs: int | None = None,
        power: PowerLimitOptimizer | None = None,
        extra: dict[str, Any] | None = None,
    ) -> TryRecord:
        """Record ``trial``: its energy and time (this rank's; ranks are summed), whether it
        ``reached`` the target (or its ``metric``, judged against ``target_metric``), how
        many ``epochs`` it ran (default: the :meth:`BatchSizeTrial.should_stop` calls), and
        ``power``: the :class:`PowerLimitOptimizer` that steered it (its limit and
        steady-state cost go into the record). Returns the record (every rank)."""
        if trial is not self._trial:
            raise ValueError(f"report the trial the last next() returned ({self._trial!r}), got {trial!r}")
        if reached is None:
            if metric is None or self.target_metric is None:
                raise ValueError(
                    "say whether the try reached the target: reached=True or False, or metric=<validation metric> "
                    "with target_metric= given when creating the BatchSizeOptimizer"
                )
            reached = target_reached(float(metric), self.target_metric, self.job.higher_is_better)
        for name, value in (("energy_j", energy_j), ("time_s", time_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        mine = {"energy_j": float(energy_j), "time_s": float(time_s), "reached": bool(reached)}
        parts = self.group.gather(mine)
        power_limit = power.held_limit if power is not None else None
        steady = power.steady_cost() if power is not None else None

        def record() -> TryRecord:
            assert parts is not None and self._pending is not None and self.history is not None
            split = sorted({p["reached"] for p in parts})
            if len(split) > 1:
                raise ValueError(f"the ranks disagree whether try {trial.try_index} reached the target: "
                                 f"{[p['reached'] for p in parts]} by rank; report the same reached= on every rank")
            energy = float(sum(p["energy_j"] for p in parts))
            seconds = float(max(p["time_s"] for p in parts))
            n = trial.epochs if epochs is None else int(epochs)
            details = dict(extra or {}) | ({"metric": float(metric)} if metric is not None else {})
            if steady is not None:
                details["steady_cost"] = steady
            rec = TryRecord(
                recurrence=trial.recurrence, try_index=trial.try_index, batch_size=trial.batch_size,
                power_limit=power_limit, epochs=n, time_s=seconds, energy_j=energy, cost=self.cost(energy, seconds),
                reached=bool(reached), stopped=None if reached else (trial.stopped or "ended"), extra=details,
                steady_cost=steady,
            )
            self._cost_acc += rec.cost  # a try that never ran reports (about) nothing
            self.history.record(self._pending, rec, recurrence_cost=self._cost_acc if rec.reached else None)
            return rec

        try:
            rec = decide(self.group, record)
        finally:
            self._trial = self._pending = None
        if rec.reached:
            self._recurrence = None
        elif trial.try_index >= self.job.max_tries:
            self._recurrence = None
            raise RunFailed(
                f"recurrence {trial.recurrence} did not reach the target in {self.job.max_tries} tries; raise max_tries "
                "or max_epochs, or check the target (target_metric=, reached=)"
            )
        return rec

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None

    def __enter__(self) -> BatchSizeOptimizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["BatchSizeOptimizer", "BatchSizeTrial", "PowerLimitOptimizer", "counted_energy"]

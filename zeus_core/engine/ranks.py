"""The ranks of one job: who decides, and how decisions and measurements travel.

Whatever started the processes (``torchrun``, SLURM's ``srun``, the user's
``torch.multiprocessing``, or the runner's own ``job.processes``), the ranks of
one data-parallel job are **one job**: rank 0 decides (batch size, power limit
per step and epoch), every other rank follows what rank 0 broadcast, the
ranks' measurements are combined (:func:`combine_measurements`: energy summed,
time of the slowest rank), and only rank 0 writes the store.

A :class:`ProcessGroup` is how this process reaches the others. Plugins
provide them (``zeus_register_process_groups``: the ``torch`` plugin joins a
``torch.distributed`` group, initialised by the user or, from the launcher's
environment, by zeus); :func:`process_group` finds the one this process is
in, or :data:`SINGLE` for a process that is a job of its own.

:func:`agree` checks that every rank was asked the same thing (the same job,
policy and options) before anything runs, so that mismatched ranks fail at
once, with what differs, instead of deadlocking or splitting into two jobs.

**The protocol.** Rank 0 speaks, the others follow: every message is a tuple
``(op, *args)`` that rank 0 broadcasts and every other rank receives at the same
point of its program (a :class:`Follower`), whatever part sends it:

* the core's ops, which may come at any point of a follower's program and are
  handled where they come: ``limit`` (rank 0 set its devices' power limit,
  :class:`MirroredDevices`), ``begin`` / ``end`` (it opened or closed a window,
  :class:`MirroredMonitor`; an ``end`` that is not a cancel is followed by a
  gather of every rank's measurement), ``error`` (it failed: the follower raises
  :class:`LeaderFailed`);
* the points of a part's program, each named by its op: a decision
  (:func:`lead`: rank 0 runs it and sends ``(point, result)``; a follower's
  :meth:`Follower.follow`), or one of a part's own ops that a follower reads with
  :meth:`Follower.receive` (a data-parallel workload's ``try``, ``epoch``, ``stop`` ...).

A follower that receives another op than the one its program is at raises
:class:`ProtocolError` naming both: the ranks' calls diverged. Where a follower
joins a gather, rank 0 announces it first (``end``, or a part's own op), so that
a diverged rank stops at that message instead of waiting in a collective the
others never call.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from zeus_core import catalog
from zeus_core.attribution import charged_to
from zeus_core.backends import ProcessGroup
from zeus_core.device import DEVICE_CAPABILITIES, PowerLimitControl, copy_capabilities
from zeus_core.errors import DeviceError, RunFailed
from zeus_core.measurement import Measurement
from zeus_core.windows import Monitor

if TYPE_CHECKING:  # annotations only
    from zeus_core.engine.registry import Registry

_GPU = re.compile(r"gpu(\d+)$")


class SingleProcess:
    """The group of a process that is a job of its own."""

    rank = 0
    world_size = 1
    local_rank = 0

    def broadcast(self, obj: Any) -> Any:
        return obj

    def gather(self, obj: Any) -> list[Any]:
        return [obj]

    def __repr__(self) -> str:
        return "SingleProcess()"


SINGLE = SingleProcess()


def launched_world_size() -> int:
    """``WORLD_SIZE`` as a launcher (torchrun, SLURM with the torch variables) set it; 1 without one."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def launched_local_rank() -> int | None:
    """This process's ``LOCAL_RANK`` when a launcher started several ranks on this machine, else None
    (each rank then measures and steers its own GPU: the ``LOCAL_RANK``-th visible one)."""
    try:
        if int(os.environ.get("LOCAL_WORLD_SIZE", "1")) > 1:
            return int(os.environ["LOCAL_RANK"])
    except (KeyError, ValueError):
        pass
    return None


def process_group(group: ProcessGroup | None = None, registry: Registry | None = None) -> ProcessGroup:
    """The group this process is a rank of: ``group`` when given, else the first
    registered ``join()`` that finds one, else :data:`SINGLE`.

    Raises RuntimeError when the environment says this process is one of several
    ranks (``WORLD_SIZE`` > 1) and no installed plugin can join them: training on
    as one job per rank would run N jobs against one store.
    """
    if group is not None:
        if not isinstance(group, ProcessGroup):
            raise TypeError(
                f"group must be a zeus_core.backends.ProcessGroup (rank, world_size, local_rank, broadcast, gather), "
                f"got {type(group).__name__}"
            )
        return group
    if registry is None:
        from zeus_core.engine.registry import get_registry

        registry = get_registry()
    for name in sorted(registry.process_groups):
        joiner = registry.process_groups[name]
        got = joiner.join()
        if got is not None:
            if not isinstance(got, ProcessGroup):
                raise RuntimeError(f"process group {name!r} of plugin {joiner.plugin!r} returned {type(got).__name__}, not a ProcessGroup")
            return got
    world = launched_world_size()
    if world > 1:
        raise RuntimeError(
            f"WORLD_SIZE={world}: a launcher started this process as one rank of {world}, but no installed plugin joins "
            "ranks into one job (so each rank would run a job of its own against one store); "
            f"{catalog.hint('process_group', 'torch')}, or run one process"
        )
    return SINGLE


def combine_measurements(measurements: Sequence[Measurement]) -> Measurement:
    """The ranks' measurements of one window as one: energy summed, time of the slowest rank.

    Rank 0's device names stay; a GPU of rank r > 0 is numbered after the GPUs of
    the ranks before it (``gpu<i>``, as upstream Zeus numbers every GPU of a job),
    so ``gpu_energy`` and ``total_energy`` cover every rank's GPUs; any other
    device of rank r > 0 is named ``rank<r>/<name>``.
    """
    first = measurements[0]
    if len(measurements) == 1:
        return first
    energy = dict(first.energy)
    sources = dict(first.sources)
    scopes, errors = dict(first.scopes), dict(first.errors)
    # each GPU's split among its processes (zeus_core.attribution), renamed as its energy; each keeps its
    # observer, the PID of the rank that measured it, so rank 0 knows every rank's process (ranks_charged)
    attribution = dict(first.attribution)
    offset = max((int(g.group(1)) + 1 for n in first.energy if (g := _GPU.match(n))), default=0)
    for r, theirs in enumerate(measurements[1:], start=1):
        gpus = sorted(int(g.group(1)) for n in theirs.energy if (g := _GPU.match(n)))
        for name, joules in theirs.energy.items():
            gpu = _GPU.match(name)
            new = f"gpu{offset + gpus.index(int(gpu.group(1)))}" if gpu else f"rank{r}/{name}"
            energy[new] = joules
            if name in theirs.sources:
                sources[new] = theirs.sources[name]
            if name in theirs.scopes:
                scopes[new] = theirs.scopes[name]
            if name in theirs.errors:
                errors[new] = theirs.errors[name]
            if name in theirs.attribution:
                attribution[new] = theirs.attribution[name]
        offset += len(gpus)
    return Measurement(max(m.time for m in measurements), energy, sources, scopes=scopes, errors=errors, attribution=attribution)


def ranks_charged(windows: Sequence[Measurement]) -> dict[str, Any] | None:
    """What the processes of a try over several ranks were charged over ``windows`` (each combined across
    the ranks: :func:`combine_measurements`), ``{"energy_j", "basis"}`` as :func:`~zeus_core.attribution.charged_to`:
    every rank's process on the GPUs it measured, known to rank 0 as their attributions' observer. None unless every GPU
    of every window was attributed: a rank whose device cannot say who ran on it would leave its share
    out, and the try's figure would understate it."""
    for m in windows:
        if any(_GPU.match(name) and name not in m.attribution for name in m.energy):
            return None
    return charged_to([m.attribution for m in windows])


def agree(group: ProcessGroup, facts: dict[str, Any], what: str) -> None:
    """Raise ValueError on every rank unless every rank passed the same ``facts``.

    ``what`` names the object in the message ("BatchSizeOptimizer"). Two collectives;
    called where the ranks set up, never per step.
    """
    if group.world_size == 1:
        return
    got = group.gather(facts)
    verdict = None
    if group.rank == 0:
        assert got is not None
        for r, theirs in enumerate(got[1:], start=1):
            diff = sorted(k for k in set(facts) | set(theirs) if facts.get(k) != theirs.get(k))
            if diff:
                shown = "; ".join(f"{k}: rank 0 {facts.get(k)!r}, rank {r} {theirs.get(k)!r}" for k in diff)
                verdict = (
                    f"the ranks of this job disagree about the {what} ({shown}): every rank must create it with "
                    "the same arguments, since rank 0 decides for all"
                )
                break
    verdict = group.broadcast(verdict)
    if verdict:
        raise ValueError(verdict)


def lead(group: ProcessGroup, point: str, fn: Any, *args: Any) -> Any:
    """Rank 0's side of the decision ``point``: run ``fn(*args)``, then tell the others its result
    (``(point, value)``) or its error (``("error", "Type: message")``), so that no rank waits for a
    decision that never comes. What ``fn`` sends meanwhile (limits, windows) the others handle first."""
    if group.world_size == 1:
        return fn(*args)
    try:
        value = fn(*args)
    except Exception as e:
        with contextlib.suppress(Exception):  # the others may be gone already: rank 0's own error is the story
            group.broadcast(("error", f"{type(e).__name__}: {e}"))
        raise
    group.broadcast((point, value))
    return value


def decide(group: ProcessGroup, point: str, fn: Any, *args: Any) -> Any:
    """Rank 0 runs ``fn(*args)``; every rank gets its result, or raises its error (the decision ``point``)."""
    if group.rank == 0 or group.world_size == 1:
        return lead(group, point, fn, *args)
    return Follower(group).follow(point)


def all_ok(group: ProcessGroup, error: str | None) -> None:
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


# --------------------------------------------------------------------------- ranks following rank 0's devices and windows


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
        super().__init__(devices, sync=sync, attribute_min_s=0.0)  # a try's epochs, whatever their length
        self.group = group

    def begin_window(self, name: str, sync_execution: bool = True, restart: bool = False) -> None:
        self.group.broadcast(("begin", name))
        super().begin_window(name, sync_execution, restart)

    def end_window(self, name: str, sync_execution: bool = True, cancel: bool = False) -> Measurement:
        self.group.broadcast(("end", name, cancel))
        m = super().end_window(name, sync_execution, cancel)
        if cancel:
            return m
        every = self.group.gather(m)
        assert every is not None  # rank 0 gathers
        return combine_measurements(every)


class ProtocolError(RunFailed):
    """A rank got from rank 0 a message it did not expect: the ranks' calls diverged."""


class LeaderFailed(RunFailed):
    """Rank 0 failed where this rank was following it, so this rank stops too."""


class Follower:
    """A rank other than 0: does what rank 0 says, one message at a time (the protocol: see the module).

    ``handlers`` say what this rank does with each op that may come at any point: the core's
    (``limit`` on ``devices``, ``begin`` / ``end`` on ``monitor``) and a part's own, added
    (or replaced) by the part. Every other op is read where the program expects it:
    :meth:`receive` for a part's own ops, :meth:`follow` for the result of a decision.
    """

    def __init__(
        self, group: ProcessGroup, devices: Any = None, monitor: Monitor | None = None, handlers: dict[str, Any] | None = None
    ) -> None:
        self.group = group
        self.devices = devices
        self.monitor = monitor
        self.handlers: dict[str, Any] = {"limit": self._limit, "begin": self._begin, "end": self._end}
        self.handlers.update(handlers or {})

    def _limit(self, watts: float) -> None:
        if not isinstance(self.devices, PowerLimitControl):
            raise DeviceError(
                f"rank 0 set a power limit of {watts:g} W, which rank {self.group.rank} cannot follow: "
                "its devices have no power limit control; give every rank the same kind of device"
            )
        self.devices.set_power_limit(watts)

    def _begin(self, name: str) -> None:
        assert self.monitor is not None
        self.monitor.begin_window(name, restart=True)

    def _end(self, name: str, cancel: bool) -> None:
        assert self.monitor is not None
        m = self.monitor.end_window(name, cancel=cancel)
        if not cancel:
            self.group.gather(m)

    def receive(self, *expected: str) -> tuple:
        """Rank 0's next message whose op is one of ``expected``, handling on the way the ops this rank
        has handlers for; raises :class:`LeaderFailed` on rank 0's error and :class:`ProtocolError` for
        any other op."""
        while True:
            msg = self.group.broadcast(None)
            op = msg[0]
            if op in expected:
                return msg
            handler = self.handlers.get(op)
            if handler is not None:
                handler(*msg[1:])
                continue
            if op == "error":
                raise LeaderFailed(f"rank 0 failed, so rank {self.group.rank} stops too: {msg[1]}")
            raise ProtocolError(
                f"rank {self.group.rank} expected {' or '.join(expected)} from rank 0 but got {op}: the ranks' calls "
                "diverged; every rank must make the same zeus calls in the same order"
            )

    def follow(self, point: str) -> Any:
        """The result of rank 0's decision ``point`` (:func:`lead`), or its error, raised here."""
        return self.receive(point)[1]


__all__ = [
    "SINGLE",
    "Follower",
    "LeaderFailed",
    "MirroredDevices",
    "MirroredMonitor",
    "ProcessGroup",
    "ProtocolError",
    "SingleProcess",
    "agree",
    "all_ok",
    "combine_measurements",
    "decide",
    "launched_local_rank",
    "launched_world_size",
    "lead",
    "process_group",
    "ranks_charged",
]

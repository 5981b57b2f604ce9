"""A device's energy charged to the processes on it: idle and active, the active part by SM share.

Why an estimate, and which one: NVML measures a whole GPU (a MIG slice has no energy counter of
its own), so when several processes share a GPU -- time slicing, MPS, MIG, a notebook beside a
training job -- no driver says how much each one drew. This module splits a window's measured
energy the way Kepler does (and says so on every figure: :attr:`Attribution.estimate`):

* **idle**: ``idle_w x the window's duration`` (never more than the energy measured). ``idle_w`` is
  the device's power with no process on it: a value the operator configured, else the lowest power
  the device plugin saw while no compute process ran (learned per device), else unknown, and then
  everything counts as active (:attr:`Attribution.idle_source` says which).
* **active**: the rest, ``total - idle``, shared among the processes by their SM utilisation over
  the window (NVML's per-process samples: each process's ``smUtil`` summed over the samples the
  driver kept since the window began, :class:`ProcessActivity.sm`). A process at 30 % and one at
  10 % share the active energy 3:1 whatever the GPU's total utilisation.
  On AMD GPUs the weights are each process's GFX engine time in the window instead (``gfx-time``:
  the difference of the running totals amdsmi lists per process, :mod:`zeus_plugins_amdsmi.processes`).
* each process's **idle** part is the idle energy in proportion to its active share (a GPU held by
  one job idles for that job), so the processes' figures and :attr:`Attribution.unattributed_j`
  sum to the energy measured.

Fallbacks, each flagged by :attr:`Attribution.basis`: no per-process sample in the window (NVML's
``NOT_FOUND``: nothing ran on the SMs, or the window was shorter than the driver's sampling) but
processes hold the GPU: the active energy is split equally among them (``equal``); no process at
all: nothing is charged and the whole energy is :attr:`~Attribution.unattributed_j` (``none``).
On MIG (:attr:`Attribution.scope`): ``mig-instance`` where the driver gives per-process samples
on each instance (a process's share is its ``smUtil`` weighted by its instance's share of the
GPU's slices); ``whole-gpu`` where it refuses them (``NOT_SUPPORTED``, most drivers), and then the
GPU's processes share its active energy equally.

Limits, said here once: SM utilisation is the fraction of time a kernel ran, not the power a
kernel drew (a memory-bound kernel counts as much as a compute-bound one); memory, copy engines
and the idle floor are charged through the same SM share; NVML keeps a bounded buffer of samples
(a few seconds to minutes, by driver), so in a window longer than that only its last part sets
the shares; a process in another PID namespace (a container) appears with the host's PID.

This is a contract module: attrs only, nothing of the engine. A device group that can say who ran
on it implements :class:`ProcessActivityReadings`; :class:`zeus_core.windows.Monitor` then attaches
an :class:`Attribution` per device to each window's :class:`~zeus_core.measurement.Measurement`.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

#: where the per-process figures come from: ``process`` (per-process samples of a whole GPU),
#: ``mig-instance`` (per-process samples of each MIG instance) or ``whole-gpu`` (no per-process
#: samples: MIG on a driver that refuses them; the processes share equally)
SCOPES = ("process", "mig-instance", "whole-gpu")
#: how the active energy was shared: ``sm`` (SM utilisation, NVML), ``gfx-time`` (each process's GFX
#: engine time in the window, amdsmi), ``equal`` (no activity said: equal shares among the processes
#: holding the device), ``none`` (no process: nothing charged)
BASES = ("sm", "gfx-time", "equal", "none")
#: where the idle power came from: ``configured``, ``learned`` (the lowest power seen with no
#: process on the device) or ``none`` (unknown: every joule counts as active)
IDLE_SOURCES = ("configured", "learned", "none")


@attrs.frozen
class ProcessActivity:
    """What the driver says of one process on a device over a window.

    ``sm``: its activity weight in its device's basis (:attr:`DeviceActivity.basis`): for ``sm``, its
    ``smUtil`` (percent) summed over the samples of the window, already scaled to the whole device on
    MIG; for ``gfx-time``, the nanoseconds the GFX engine ran its work in the window; 0 when the
    driver said nothing of it.
    ``instance``: its MIG instance (``""`` outside MIG). ``user`` and ``command``: from ``/proc``
    when this process may read them (:func:`describe_process`), ``""`` otherwise."""

    pid: int
    sm: float = 0.0
    instance: str = ""
    user: str = ""
    command: str = ""


@attrs.frozen
class DeviceActivity:
    """Who ran on one device over a window, and its idle power (see the module's docstring).

    ``basis``: what the processes' weights measure, the :data:`BASES` their shares are made by when
    any weight is positive (``sm``: NVML's SM utilisation; ``gfx-time``: amdsmi's GFX engine time)."""

    processes: tuple[ProcessActivity, ...] = ()
    scope: str = "process"
    idle_w: float | None = None
    idle_source: str = "none"
    note: str = ""
    basis: str = "sm"


@attrs.frozen
class ProcessEnergy:
    """One process's share of a device's energy in a window, in joules (an estimate)."""

    pid: int
    active_j: float
    idle_j: float
    share: float  # its fraction of the active energy
    user: str = ""
    command: str = ""
    instance: str = ""

    @property
    def energy_j(self) -> float:
        """Its active and idle parts together."""
        return self.active_j + self.idle_j

    def as_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "energy_j": self.energy_j,
            "active_j": self.active_j,
            "idle_j": self.idle_j,
            "share": self.share,
            "user": self.user,
            "command": self.command,
            "instance": self.instance,
        }


@attrs.frozen
class Attribution:
    """One device's energy in one window, split (:func:`attribute`; every figure an estimate).

    ``total_j = idle_j + active_j = sum(process energy_j) + unattributed_j``. ``observer``: the PID of
    the process whose monitor measured the window (the job's own process on this device: on a window
    combined across ranks, each GPU's rank's), so that rank 0 knows every rank's process; 0 where no
    monitor did (the daemon's accounting)."""

    total_j: float
    idle_j: float
    active_j: float
    processes: tuple[ProcessEnergy, ...] = ()
    unattributed_j: float = 0.0
    scope: str = "process"
    basis: str = "none"
    idle_source: str = "none"
    note: str = ""
    estimate: bool = True
    observer: int = 0

    @property
    def whole_gpu(self) -> bool:
        """True where the driver gave no per-process samples on a MIG GPU (equal shares)."""
        return self.scope == "whole-gpu"

    def charged_j(self, pids: Iterable[int]) -> float:
        """The energy charged to the processes ``pids`` (their active and idle parts)."""
        wanted = set(pids)
        return float(sum(p.energy_j for p in self.processes if p.pid in wanted))

    def as_json(self) -> dict[str, Any]:
        return {
            "total_j": self.total_j,
            "idle_j": self.idle_j,
            "active_j": self.active_j,
            "unattributed_j": self.unattributed_j,
            "scope": self.scope,
            "basis": self.basis,
            "idle_source": self.idle_source,
            "estimate": self.estimate,
            "note": self.note,
            "processes": [p.as_json() for p in self.processes],
        }


@runtime_checkable
class ProcessActivityReadings(Protocol):
    """A device group that can say which processes ran on each device since a moment.

    ``read_process_activity(since)``: per device name, a :class:`DeviceActivity` over the time
    since ``since`` (Unix time, seconds: NVML's samples are stamped with the host's clock). A
    device it knows nothing of is left out.

    Example::

        def read_process_activity(self, since: float) -> dict[str, DeviceActivity]:
            return {"gpu0": DeviceActivity((ProcessActivity(pid=1234, sm=75.0),), idle_w=60.0, idle_source="configured")}
    """

    def read_process_activity(self, since: float) -> dict[str, DeviceActivity]: ...


def attribute(total_j: float, elapsed_s: float, activity: DeviceActivity, observer: int = 0) -> Attribution:
    """Split ``total_j``, measured over ``elapsed_s`` seconds, among ``activity``'s processes
    (the model and its fallbacks: the module's docstring); ``observer``: :attr:`Attribution.observer`."""
    total = max(0.0, float(total_j))
    idle_w = activity.idle_w if activity.idle_w is not None and activity.idle_w > 0 else None
    idle = min(total, idle_w * max(0.0, elapsed_s)) if idle_w is not None else 0.0
    active = total - idle
    source = activity.idle_source if idle_w else "none"
    procs = _merge(activity.processes)
    weights = {p.pid: max(0.0, p.sm) for p in procs} if activity.scope != "whole-gpu" else {}
    if sum(weights.values()) > 0:
        basis = activity.basis
    elif procs:
        basis, weights = "equal", {p.pid: 1.0 for p in procs}
    else:
        return Attribution(total, idle, active, (), total, activity.scope, "none", source, activity.note, True, observer)
    whole = sum(weights.values())
    charged = tuple(
        ProcessEnergy(
            p.pid, active * weights[p.pid] / whole, idle * weights[p.pid] / whole, weights[p.pid] / whole, p.user, p.command, p.instance
        )
        for p in procs
        if weights[p.pid] > 0
    )
    return Attribution(total, idle, active, charged, 0.0, activity.scope, basis, source, activity.note, True, observer)


def _merge(processes: Iterable[ProcessActivity]) -> list[ProcessActivity]:
    """One entry per PID (a PID listed twice, e.g. by two MIG instances, has its weights summed), by PID."""
    out: dict[int, ProcessActivity] = {}
    for p in processes:
        seen = out.get(p.pid)
        out[p.pid] = (
            p if seen is None else attrs.evolve(seen, sm=seen.sm + p.sm, user=seen.user or p.user, command=seen.command or p.command)
        )
    return [out[pid] for pid in sorted(out)]


def attribute_all(
    energy: Mapping[str, float], elapsed_s: float, activity: Mapping[str, DeviceActivity], observer: int = 0
) -> dict[str, Attribution]:
    """:func:`attribute` for every device of ``energy`` that ``activity`` describes."""
    return {name: attribute(energy[name], elapsed_s, act, observer) for name, act in activity.items() if name in energy}


def charged_to(windows: Iterable[Mapping[str, Attribution]], pids: Iterable[int] | None = None) -> dict[str, Any] | None:
    """What processes ``pids`` were charged over ``windows`` (each window's attributions by device):
    ``{"energy_j", "basis"}`` (the windows' bases joined by ``+``, ``whole-gpu`` for that scope); None
    where no window listed any of them (a driver that lists no process, a process it does not see).
    ``pids`` None: each device's own observer (:attr:`Attribution.observer`), the job's process that
    measured it -- every rank's, each on its own GPUs, on windows combined across ranks (a PID is matched
    only on the devices its own rank measured: ranks on other nodes have PIDs of other namespaces, and
    two ranks on one GPU each measured that GPU once)."""
    given = set(pids) if pids is not None else None
    total, bases, seen = 0.0, set(), False
    for window in windows:
        for att in window.values():
            wanted = given if given is not None else {att.observer}
            if any(p.pid in wanted for p in att.processes):
                seen = True
                total += att.charged_j(wanted)
                bases.add("whole-gpu" if att.whole_gpu else att.basis)
    return {"energy_j": total, "basis": "+".join(sorted(bases))} if seen else None


def describe_process(pid: int, proc: str = "/proc") -> tuple[str, str]:
    """(user name, command line) of ``pid`` from ``/proc``; ``""`` for what cannot be read (a
    process gone, another PID namespace, a ``/proc`` mounted with ``hidepid``)."""
    user = command = ""
    try:
        with open(os.path.join(proc, str(pid), "status")) as f:
            for line in f:
                if line.startswith("Uid:"):
                    uid = int(line.split()[1])
                    try:
                        user = pwd.getpwuid(uid).pw_name
                    except KeyError:
                        user = str(uid)
                    break
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as fb:
            command = fb.read(4096).replace(b"\0", b" ").decode(errors="replace").strip()
    except (OSError, ValueError, IndexError):
        pass
    return user, command


class IdlePower:
    """Each device's idle power, the idle part of attribution: ``configured`` (the operator's value, for
    every device) where given, else ``learned`` (the lowest power read while no process held the device:
    a device plugin reads it at each window's end where the device is free), else unknown (``none``)."""

    def __init__(self, configured_w: float | None = None) -> None:
        self.configured_w = configured_w
        self._learned: dict[str, float] = {}

    def of(self, name: str, free: bool, read_power: Callable[[], float | None]) -> tuple[float | None, str]:
        """(idle W or None, its source) of device ``name``; ``free``: no process holds it now, so a power
        reading (``read_power()``, only then called) is an idle one."""
        if self.configured_w is not None:
            return self.configured_w, "configured"
        if free:
            try:
                now = read_power()
            except Exception:  # noqa: BLE001 - no power reading: nothing learned this time
                now = None
            if now is not None and now > 0:
                self._learned[name] = min(now, self._learned.get(name, now))
        learned = self._learned.get(name)
        return (learned, "learned") if learned is not None else (None, "none")


class ProcessNames:
    """(user, command) of each PID (:func:`describe_process`), read from ``/proc`` once per PID: a
    window's end is a training loop's hot path. Forgets everything past ``limit`` PIDs."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._known: dict[int, tuple[str, str]] = {}

    def __call__(self, pid: int) -> tuple[str, str]:
        if pid not in self._known:
            if len(self._known) >= self.limit:
                self._known.clear()
            self._known[pid] = describe_process(pid)
        return self._known[pid]


__all__ = [
    "BASES",
    "IDLE_SOURCES",
    "SCOPES",
    "Attribution",
    "DeviceActivity",
    "IdlePower",
    "ProcessActivity",
    "ProcessActivityReadings",
    "ProcessEnergy",
    "ProcessNames",
    "attribute",
    "attribute_all",
    "charged_to",
    "describe_process",
]

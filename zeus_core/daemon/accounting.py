"""``zeus daemon``'s energy accounting: every GPU's energy charged to the processes, and the Slurm jobs, on it.

Why in the daemon, continuously: a job's processes come and go, NVML keeps per-process samples
for a bounded time, and a Slurm epilog runs after the job's processes are gone; only a process
that watches the GPUs the whole time can say what each job drew from a shared GPU. The
accountant asks each GPU service that can say who ran on its GPUs (an operation
``<service>.read_processes``: the energy counter and a :class:`~zeus_core.attribution.DeviceActivity`
since the last time) every :data:`INTERVAL_S`, and once more before each answer, splits the
energy drawn since by :func:`zeus_core.attribution.attribute` (idle and active, the active part
by SM share, on AMD GPUs by GFX engine time; every figure an estimate; a reading without samples, closer to the last than the
driver's sampling period, keeps the last samples' shares) and adds each process's part to its running total and to
its Slurm job's. A process's scheduler context (:func:`zeus_core.scheduler.context`: Slurm job,
Kubernetes pod and namespace where the pod spec gives them, torchrun rank) is read once, while it
runs, from ``/proc/<pid>/environ``, its Slurm job from its cgroup (``.../job_<id>/...``, Slurm's
cgroup plugin) where the environment does not say; the daemon runs as root, so it may read them.

``GET /gpu/get_attributed_energy`` (``gpu_ids`` optional; an addition to upstream's API) answers
each GPU's totals since the accountant started: ``total_j``, ``idle_j``, ``active_j``,
``unattributed_j`` (energy drawn while no process held the GPU), ``processes_j`` (charged to
processes), ``bases`` and ``scopes`` (how the shares were made: :data:`zeus_core.attribution.BASES`,
:data:`~zeus_core.attribution.SCOPES`), ``processes`` (``pid``, ``user``, ``command``,
``slurm_job_id``, ``scheduler``: its whole context, ``energy_j``), ``jobs`` (``{job id: J}``) and ``estimate: true``. The totals start
when the daemon does: a job that began before it is charged from then on.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from zeus_core.attribution import DeviceActivity, ProcessActivity, attribute
from zeus_core.scheduler import context

log = logging.getLogger("zeus.daemon")

#: how often the accountant reads the GPUs (s); a request for the totals reads them once more first
INTERVAL_S = 1.0
#: the most processes remembered per GPU (the oldest totals go first; their jobs' totals stay)
MAX_PROCESSES = 4096
_CGROUP_JOB = re.compile(r"/job_(\d+)(?:/|$)")


def scheduler_of(pid: int, proc: str = "/proc") -> dict[str, str]:
    """The scheduler's context of a process (:func:`zeus_core.scheduler.context` of its environment:
    Slurm job, Kubernetes pod, torchrun rank; ``{}`` where none or unreadable), its Slurm job from its
    cgroup (``.../job_<id>/...``) where its environment does not say."""
    env: dict[str, str] = {}
    try:
        with open(f"{proc}/{pid}/environ", "rb") as fb:
            for entry in fb.read(1 << 20).split(b"\0"):
                key, sep, value = entry.decode(errors="replace").partition("=")
                if sep:
                    env[key] = value
    except OSError:
        pass
    if not env.get("SLURM_JOB_ID"):
        try:
            with open(f"{proc}/{pid}/cgroup") as f:
                m = _CGROUP_JOB.search(f.read())
            if m:
                env["SLURM_JOB_ID"] = m.group(1)
        except OSError:
            pass
    # the pod's own service account is not the daemon's: no namespace file is read for it
    return context(env, service_account=Path("/nonexistent")) if env else {}


def slurm_job_of(pid: int, proc: str = "/proc") -> str:
    """The Slurm job a process runs in (``""`` where none or unreadable)."""
    return scheduler_of(pid, proc).get("slurm_job_id", "")


class _Gpu:
    """One GPU's running totals."""

    def __init__(self) -> None:
        self.last: tuple[float, float, int] | None = None  # (monotonic, Unix time, energy mJ) of the last reading
        self.since_ms = int(time.time() * 1000)
        self.totals = dict.fromkeys(("total_j", "idle_j", "active_j", "unattributed_j", "processes_j"), 0.0)
        self.bases: set[str] = set()
        self.scopes: set[str] = set()
        self.processes: dict[int, dict[str, Any]] = {}
        self.jobs: dict[str, float] = {}
        self.weights: dict[int, float] = {}  # the SM weights of the last reading that had samples

    def as_json(self) -> dict[str, Any]:
        return {
            "since_ms": self.since_ms,
            **self.totals,
            "bases": sorted(self.bases),
            "scopes": sorted(self.scopes),
            "estimate": True,
            "processes": [{"pid": pid, **p} for pid, p in sorted(self.processes.items())],
            "jobs": dict(sorted(self.jobs.items())),
        }


class Accountant:
    """Charges each GPU's energy to the processes and Slurm jobs on it (see the module's docstring).

    ``read(index, since)`` returns GPU ``index``'s ``{"energy_mj", "activity"}`` (the service's
    ``read_processes``); ``gpus`` are the indices it can read."""

    def __init__(self, gpus: list[int], read: Callable[[int, float], dict[str, Any]], interval_s: float = INTERVAL_S) -> None:
        self._read = read
        self._gpus = {i: _Gpu() for i in gpus}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._context_of: dict[int, dict[str, str]] = {}
        self.interval_s = interval_s
        self._thread: threading.Thread | None = None
        if gpus:
            self.tick()  # the starting readings
            self._thread = threading.Thread(target=self._run, name="zeus-accounting", daemon=True)
            self._thread.start()

    @property
    def gpus(self) -> list[int]:
        return list(self._gpus)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - a failing read must not end the accounting of the other GPUs
                log.exception("energy accounting failed")

    def tick(self) -> None:
        """Read every GPU once and charge the energy drawn since the last reading."""
        with self._lock:
            for i, g in self._gpus.items():
                try:
                    self._one(i, g)
                except Exception as e:  # noqa: BLE001 - one GPU's failure: logged, the others go on
                    log.warning("energy accounting: GPU %d: %s", i, e)

    def _one(self, i: int, g: _Gpu) -> None:
        mono, wall = time.monotonic(), time.time()
        since = g.last[1] if g.last is not None else wall
        got = self._read(i, since)
        energy_mj = int(got["energy_mj"])
        last, g.last = g.last, (mono, wall, energy_mj)
        if last is None:
            return
        delta_j = (energy_mj - last[2]) / 1000.0
        if delta_j < 0:  # the counter went back (a driver reload): start over from here
            return
        raw = dict(got["activity"])
        procs = tuple(ProcessActivity(**p) for p in raw.pop("processes", ()))
        if any(p.sm > 0 for p in procs):
            g.weights = {p.pid: p.sm for p in procs}
        elif procs and any(g.weights.get(p.pid, 0.0) > 0 for p in procs):
            # no sample since the last reading (readings closer than the driver's sampling period):
            # the processes still there keep the shares of the last samples, not equal ones
            procs = tuple(attrs.evolve(p, sm=g.weights.get(p.pid, 0.0)) for p in procs)
        att = attribute(delta_j, mono - last[0], DeviceActivity(procs, **raw))
        for key, value in (
            ("total_j", att.total_j),
            ("idle_j", att.idle_j),
            ("active_j", att.active_j),
            ("unattributed_j", att.unattributed_j),
            ("processes_j", att.total_j - att.unattributed_j),
        ):
            g.totals[key] += value
        g.bases.add(att.basis)
        g.scopes.add(att.scope)
        for p in att.processes:
            ctx = self._context_of.get(p.pid)
            if ctx is None:
                ctx = self._context_of[p.pid] = scheduler_of(p.pid)
            job = ctx.get("slurm_job_id", "")
            seen = g.processes.pop(p.pid, None) or {
                "user": p.user,
                "command": p.command,
                "slurm_job_id": job,
                "scheduler": ctx,
                "energy_j": 0.0,
            }
            seen["energy_j"] += p.energy_j
            g.processes[p.pid] = seen  # the most recently charged last: the oldest are dropped first
            if job:
                g.jobs[job] = g.jobs.get(job, 0.0) + p.energy_j
        while len(g.processes) > MAX_PROCESSES:
            g.processes.pop(next(iter(g.processes)))
        if len(self._context_of) > 4 * MAX_PROCESSES:
            self._context_of.clear()

    def totals(self, ids: list[int]) -> dict[str, Any]:
        """The totals of GPUs ``ids`` (brought up to date first), as the route answers them."""
        self.tick()
        with self._lock:
            return {str(i): self._gpus[i].as_json() for i in ids}

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


__all__ = ["INTERVAL_S", "Accountant", "scheduler_of", "slurm_job_of"]

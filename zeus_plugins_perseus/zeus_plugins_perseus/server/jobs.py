"""The plan server's state, without any web framework: jobs, their ranks, uploaded profiles, plans.

A job is a pipeline of ``pp_degree`` stages, each replicated ``dp_degree x
tp_degree`` times. Every rank registers (with the SM clocks its GPU supports)
and asks for its schedule: the ordered (instruction, clock) list of its stage
in the plan chosen by the job's ``deadline_s`` or ``max_slowdown`` from the
frontier of a profile. The profile is the one ranks uploaded for this job once
it covers every stage, else the server's (``zeus perseus serve --profile``).

Uploads from replicas of one stage are merged per (instruction, clock): the
time is the slowest replica's (the stage finishes with it) and the energy the
mean per GPU, the unit of the profile format. A new upload invalidates the
job's plan, so the next schedule request plans on the newest data.
"""

from __future__ import annotations

import asyncio
import errno
import json
import math
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from zeus_plugins_perseus.background import Background, WorkerDied
from zeus_plugins_perseus.dag_times import iteration_time
from zeus_plugins_perseus.profile import REQUIRED_COLUMNS, InstructionProfile
from zeus_plugins_perseus.schedule import BACKWARD, FORWARD, build_dag


class JobError(ValueError):
    """A request that cannot be served; ``status`` is the HTTP status it maps to."""

    status = 400


class NotFound(JobError):
    status = 404


class Conflict(JobError):
    status = 409


class TooLarge(JobError):
    """A request within the schema but beyond the server's configured limits."""

    status = 422


class TooMany(JobError):
    """The server holds as many jobs as it may; idle ones are dropped after ``job_idle_s``."""

    status = 429


@attrs.frozen
class ServerLimits:
    """What one client may make the server hold or compute (``zeus perseus serve --max-...``).

    The plan server is reachable by every rank of a cluster, so no request may
    make it hold unbounded memory, write unbounded files or plan an arbitrarily
    large pipeline. Request bodies past ``max_body_bytes`` are refused by
    FastAPI (413) before they are parsed; the rest is checked per request (422)
    or when a job is registered (429 when ``max_jobs`` jobs are held and none
    has been idle for ``job_idle_s``). Each job's dump folder holds at most
    three files, rewritten in place, and goes when the job does.
    """

    max_body_bytes: int = attrs.field(default=1 << 20, validator=attrs.validators.ge(1024))
    max_jobs: int = attrs.field(default=64, validator=attrs.validators.ge(1))
    job_idle_s: float = attrs.field(default=7 * 86400.0, validator=attrs.validators.gt(0))
    max_stages: int = attrs.field(default=128, validator=attrs.validators.ge(1))
    max_microbatches: int = attrs.field(default=512, validator=attrs.validators.ge(1))
    max_world_size: int = attrs.field(default=1 << 16, validator=attrs.validators.ge(1))
    #: instructions per iteration (2 x stages x microbatches): the planner's time and memory grow with it
    #: (16 x 64 = 2048 plans in about 10 CPU-seconds and 300 MB)
    max_instructions: int = attrs.field(default=2048, validator=attrs.validators.ge(2))
    #: an instruction's slowest time over ``unit_time_s``: the length of its cost table (a profile's span)
    max_units_per_instruction: int = attrs.field(default=5000, validator=attrs.validators.ge(1))
    #: the quantised frontier's table: (slowest - fastest critical path, in units) x instructions
    #: (16 x 64 of GPT-3 at 1 ms: 12.8 million)
    max_frontier_cells: int = attrs.field(default=32_000_000, validator=attrs.validators.ge(1))
    max_profile_rows: int = attrs.field(default=1 << 15, validator=attrs.validators.ge(1))
    #: uploaded profile rows held over all jobs
    max_total_profile_rows: int = attrs.field(default=1 << 17, validator=attrs.validators.ge(1))
    #: one job's planning process: CPU seconds and address space (bytes) before it is ended
    plan_cpu_s: float = attrs.field(default=120.0, validator=attrs.validators.gt(0))
    plan_memory_bytes: int = attrs.field(default=3 << 30, validator=attrs.validators.ge(1 << 28))
    #: jobs planned at the same time (429 beyond)
    max_planning: int = attrs.field(default=2, validator=attrs.validators.ge(1))
    #: jobs whose quantised frontier has at most this many cells take milliseconds and a few MB to plan:
    #: they are planned in the server process (on a thread), without a process of their own to start
    inline_frontier_cells: int = attrs.field(default=100_000, validator=attrs.validators.ge(0))


@attrs.frozen
class PlannerDefaults:
    """What a job that does not say otherwise is planned with."""

    profile: InstructionProfile | None = None
    blocking_power_w: float | None = None
    unit_time_s: float = 0.001
    model: str = "measured"


def plan_job(
    profile: InstructionProfile,
    stages: int,
    microbatches: int,
    schedule: str,
    unit_time_s: float,
    blocking_power_w: float,
    model: str,
    deadline_s: float | None,
    max_slowdown: float | None,
) -> dict:
    """Plan a job and keep what the server answers with: the chosen plan and the frontier's numbers.

    Runs in the job's planning process; the frontier itself (thousands of
    plans) stays there and goes when the process ends.
    """
    from zeus_plugins_perseus.planner import plan_frontier, plan_text

    ps = plan_frontier(
        profile,
        stages=stages,
        microbatches=microbatches,
        schedule=schedule,
        unit_time_s=unit_time_s,
        blocking_power_w=blocking_power_w,
        model=model,
        workers=1,
        deadline_s=deadline_s,
        max_slowdown=max_slowdown,
    )
    k = ps.choose(deadline_s=deadline_s, max_slowdown=max_slowdown)
    plan = ps.plan_json(k)
    return {
        **plan,
        "plans": len(ps),
        "limit_s": ps.limit_s(deadline_s, max_slowdown),
        "meets_limit": ps.meets(k, deadline_s, max_slowdown),
        "max_frequency_time_s": ps.max_freq_time_s,
        "max_frequency_energy_j": ps.max_freq_energy_j,
        "plan_text": plan_text(plan),
    }


class Planning:
    """One job's planning, in a process of its own with the server's budget; :meth:`close` ends it."""

    def __init__(self, args: tuple, source: str, limits: ServerLimits, inline: bool = False) -> None:
        self.source, self.limits = source, limits
        self.cancelled = False
        self.waiters = 0  # clients of schedule_async waiting for it
        # inline: planned by the first waiter's thread (a small job: see ServerLimits.inline_frontier_cells)
        self._worker = (
            Background(workers=1) if inline else Background(workers=2, cpu_s=limits.plan_cpu_s, memory_bytes=limits.plan_memory_bytes)
        )
        self._result = self._worker.submit(plan_job, *args)
        self._lock = threading.Lock()
        self._outcome: Any = None
        self._done = False

    def wait(self) -> Any:
        """The plan (:func:`plan_job`), or the exception planning ended with."""
        with self._lock:
            if not self._done:
                try:
                    self._outcome = self._result.result()
                except BaseException as e:  # noqa: BLE001 - handed to the caller as the outcome
                    self._outcome = e
                self._done = True
        return self._outcome

    @property
    def exit_status(self) -> int | None:
        return self._worker.exit_status

    def close(self) -> None:
        self._worker.kill()


def _planning_error(job: Job, planning: Planning, error: BaseException) -> JobError:
    """The 4xx answer for a planning that ended without a plan."""
    lim = planning.limits
    if planning.cancelled:
        return Conflict(
            f"planning job {job.job_id} was cancelled: the job was deleted, got new profiling results, or every client waiting for it left"
        )
    if isinstance(error, WorkerDied):
        status = planning.exit_status
        if status in (-signal.SIGXCPU, -signal.SIGKILL):
            return TooLarge(
                f"planning job {job.job_id} used up this server's budget of {lim.plan_cpu_s:g} CPU-seconds "
                "per job (plan_cpu_s): register with a larger unit_time_s or fewer microbatches"
            )
        return TooLarge(
            f"planning job {job.job_id} ended without a plan (exit status {status}), past this server's "
            f"budget of {lim.plan_memory_bytes >> 20} MiB per job (plan_memory_bytes)?"
        )
    if isinstance(error, MemoryError) or (isinstance(error, OSError) and error.errno == errno.ENOMEM):
        return TooLarge(
            f"planning job {job.job_id} needs more than this server's budget of "
            f"{lim.plan_memory_bytes >> 20} MiB per job (plan_memory_bytes): register with a larger "
            "unit_time_s or fewer microbatches"
        )
    return Conflict(f"cannot plan job {job.job_id} on the {planning.source} profile: {error}")


@attrs.define
class Job:
    job_id: str
    spec: dict[str, Any]  # the validated registration request
    ranks: dict[int, dict[str, Any]] = attrs.field(factory=dict)
    # (stage, instruction, MHz) -> rank -> (seconds, joules)
    uploads: dict[tuple[int, str, int], dict[int, tuple[float, float]]] = attrs.field(factory=dict)
    plan: dict[str, Any] | None = None  # what planning kept of the job's frontier (:func:`plan_job`)
    plan_source: str | None = None
    planning: Planning | None = None  # the planning process while it runs
    lock: threading.Lock = attrs.field(factory=threading.Lock)
    last_seen: float = attrs.field(factory=time.time)

    @property
    def stages(self) -> int:
        return int(self.spec["pp_degree"])

    def merged_rows(self) -> list[tuple[int, str, int, float, float]]:
        """(stage, instruction, MHz, slowest replica's time, mean energy per GPU) of every upload."""
        rows = []
        for (s, inst, f), by_rank in sorted(self.uploads.items()):
            times = [t for t, _ in by_rank.values()]
            energies = [e for _, e in by_rank.values()]
            rows.append((s, inst, f, max(times), sum(energies) / len(energies)))
        return rows

    def uploaded_profile(self) -> InstructionProfile | None:
        """The merged uploads, or None unless every stage has a forward and a backward."""
        have = {(s, i) for s, i, _ in self.uploads}
        if not all((s, i) in have for s in range(self.stages) for i in (FORWARD, BACKWARD)):
            return None
        return InstructionProfile.from_rows(self.merged_rows(), source=f"profiling results uploaded to job {self.job_id}")


class JobManager:
    """Thread-safe registry of jobs (FastAPI runs plain ``def`` endpoints in a thread pool)."""

    def __init__(
        self, defaults: PlannerDefaults | None = None, dump_dir: str | Path | None = None, limits: ServerLimits | None = None
    ) -> None:
        self.defaults = defaults or PlannerDefaults()
        self.limits = limits or ServerLimits()
        self.dump_dir = Path(dump_dir) if dump_dir is not None else None
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._jobs)

    # -- registration --

    def register_job(self, spec: dict[str, Any]) -> str:
        pp, dp, tp = spec["pp_degree"], spec["dp_degree"], spec["tp_degree"]
        if spec["world_size"] != pp * dp * tp:
            raise JobError(f"world_size {spec['world_size']} must equal pp_degree x dp_degree x tp_degree = {pp * dp * tp}")
        if spec.get("deadline_s") is not None and spec.get("max_slowdown") is not None:
            raise JobError("give deadline_s or max_slowdown, not both")
        lim = self.limits
        for key, value, most in (
            ("pp_degree", pp, lim.max_stages),
            ("microbatches", spec["microbatches"], lim.max_microbatches),
            ("world_size", spec["world_size"], lim.max_world_size),
        ):
            if value > most:
                raise TooLarge(f"{key} {value} is above this server's limit of {most}")
        if 2 * pp * spec["microbatches"] > lim.max_instructions:
            raise TooLarge(
                f"{pp} stages x {spec['microbatches']} microbatches make {2 * pp * spec['microbatches']} "
                f"instructions per iteration, above this server's limit of {lim.max_instructions}"
            )
        job_id = f"{time.strftime('%Y%m%d-%H%M%S')}-pp{pp}-dp{dp}-tp{tp}-{secrets.token_hex(4)}"
        with self._lock:
            if len(self._jobs) >= lim.max_jobs:
                self._drop_idle()
            if len(self._jobs) >= lim.max_jobs:
                raise TooMany(
                    f"the server holds {len(self._jobs)} jobs, its limit (max_jobs); DELETE /jobs/{{id}} of finished "
                    f"jobs, or wait: jobs idle for {lim.job_idle_s:g} s are dropped"
                )
            self._jobs[job_id] = Job(job_id, dict(spec))
        self._dump(job_id, "job.json", json.dumps(spec, indent=1))
        return job_id

    def _drop_idle(self) -> None:
        """Forget jobs unseen for ``job_idle_s`` (under the manager's lock), with their dump folders."""
        cutoff = time.time() - self.limits.job_idle_s
        for job_id in [j for j, job in self._jobs.items() if job.last_seen < cutoff]:
            self._forget(job_id)

    def _forget(self, job_id: str) -> None:
        job = self._jobs.pop(job_id)
        self._cancel(job)
        if self.dump_dir is not None:
            shutil.rmtree(self.dump_dir / job_id, ignore_errors=True)

    def delete_job(self, job_id: str) -> dict[str, Any]:
        """Forget a finished job and its dump folder."""
        with self._lock:
            if job_id not in self._jobs:
                raise NotFound(f"no job {job_id!r}")
            self._forget(job_id)
        return {"deleted": job_id}

    def job(self, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise NotFound(f"no job {job_id!r}; register it with POST /jobs first")
        job.last_seen = time.time()
        return job

    def register_rank(self, job_id: str, info: dict[str, Any]) -> dict[str, Any]:
        job = self.job(job_id)
        s = job.spec
        limits = {"rank": s["world_size"], "pp_rank": s["pp_degree"], "dp_rank": s["dp_degree"], "tp_rank": s["tp_degree"]}
        for key, n in limits.items():
            if not 0 <= info[key] < n:
                raise JobError(f"{key} {info[key]} is out of range: the job has {n} (0..{n - 1})")
        with job.lock:
            old = job.ranks.get(info["rank"])
            if old is not None and old != info:
                raise Conflict(f"rank {info['rank']} is already registered with {old}; a rank registers once per job")
            for other in job.ranks.values():
                same = all(other[k] == info[k] for k in ("pp_rank", "dp_rank", "tp_rank"))
                if same and other["rank"] != info["rank"]:
                    raise Conflict(
                        f"rank {other['rank']} already holds pp/dp/tp ranks {info['pp_rank']}/{info['dp_rank']}/{info['tp_rank']}"
                    )
            job.ranks[info["rank"]] = dict(info)
            return {"job_id": job_id, "registered": len(job.ranks), "world_size": s["world_size"]}

    # -- profiling results --

    def upload_profile(self, job_id: str, rank: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
        job = self.job(job_id)
        info = job.ranks.get(rank)
        if info is None:
            raise NotFound(f"rank {rank} is not registered in job {job_id}; POST /jobs/{job_id}/ranks first")
        stage = info["pp_rank"]
        with job.lock:
            new_keys = {(stage, r["instruction"], int(r["frequency"])) for r in rows} - job.uploads.keys()
            held = sum(len(j.uploads) for j in list(self._jobs.values()))
            if held + len(new_keys) > self.limits.max_total_profile_rows:
                raise TooMany(
                    f"the server holds {held} uploaded profile rows over all jobs; {len(new_keys)} more would "
                    f"pass its limit of {self.limits.max_total_profile_rows} (max_total_profile_rows): "
                    "DELETE /jobs/{id} of finished jobs"
                )
            if len(job.uploads) + len(new_keys) > self.limits.max_profile_rows:
                raise TooLarge(
                    f"job {job_id} would hold {len(job.uploads) + len(new_keys)} profile rows, above this "
                    f"server's limit of {self.limits.max_profile_rows} (one per stage, instruction and clock)"
                )
            for r in rows:
                job.uploads.setdefault((stage, r["instruction"], int(r["frequency"])), {})[rank] = (float(r["time"]), float(r["energy"]))
            self._cancel(job)  # replan on the new data
            job.plan, job.plan_source = None, None
            complete = job.uploaded_profile()
        if complete is not None and self.dump_dir is not None:
            complete.to_csv(self.dump_dir / job_id / "profile.csv")
        return {"rows": len(rows), "stage": stage, "profile_complete": complete is not None}

    def profile_csv(self, job_id: str) -> str:
        job = self.job(job_id)
        with job.lock:
            lines = [",".join(REQUIRED_COLUMNS)]
            lines += [f"{s},{inst},{f},{t!r},{e!r}" for s, inst, f, t, e in job.merged_rows()]
        return "\n".join(lines) + "\n"

    # -- plans --

    def _planning_args(self, job: Job) -> tuple[tuple, str, bool]:
        """(arguments of :func:`plan_job`, profile source, whether it is small enough to plan inline) for the
        job; refused here if over a limit."""
        s, d = job.spec, self.defaults
        profile = job.uploaded_profile()
        source = "uploaded"
        if profile is None:
            if d.profile is None:
                raise Conflict(
                    "no profile to plan from: upload profiling results for every stage "
                    "(POST /jobs/{id}/profile) or start the server with --profile"
                )
            profile, source = d.profile, "server"
        blocking = s.get("blocking_power_w")
        blocking = d.blocking_power_w if blocking is None else blocking
        if blocking is None:
            raise JobError("blocking_power_w is unknown: give it when registering the job or start the server with --blocking-power-w")
        unit = s.get("unit_time_s") or d.unit_time_s
        lim = self.limits
        slowest = max(float(o.time.max()) for o in profile.options.values())
        if slowest / unit > lim.max_units_per_instruction:
            raise TooLarge(
                f"an instruction of the {source} profile takes {slowest:g} s, "
                f"{slowest / unit:.0f} units of unit_time_s = {unit:g} s; this server plans at most "
                f"{lim.max_units_per_instruction} per instruction (max_units_per_instruction): register "
                "with a larger unit_time_s"
            )
        try:
            profile.check_stages(job.stages, (FORWARD, BACKWARD))
        except ValueError as e:
            raise Conflict(f"cannot plan job {job.job_id} on the {source} profile: {e}") from None
        dag = build_dag(s["schedule"], job.stages, s["microbatches"])
        units = [
            [math.ceil(round(float(t) / unit, 6)) for t in (o.time.min(), o.time.max())]
            for o in (profile.get(op.stage, op.instruction) for op in dag.ops)
        ]
        lo, hi = (np.array(col, dtype=np.int64) for col in zip(*units))
        cells = (int(iteration_time(dag.levels, hi)) - int(iteration_time(dag.levels, lo)) + 1) * dag.n_ops
        if cells > lim.max_frontier_cells:
            raise TooLarge(
                f"the quantised frontier of job {job.job_id} on the {source} profile would hold {cells:,} "
                f"cells (iteration-time units from all slowest to all fastest clocks x instructions), "
                f"above this server's limit of {lim.max_frontier_cells:,} (max_frontier_cells): register "
                "with a larger unit_time_s or fewer microbatches"
            )
        args = (
            profile,
            job.stages,
            s["microbatches"],
            s["schedule"],
            unit,
            blocking,
            s.get("model") or d.model,
            s.get("deadline_s"),
            s.get("max_slowdown"),
        )
        return args, source, cells <= lim.inline_frontier_cells

    def _start_planning(self, job: Job) -> Planning | None:
        """The job's planning (started now if needed, under the job's lock); None once it is planned."""
        if job.plan is not None:
            return None
        if job.planning is None:
            args, source, inline = self._planning_args(job)
            with self._lock:
                busy = sum(1 for j in self._jobs.values() if j.planning is not None)
                if busy >= self.limits.max_planning:
                    raise TooMany(f"this server plans {busy} jobs now, its limit (max_planning); ask again shortly")
                job.planning = Planning(args, source, self.limits, inline)
        return job.planning

    def _finish_planning(self, job: Job, planning: Planning, outcome: Any) -> None:
        """Keep a finished planning's plan (under the job's lock), or raise what it ended with."""
        if job.planning is planning:
            job.planning = None
            planning.close()
        if isinstance(outcome, BaseException):
            raise _planning_error(job, planning, outcome)
        if job.plan is None:
            job.plan, job.plan_source = outcome, planning.source
            self._dump(job.job_id, "plan.json", outcome["plan_text"])

    def _cancel(self, job: Job) -> None:
        """End the job's planning, if any (its waiters get 409)."""
        planning = job.planning
        if planning is not None:
            planning.cancelled = True
            planning.close()
            job.planning = None

    def schedule(self, job_id: str, rank: int) -> dict[str, Any]:
        """The rank's schedule, planning the job first if needed (blocking; see :meth:`schedule_async`)."""
        job, info = self._rank(job_id, rank)
        with job.lock:
            planning = self._start_planning(job)
        if planning is not None:
            outcome = planning.wait()
            with job.lock:
                self._finish_planning(job, planning, outcome)
        return self._answer(job, info, rank)

    async def schedule_async(self, job_id: str, rank: int, client_gone: Callable[[], Awaitable[bool]]) -> dict | None:
        """:meth:`schedule` for an event loop: planning runs in its process while the loop checks the client.

        When every client waiting for a job's plan has gone (``client_gone``),
        its planning is ended; so it is when the job is deleted. None when the
        client left.
        """
        job, info = self._rank(job_id, rank)
        with job.lock:
            planning = self._start_planning(job)
        if planning is not None:
            planning.waiters += 1
            task = asyncio.ensure_future(asyncio.to_thread(planning.wait))
            try:
                while not task.done():
                    await asyncio.wait({task}, timeout=0.2)
                    if not task.done() and await client_gone():
                        return None
            finally:
                planning.waiters -= 1
                if not task.done() and planning.waiters == 0:
                    with job.lock:
                        self._cancel(job)
            with job.lock:
                self._finish_planning(job, planning, task.result())
        return self._answer(job, info, rank)

    def _rank(self, job_id: str, rank: int) -> tuple[Job, dict[str, Any]]:
        job = self.job(job_id)
        info = job.ranks.get(rank)
        if info is None:
            raise NotFound(f"rank {rank} is not registered in job {job_id}; POST /jobs/{job_id}/ranks first")
        return job, info

    def _answer(self, job: Job, info: dict[str, Any], rank: int) -> dict[str, Any]:
        with job.lock:
            plan = job.plan
            if plan is None:  # pragma: no cover - replanned (a new upload) since this request planned
                raise Conflict(f"job {job.job_id} got new profiling results while it was planned; ask again")
            source = job.plan_source
        stage = info["pp_rank"]
        entry = plan["stages"][stage]
        insts, freqs, mbs = entry["instructions"], entry["frequencies"], entry["microbatches"]
        available = set(info.get("available_frequencies") or ())
        missing = sorted({f for f in freqs if available and f not in available}, reverse=True)
        if missing:
            raise Conflict(
                f"the plan needs clocks {missing} MHz that rank {rank}'s GPU does not support; "
                "profile this GPU model or plan with its own profile"
            )
        return {
            "rank": rank,
            "stage": stage,
            "plan": plan["plan"],
            "plans": plan["plans"],
            "profile": source,
            "limit_s": plan["limit_s"],
            "meets_limit": plan["meets_limit"],
            "iteration_time_s": plan["iteration_time_s"],
            "emulated_time_s": plan["emulated_time_s"],
            "emulated_energy_j": plan["emulated_energy_j"],
            "max_frequency_time_s": plan["max_frequency_time_s"],
            "max_frequency_energy_j": plan["max_frequency_energy_j"],
            "schedule": [[i, int(f)] for i, f in zip(insts, freqs)],
            # the microbatch of each instruction: a rank checks them against the order its engine runs
            "microbatches": [int(m) for m in mbs],
            "schedule_name": job.spec["schedule"],
            "stages_count": job.stages,
        }

    def status(self, job_id: str) -> dict[str, Any]:
        job = self.job(job_id)
        with job.lock:
            return {
                "job_id": job_id,
                "spec": job.spec,
                "ranks": sorted(job.ranks),
                "uploaded_rows": len(job.uploads),
                "profile_complete": job.uploaded_profile() is not None,
                "planned": job.plan is not None,
                "planning": job.planning is not None,
                "plan": None if job.plan is None else job.plan["plan"],
                "profile": job.plan_source,
            }

    def _dump(self, job_id: str, name: str, text: str) -> None:
        if self.dump_dir is None:
            return
        folder = self.dump_dir / job_id
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(folder / name)

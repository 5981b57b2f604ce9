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

import json
import secrets
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import attrs

from zeus_plugins_perseus.planner import PlanSet, plan_frontier, plan_text
from zeus_plugins_perseus.profile import REQUIRED_COLUMNS, InstructionProfile
from zeus_plugins_perseus.schedule import BACKWARD, FORWARD


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
    max_jobs: int = attrs.field(default=256, validator=attrs.validators.ge(1))
    job_idle_s: float = attrs.field(default=7 * 86400.0, validator=attrs.validators.gt(0))
    max_stages: int = attrs.field(default=128, validator=attrs.validators.ge(1))
    max_microbatches: int = attrs.field(default=512, validator=attrs.validators.ge(1))
    max_world_size: int = attrs.field(default=1 << 16, validator=attrs.validators.ge(1))
    #: instructions per iteration (2 x stages x microbatches): the planner's time and memory grow with it
    max_instructions: int = attrs.field(default=8192, validator=attrs.validators.ge(2))
    #: an instruction's slowest time over ``unit_time_s``: the length of its cost table
    max_units_per_instruction: int = attrs.field(default=100_000, validator=attrs.validators.ge(1))
    max_profile_rows: int = attrs.field(default=1 << 15, validator=attrs.validators.ge(1))


@attrs.frozen
class PlannerDefaults:
    """What a job that does not say otherwise is planned with."""

    profile: InstructionProfile | None = None
    blocking_power_w: float | None = None
    unit_time_s: float = 0.001
    model: str = "measured"


@attrs.define
class Job:
    job_id: str
    spec: dict[str, Any]  # the validated registration request
    ranks: dict[int, dict[str, Any]] = attrs.field(factory=dict)
    # (stage, instruction, MHz) -> rank -> (seconds, joules)
    uploads: dict[tuple[int, str, int], dict[int, tuple[float, float]]] = attrs.field(factory=dict)
    plans: PlanSet | None = None
    chosen: int | None = None
    plan_source: str | None = None
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

    def __init__(self, defaults: PlannerDefaults | None = None, dump_dir: str | Path | None = None,
                 limits: ServerLimits | None = None) -> None:
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
        for key, value, most in (("pp_degree", pp, lim.max_stages), ("microbatches", spec["microbatches"], lim.max_microbatches),
                                 ("world_size", spec["world_size"], lim.max_world_size)):
            if value > most:
                raise TooLarge(f"{key} {value} is above this server's limit of {most}")
        if 2 * pp * spec["microbatches"] > lim.max_instructions:
            raise TooLarge(f"{pp} stages x {spec['microbatches']} microbatches make {2 * pp * spec['microbatches']} "
                           f"instructions per iteration, above this server's limit of {lim.max_instructions}")
        job_id = f"{time.strftime('%Y%m%d-%H%M%S')}-pp{pp}-dp{dp}-tp{tp}-{secrets.token_hex(4)}"
        with self._lock:
            if len(self._jobs) >= lim.max_jobs:
                self._drop_idle()
            if len(self._jobs) >= lim.max_jobs:
                raise TooMany(f"the server holds {len(self._jobs)} jobs, its limit; DELETE /jobs/{{id}} of finished "
                              f"jobs, or wait: jobs idle for {lim.job_idle_s:g} s are dropped")
            self._jobs[job_id] = Job(job_id, dict(spec))
        self._dump(job_id, "job.json", json.dumps(spec, indent=1))
        return job_id

    def _drop_idle(self) -> None:
        """Forget jobs unseen for ``job_idle_s`` (under the manager's lock), with their dump folders."""
        cutoff = time.time() - self.limits.job_idle_s
        for job_id in [j for j, job in self._jobs.items() if job.last_seen < cutoff]:
            self._forget(job_id)

    def _forget(self, job_id: str) -> None:
        del self._jobs[job_id]
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
                    raise Conflict(f"rank {other['rank']} already holds pp/dp/tp ranks "
                                   f"{info['pp_rank']}/{info['dp_rank']}/{info['tp_rank']}")
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
            if len(job.uploads) + len(new_keys) > self.limits.max_profile_rows:
                raise TooLarge(f"job {job_id} would hold {len(job.uploads) + len(new_keys)} profile rows, above this "
                               f"server's limit of {self.limits.max_profile_rows} (one per stage, instruction and clock)")
            for r in rows:
                job.uploads.setdefault((stage, r["instruction"], int(r["frequency"])), {})[rank] = (
                    float(r["time"]), float(r["energy"]))
            job.plans, job.chosen, job.plan_source = None, None, None  # replan on the new data
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

    def _plan(self, job: Job) -> None:
        """Plan the job if needed (under its lock): from its uploads if complete, else the server's profile."""
        if job.plans is not None:
            return
        s, d = job.spec, self.defaults
        profile = job.uploaded_profile()
        source = "uploaded"
        if profile is None:
            if d.profile is None:
                raise Conflict("no profile to plan from: upload profiling results for every stage "
                               "(POST /jobs/{id}/profile) or start the server with --profile")
            profile, source = d.profile, "server"
        blocking = s.get("blocking_power_w")
        blocking = d.blocking_power_w if blocking is None else blocking
        if blocking is None:
            raise JobError("blocking_power_w is unknown: give it when registering the job or start the server "
                           "with --blocking-power-w")
        unit = s.get("unit_time_s") or d.unit_time_s
        slowest = max(float(o.time.max()) for o in profile.options.values())
        if slowest / unit > self.limits.max_units_per_instruction:
            raise TooLarge(f"an instruction of the {source} profile takes {slowest:g} s, "
                           f"{slowest / unit:.0f} units of unit_time_s = {unit:g} s; this server plans at most "
                           f"{self.limits.max_units_per_instruction} per instruction: register with a larger unit_time_s")
        try:
            plans = plan_frontier(
                profile,
                stages=job.stages,
                microbatches=s["microbatches"],
                schedule=s["schedule"],
                unit_time_s=unit,
                blocking_power_w=blocking,
                model=s.get("model") or d.model,
            )
        except ValueError as e:  # ProfileError, or a profile the model cannot fit or plan
            raise Conflict(f"cannot plan job {job.job_id} on the {source} profile: {e}") from None
        job.plans = plans
        job.chosen = plans.choose(deadline_s=s.get("deadline_s"), max_slowdown=s.get("max_slowdown"))
        job.plan_source = source
        self._dump(job.job_id, "plan.json", plan_text(plans.plan_json(job.chosen)))

    def schedule(self, job_id: str, rank: int) -> dict[str, Any]:
        job = self.job(job_id)
        info = job.ranks.get(rank)
        if info is None:
            raise NotFound(f"rank {rank} is not registered in job {job_id}; POST /jobs/{job_id}/ranks first")
        with job.lock:
            self._plan(job)
            ps, k = job.plans, job.chosen
            stage = info["pp_rank"]
            entry = ps.plan_json(k)
        insts = entry["stages"][stage]["instructions"]
        freqs = entry["stages"][stage]["frequencies"]
        mbs = entry["stages"][stage]["microbatches"]
        available = set(info.get("available_frequencies") or ())
        missing = sorted({f for f in freqs if available and f not in available}, reverse=True)
        if missing:
            raise Conflict(f"the plan needs clocks {missing} MHz that rank {rank}'s GPU does not support; "
                           "profile this GPU model or plan with its own profile")
        s = job.spec
        return {
            "rank": rank,
            "stage": stage,
            "plan": k,
            "plans": len(ps),
            "profile": job.plan_source,
            "limit_s": ps.limit_s(s.get("deadline_s"), s.get("max_slowdown")),
            "meets_limit": ps.meets(k, s.get("deadline_s"), s.get("max_slowdown")),
            "iteration_time_s": entry["iteration_time_s"],
            "emulated_time_s": entry["emulated_time_s"],
            "emulated_energy_j": entry["emulated_energy_j"],
            "max_frequency_time_s": ps.max_freq_time_s,
            "max_frequency_energy_j": ps.max_freq_energy_j,
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
                "planned": job.plans is not None,
                "plan": job.chosen,
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

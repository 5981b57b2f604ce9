"""``zeus slurm prolog|epilog|report``: every Slurm job charged the energy of its GPUs, from the node daemon.

Why a Prolog/Epilog pair rather than a SPANK plugin: Slurm runs ``Prolog`` and ``Epilog``
(``slurm.conf``) on each node of a job as ``SlurmdUser``, at its start and after its end --
cancelled, failed or timed out included -- with nothing to compile against Slurm's headers. The
prolog asks the node daemon (``zeus daemon``, upstream zeusd's HTTP API) for the cumulative energy
counter of the job's GPUs (``/gpu/get_cumulative_energy``) and keeps it in a small file of its own;
the epilog asks again and appends the difference, with the job's context, as one JSON line to the
record file; ``zeus slurm report`` tabulates that file.

* The daemon: ``ZEUSD_SOCK_PATH`` (a Unix socket) or ``ZEUSD_HOST_PORT``, and ``ZEUSD_TOKEN``
  (upstream's variables; a token needs the ``gpu-read`` scope).
* The job's GPUs: ``SLURM_JOB_GPUS`` (what Slurm gives a Prolog/Epilog of a job with GPU GRES), else
  ``SLURM_STEP_GPUS``, else ``CUDA_VISIBLE_DEVICES`` (a TaskProlog/TaskEpilog sees the job's own),
  else every GPU the daemon serves (a node given whole to each job). Indices are the daemon's (NVML's).
* ``ZEUS_SLURM_RECORD``: the record file (JSON lines, appended with ``O_APPEND`` under an
  exclusive ``flock``, each line whole in one write). ``ZEUS_SLURM_STATE``: the folder of the
  prolog's readings (default ``/run/zeus-slurm``).
* The job's context: :func:`zeus_core.scheduler.context` (``slurm_job_id``, ``slurm_user``, ...);
  what a Prolog's environment lacks (the job's name, its exit code) comes from ``scontrol show job``.
* Several jobs on one GPU (time slicing, MPS, MIG): the daemon charges each GPU's energy to the
  processes and Slurm jobs on it as it goes (``/gpu/get_attributed_energy``, an estimate by SM share:
  :mod:`zeus_core.daemon.accounting`). The epilog charges the job, per GPU, its own share where
  another job's processes drew energy on that GPU during the job (``charge`` ``estimate``), and the
  GPU's whole measured energy where the job was alone on it (``measured``); a daemon without the
  route, or a shared GPU on which the job's own processes could not be told apart (no
  ``SLURM_JOB_ID`` in their environment, no Slurm cgroup), is charged the measured energy
  (``measured-whole-gpu`` for the latter). ``charged_energy_j`` is what a site should bill;
  ``energy_j`` stays the GPUs' measured energy.
* The prolog and the epilog exit 0 whatever happens (a failing Prolog drains the node and requeues
  the job; a failing Epilog drains the node): a failure goes to stderr (slurmd's log) and into the
  job's record as ``error``, with its energy ``null``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from zeus_core.daemon.nodeclient import Endpoint, NodeClient, NodeError
from zeus_core.scheduler import context

ENV_RECORD = "ZEUS_SLURM_RECORD"
ENV_STATE = "ZEUS_SLURM_STATE"
DEFAULT_STATE = "/run/zeus-slurm"
#: how long the epilog waits for ``scontrol show job`` (the controller may be busy; the record is written without it)
SCONTROL_TIMEOUT_S = 10.0
#: the fields of a record, in order (contract: extend, never rename)
FIELDS = (
    "job_id",
    "step_id",
    "user",
    "name",
    "cluster",
    "partition",
    "node",
    "state",
    "exit_code",
    "start",
    "end",
    "duration_s",
    "gpus",
    "energy_j",
    "gpu_energy_j",
    "error",
    "charged_energy_j",
    "gpu_charged_energy_j",
    "charge",
)
#: what ``charge`` says of ``charged_energy_j``: ``measured`` (the job was alone on its GPUs: their
#: whole energy), ``estimate`` (a GPU shared with another job: the job's share of it by SM
#: utilisation), ``measured-whole-gpu`` (a shared GPU on which the job's processes could not be told
#: apart: its whole energy), ``none`` (no energy measured)
CHARGES = ("measured", "estimate", "measured-whole-gpu", "none")
#: energy charged to other jobs' processes on a GPU during a job below which the GPU counts as the job's alone (J)
SHARED_MIN_J = 0.5


class SlurmError(click.ClickException):
    """Bad input to ``zeus slurm``: a message naming what and how to fix it; exit status 1."""


# --------------------------------------------------------------------------- the job


def job_gpus(env: Mapping[str, str]) -> list[int] | None:
    """The job's GPU indices from Slurm's or CUDA's variables; None when none names them."""
    for var in ("SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES"):
        text = env.get(var, "").strip()
        if not text:
            continue
        try:
            return sorted({int(part) for part in text.split(",") if part.strip()})
        except ValueError:
            raise SlurmError(
                f"{var}={text!r} is not a comma-separated list of GPU indices (UUIDs are not supported: use indices)"
            ) from None
    return None


def job_id(env: Mapping[str, str]) -> str:
    got = env.get("SLURM_JOB_ID", "").strip()
    if not got:
        raise SlurmError("SLURM_JOB_ID is not set: run zeus slurm prolog/epilog from Slurm's Prolog/Epilog (slurm.conf), not by hand")
    if not re.fullmatch(r"[0-9_+A-Za-z.-]+", got):
        raise SlurmError(f"SLURM_JOB_ID={got!r} is not a job id")
    return got


def scontrol_job(job: str, timeout_s: float = SCONTROL_TIMEOUT_S) -> dict[str, str]:
    """``scontrol -o show job JOB`` as ``{key: value}`` ({} when scontrol is absent, slow or fails)."""
    try:
        out = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if out.returncode != 0:
        return {}
    fields: dict[str, str] = {}
    for token in out.stdout.split():
        key, sep, value = token.partition("=")
        if sep and key not in fields:
            fields[key] = value
    return fields


def _seconds(text: str) -> float | None:
    """Slurm's ``[days-]hours:minutes:seconds`` (``RunTime``, ``TimeLimit``) in seconds; None for ``UNLIMITED``."""
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", text)
    if not m:
        return None
    days, hours, minutes, secs = (int(g) if g else 0 for g in m.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + secs)


def job_state(env: Mapping[str, str], info: Mapping[str, str]) -> tuple[str, str]:
    """(state, exit code ``status:signal``) of a job whose epilog runs. Slurm still calls the job
    ``COMPLETING`` then, so the state comes from how it ended: ``completed`` (0:0), ``failed`` (a
    non-zero status), ``timeout`` (killed at its time limit), ``cancelled`` (killed by SIGTERM or
    SIGKILL before it: ``scancel``), ``signaled`` (another signal), ``ended`` (no exit code known)."""
    code = info.get("ExitCode") or env.get("SLURM_JOB_EXIT_CODE2", "")
    m = re.fullmatch(r"(\d+):(\d+)", code)
    if not m:
        return "ended", code
    status, signal_number = int(m.group(1)), int(m.group(2))
    if signal_number:
        limit, ran = _seconds(info.get("TimeLimit", "")), _seconds(info.get("RunTime", ""))
        if limit is not None and ran is not None and ran >= limit:
            return "timeout", code
        return ("cancelled" if signal_number in (9, 15) else "signaled"), code
    return ("completed" if status == 0 else "failed"), code


# --------------------------------------------------------------------------- the daemon


def _client(env: Mapping[str, str]) -> NodeClient:
    endpoint = Endpoint.from_env(env)
    if endpoint is None:
        raise SlurmError(
            "no node daemon named: set ZEUSD_SOCK_PATH (its Unix socket) or ZEUSD_HOST_PORT in the Prolog/Epilog's environment"
        )
    return NodeClient(endpoint)


def read_counters(env: Mapping[str, str], gpus: list[int] | None) -> tuple[list[int], dict[int, float]]:
    """(the GPUs, each one's cumulative energy in joules) from the node daemon; every GPU it serves
    when ``gpus`` is None. NodeError when the daemon cannot answer."""
    client = _client(env)
    try:
        if gpus is None:
            gpus = [int(g["id"]) for g in client.get("/discover").get("gpus", [])]
        if not gpus:
            return [], {}
        got = client.get("/gpu/get_cumulative_energy", gpu_ids=",".join(map(str, gpus)))
    finally:
        client.close()
    return gpus, {int(k): float(v["energy_mj"]) / 1000.0 for k, v in got.items()}


def read_attribution(env: Mapping[str, str], gpus: list[int]) -> dict[int, dict[str, Any]] | None:
    """The daemon's energy accounting of ``gpus`` (``/gpu/get_attributed_energy``); None where the
    daemon has none (an older daemon, GPUs whose service cannot list processes)."""
    if not gpus:
        return None
    client = _client(env)
    try:
        got = client.get("/gpu/get_attributed_energy", gpu_ids=",".join(map(str, gpus)))
    except NodeError as e:
        if e.status in (400, 404):
            return None
        raise
    finally:
        client.close()
    return {int(k): v for k, v in got.items()}


def charge(
    job: str, per_gpu: dict[str, float], start: Mapping[str, Any] | None, end: Mapping[int, Mapping[str, Any]] | None
) -> tuple[dict[str, float], str]:
    """(per GPU the energy charged to ``job``, how: :data:`CHARGES`) from its GPUs' measured energy
    and the daemon's accounting at the job's start (``{gpu: {"processes_j", "job_j"}}``) and end."""
    if end is None or start is None:
        return dict(per_gpu), "measured"
    out, how = {}, "measured"
    for g, measured in per_gpu.items():
        now, then = end.get(int(g)), start.get(g)
        if now is None or then is None:
            out[g] = measured
            continue
        mine = float(now.get("jobs", {}).get(job, 0.0)) - float(then.get("job_j", 0.0))
        others = float(now["processes_j"]) - float(then["processes_j"]) - mine
        if others <= SHARED_MIN_J:
            out[g] = measured
        elif mine > 0:
            out[g], how = min(mine, measured), "estimate"
        else:
            out[g] = measured
            how = how if how == "estimate" else "measured-whole-gpu"
    return out, how


# --------------------------------------------------------------------------- files


def _state_file(state_dir: Path | None, job: str) -> Path:
    return (state_dir or Path(DEFAULT_STATE)) / f"{job}.json"


def write_atomically(path: Path, text: str) -> None:
    """``text`` into ``path`` whole or not at all (a file beside it renamed over it)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def append_record(path: Path, record: dict[str, Any]) -> None:
    """One JSON line at the end of ``path``: ``O_APPEND`` under an exclusive ``flock`` (epilogs of
    jobs ending together, or nodes sharing the file over a filesystem with locks), written whole."""
    line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)  # closing releases the lock


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of ``path``; SlurmError naming the line of one that is not a record."""
    try:
        text = path.read_text()
    except OSError as e:
        raise SlurmError(f"cannot read the record file {path}: {e.strerror or e}") from None
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise SlurmError(f"{path}:{number}: not a JSON line ({e.msg}); remove or fix that line") from None
        if not isinstance(rec, dict) or "job_id" not in rec:
            raise SlurmError(f"{path}:{number}: not a job record (an object with job_id); remove or fix that line")
        out.append(rec)
    return out


# --------------------------------------------------------------------------- the commands


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


def _warn(what: str, error: str) -> None:
    click.echo(f"zeus slurm {what}: {error}", err=True)


_STATE_HELP = f"Folder of the prolog's readings, one file per running job (${ENV_STATE}; default {DEFAULT_STATE})."
state_dir_option = click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), envvar=ENV_STATE, help=_STATE_HELP)


@click.group("slurm")
def slurm_group() -> None:
    """Charge each Slurm job the energy of its GPUs: Prolog/Epilog commands and their report.

    \b
    slurm.conf (on every node; see the README's "Slurm" section and contrib/slurm/zeus-slurm.sh):
      Prolog=/etc/slurm/zeus-slurm.sh    # runs: zeus slurm prolog
      Epilog=/etc/slurm/zeus-slurm.sh    # runs: zeus slurm epilog
    The daemon: ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT (and ZEUSD_TOKEN); the record file: ZEUS_SLURM_RECORD.
    """


@slurm_group.command("prolog")
@state_dir_option
def prolog_command(state_dir: Path | None) -> None:
    """Read the energy counters of the job's GPUs at its start (Slurm's Prolog; exits 0 whatever happens)."""
    env = dict(os.environ)
    job = job_id(env)  # not run by Slurm at all: a usage error
    state: dict[str, Any] = {"job_id": job, "start": time.time()}
    try:
        gpus, counters = read_counters(env, job_gpus(env))
        state.update(gpus=gpus, counters={str(k): v for k, v in counters.items()})
        accounted = read_attribution(env, gpus)
        if accounted is not None:
            state["attributed"] = {
                str(k): {"processes_j": v["processes_j"], "job_j": v["jobs"].get(job, 0.0)} for k, v in accounted.items()
            }
    except (NodeError, SlurmError, OSError, ValueError, KeyError, TypeError) as e:
        state["error"] = f"at the job's start: {e}"
        _warn("prolog", f"job {job}: {state['error']}")
    try:
        write_atomically(_state_file(state_dir, job), json.dumps(state))
    except OSError as e:
        _warn("prolog", f"job {job}: cannot keep the start readings in {_state_file(state_dir, job).parent}: {e}")


@slurm_group.command("epilog")
@state_dir_option
@click.option(
    "--record",
    "record_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar=ENV_RECORD,
    required=True,
    help=f"The record file, JSON lines (${ENV_RECORD}).",
)
def epilog_command(state_dir: Path | None, record_path: Path) -> None:
    """Read the counters again at the job's end and append its record (Slurm's Epilog; exits 0 whatever happens)."""
    env = dict(os.environ)
    job = job_id(env)
    end = time.time()
    errors: list[str] = []
    start_file = _state_file(state_dir, job)
    try:
        start = json.loads(start_file.read_text())
    except (OSError, ValueError) as e:
        start = {}
        errors.append(
            f"no readings from the job's start ({start_file}: {getattr(e, 'strerror', None) or e}): was zeus slurm prolog its Prolog?"
        )
    if start.get("error"):
        errors.append(str(start["error"]))
    gpus = start.get("gpus")
    per_gpu: dict[str, float] | None = None
    accounted: dict[int, dict[str, Any]] | None = None
    if "counters" in start:
        try:
            gpus, now = read_counters(env, gpus)
            before = {int(k): float(v) for k, v in start["counters"].items()}
            per_gpu = {str(g): now[g] - before[g] for g in gpus}
            if any(not math.isfinite(v) or v < 0 for v in per_gpu.values()):  # a counter reset (driver reload)
                errors.append(f"an energy counter went back during the job: {per_gpu}")
                per_gpu = None
            elif "attributed" in start:
                accounted = read_attribution(env, gpus)
        except (NodeError, SlurmError, OSError, ValueError, KeyError, TypeError) as e:
            errors.append(f"at the job's end: {e}")
    info = scontrol_job(job)
    ctx = context(env)
    state, code = job_state(env, info)
    began = float(start.get("start", end))
    record: dict[str, Any] = {
        "job_id": job,
        "step_id": ctx.get("slurm_step_id", ""),
        "user": ctx.get("slurm_user", "") or info.get("UserId", "").split("(")[0],
        "name": ctx.get("slurm_job_name", "") or info.get("JobName", ""),
        "cluster": ctx.get("slurm_cluster", ""),
        "partition": env.get("SLURM_JOB_PARTITION", "") or info.get("Partition", ""),
        "node": env.get("SLURMD_NODENAME", "") or socket.gethostname(),
        "state": state,
        "exit_code": code,
        "start": _iso(began),
        "end": _iso(end),
        "duration_s": round(end - began, 3),
        "gpus": gpus or [],
        "energy_j": None if per_gpu is None else sum(per_gpu.values()),
        "gpu_energy_j": per_gpu,
        "error": "; ".join(errors) or None,
    }
    charged, how = charge(job, per_gpu, start.get("attributed"), accounted) if per_gpu is not None else ({}, "none")
    record.update(
        charged_energy_j=sum(charged.values()) if per_gpu is not None else None,
        gpu_charged_energy_j=charged if per_gpu is not None else None,
        charge=how,
    )
    for problem in errors:
        _warn("epilog", f"job {job}: {problem}")
    try:
        append_record(record_path, record)
    except OSError as e:
        _warn("epilog", f"job {job}: cannot append to {record_path}: {e}")
        return  # the start readings stay, for whoever looks
    with contextlib.suppress(OSError):
        start_file.unlink()


def _energy(j: float | None) -> str:
    return "-" if j is None else f"{j / 1000:.3f}"


@slurm_group.command("report")
@click.argument("record_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--user", help="Only this user's jobs.")
@click.option("--json", "as_json", is_flag=True, help="The records as one JSON array (with the totals by user) instead of a table.")
def report_command(record_file: Path, user: str | None, as_json: bool) -> None:
    """Tabulate a record file of zeus slurm epilog: each job's charged energy, and the totals by user."""
    records = [r for r in read_records(record_file) if user is None or r.get("user") == user]
    totals: dict[str, float] = {}
    for r in records:
        billed = r.get("charged_energy_j", r.get("energy_j"))  # records from before charged_energy_j: the measured energy
        if isinstance(billed, int | float):
            totals[str(r.get("user", ""))] = totals.get(str(r.get("user", "")), 0.0) + float(billed)
    if as_json:
        click.echo(json.dumps({"jobs": records, "energy_j_by_user": totals}, indent=2))
        return
    if not records:
        click.echo(f"{record_file}: no job recorded" + (f" for user {user}" if user else ""))
        return
    head = ("job", "user", "name", "state", "node", "start", "time_s", "gpus", "energy_kJ")
    rows = [
        (
            str(r.get("job_id", "")),
            str(r.get("user", "")),
            str(r.get("name", "")),
            str(r.get("state", "")),
            str(r.get("node", "")),
            str(r.get("start", "")),
            f"{float(r.get('duration_s') or 0):.1f}",
            ",".join(map(str, r.get("gpus") or [])) or "-",
            _energy(r.get("charged_energy_j", r.get("energy_j"))) + ("*" if r.get("charge") == "estimate" else ""),
        )
        for r in records
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    for row in (head, *rows):
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    failed = [r for r in records if r.get("error")]
    if any(r.get("charge") == "estimate" for r in records):
        click.echo("* the job's share of GPUs it shared with other jobs (an estimate by SM utilisation)")
    click.echo("")
    for name, joules in sorted(totals.items()):
        click.echo(f"total {name}: {_energy(joules)} kJ")
    if failed:
        click.echo(
            f"{len(failed)} job(s) without a complete measurement (their error field says why): "
            + ", ".join(str(r["job_id"]) for r in failed)
        )

"""The scheduler's context of this process: Slurm job, Kubernetes pod, torchrun rank.

One place reads it, so that every record of a try (``recurrences.csv``, ``summary.json``), of a
window (``ZeusMonitor``'s log) and of a Slurm job (``zeus slurm``) names the job the same way, and a
site's accounting can join them on the scheduler's own ids. Each figure is read from the
environment the scheduler gives the process; a variable that is not set is an empty field, and a
scheduler with none of its variables set is no context at all (never an error).

Variables read, by group (a group is present when one of the variables that mark it is set: names
as generic as ``CONTAINER_NAME`` or ``RANK`` are read only inside a group another marks):

* ``slurm``: ``SLURM_JOB_ID``, ``SLURM_STEP_ID``, ``SLURM_JOB_USER`` (else the name of
  ``SLURM_JOB_UID``, else of this process's uid), ``SLURM_JOB_NAME``, ``SLURM_CLUSTER_NAME``;
* ``k8s`` (marked by ``POD_NAME``, ``POD_NAMESPACE`` or ``KUBERNETES_SERVICE_HOST``): ``POD_NAME``,
  ``POD_NAMESPACE``, ``CONTAINER_NAME`` (Kubernetes sets none of these by itself: the pod spec maps
  them with the downward API, ``valueFrom: {fieldRef: {fieldPath: metadata.name}}`` and
  ``metadata.namespace``; the container's name is a literal ``value``), and
  ``KUBERNETES_SERVICE_HOST`` (set in every pod): in a pod without the downward API the pod is
  ``HOSTNAME`` (a pod's hostname is its name) and the namespace is the service account's
  ``namespace`` file when mounted;
* ``torch`` (marked by ``WORLD_SIZE`` or ``TORCHELASTIC_RUN_ID``, which torchrun sets): ``RANK``,
  ``LOCAL_RANK``, ``WORLD_SIZE``, ``TORCHELASTIC_RUN_ID``.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from pathlib import Path

#: Columns of the context, in the order they are written (after a record's other columns), by group.
COLUMNS: dict[str, tuple[str, ...]] = {
    "slurm": ("slurm_job_id", "slurm_step_id", "slurm_user", "slurm_job_name", "slurm_cluster"),
    "k8s": ("k8s_pod", "k8s_namespace", "k8s_container"),
    "torch": ("torch_rank", "torch_local_rank", "torch_world_size", "torch_run_id"),
}
#: Every column of :data:`COLUMNS`, in order.
ALL_COLUMNS: tuple[str, ...] = tuple(c for group in COLUMNS.values() for c in group)

_SLURM = {
    "slurm_job_id": "SLURM_JOB_ID",
    "slurm_step_id": "SLURM_STEP_ID",
    "slurm_user": "SLURM_JOB_USER",
    "slurm_job_name": "SLURM_JOB_NAME",
    "slurm_cluster": "SLURM_CLUSTER_NAME",
}
_K8S = {"k8s_pod": "POD_NAME", "k8s_namespace": "POD_NAMESPACE", "k8s_container": "CONTAINER_NAME"}
_TORCH = {"torch_rank": "RANK", "torch_local_rank": "LOCAL_RANK", "torch_world_size": "WORLD_SIZE", "torch_run_id": "TORCHELASTIC_RUN_ID"}
#: Where a pod's service account token is mounted (its ``namespace`` file names the pod's namespace).
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def _get(env: Mapping[str, str], var: str) -> str:
    return env.get(var, "").strip()


def _user_name(uid: str) -> str:
    try:
        return pwd.getpwuid(int(uid)).pw_name
    except (KeyError, ValueError, OverflowError):
        return uid


def _slurm(env: Mapping[str, str]) -> dict[str, str]:
    got = {col: _get(env, var) for col, var in _SLURM.items()}
    if not any(got.values()) and not _get(env, "SLURM_JOB_UID"):
        return {}
    if not got["slurm_user"]:
        got["slurm_user"] = _user_name(_get(env, "SLURM_JOB_UID") or str(os.getuid()))
    return got


def _k8s(env: Mapping[str, str], service_account: Path) -> dict[str, str]:
    got = {col: _get(env, var) for col, var in _K8S.items()}
    in_pod = bool(_get(env, "KUBERNETES_SERVICE_HOST"))
    if not (got["k8s_pod"] or got["k8s_namespace"] or in_pod):
        return {}
    if in_pod and not got["k8s_pod"]:
        got["k8s_pod"] = _get(env, "HOSTNAME")
    if in_pod and not got["k8s_namespace"]:
        try:
            got["k8s_namespace"] = (service_account / "namespace").read_text().strip()
        except OSError:
            pass  # no service account mounted: the namespace stays unknown
    return got


def context(environ: Mapping[str, str] | None = None, service_account: Path = SERVICE_ACCOUNT) -> dict[str, str]:
    """This process's scheduler context as columns (:data:`COLUMNS`; ``environ``: ``os.environ``):
    every column of each group present, ``""`` where its variable is not set; ``{}`` outside any
    scheduler."""
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    out.update(_slurm(env))
    out.update(_k8s(env, service_account))
    torch = {col: _get(env, var) for col, var in _TORCH.items()}
    if torch["torch_world_size"] or torch["torch_run_id"]:
        out.update(torch)
    return out


def ordered(columns: set[str] | dict[str, object]) -> list[str]:
    """``columns`` (context columns of several records) in the order of :data:`ALL_COLUMNS`."""
    return [c for c in ALL_COLUMNS if c in columns]


__all__ = ["ALL_COLUMNS", "COLUMNS", "SERVICE_ACCOUNT", "context", "ordered"]

"""Group files: recurring jobs of a cluster, in the format of the NSDI'23 Alibaba group trace.

One row per job (a recurrence of a recurring group), with these columns (others are
ignored, so a file with extra columns, e.g. the generator's ``pattern``, reads as is):

=============== =====================================================================
group           the group's id: jobs with the same id are recurrences of one job
start_time      when the job was submitted, in seconds (any origin)
end_time        when it ended in the cluster trace, after ``start_time``
dataset         which workload it is (``cifar100``, ``imagenet``, ..., or one the job adds)
runtime_ratio   this job's runtime over the mean runtime of the file's jobs of that dataset
=============== =====================================================================

The published file (``alibaba_groups.csv.xz``) can no longer be downloaded; any file in
this format replays, and ``zeus traces alibaba-synth`` writes synthetic ones
(:mod:`zeus_plugins_trace.groupsynth`). Every problem is reported with the file, the
line and the column, as for the train and power traces (:mod:`zeus_plugins_trace.traces`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path

import attrs

from zeus_core import write_atomic
from zeus_plugins_trace.traces import TraceError, _number, _positive, _rows, _text, _where

GROUP_COLUMNS = ("group", "start_time", "end_time", "dataset", "runtime_ratio")

#: The largest group file read, in bytes, unless :data:`GROUPS_LIMIT_ENV` (MiB) raises it: a
#: synthetic file of 1,000 groups (40,000 jobs) is 3.5 MiB.
GROUPS_LIMIT = 128 << 20
GROUPS_LIMIT_ENV = "ZEUS_MAX_GROUPS_MB"


@attrs.frozen
class GroupJob:
    """One job of a group: when it ran in the cluster, and how long against its dataset's mean."""

    start: float
    end: float
    runtime_ratio: float
    line: int = 0  # where it is in its file (0: not from a file)


@attrs.frozen
class Group:
    """A recurring job: its id, its dataset and its jobs in order of submission."""

    id: str
    dataset: str
    jobs: tuple[GroupJob, ...]


def read_groups(path: str | Path, datasets: Iterable[str] | None = None) -> list[Group]:
    """The groups of a group file, each with its jobs sorted by start time (ties: file order),
    groups in order of their first submission.

    ``datasets``: the datasets the replay knows; a row naming another is an error.
    """
    path = Path(path)
    known = None if datasets is None else sorted(set(datasets))
    jobs: dict[str, list[GroupJob]] = {}
    dataset_of: dict[str, tuple[str, int]] = {}
    for line, r in _rows(path, GROUP_COLUMNS, "a group file", GROUPS_LIMIT_ENV, GROUPS_LIMIT):
        gid = _text(path, line, "group", r["group"])
        dataset = _text(path, line, "dataset", r["dataset"])
        if known is not None and dataset not in known:
            raise TraceError(
                f"{_where(path, line, 'dataset')}: unknown dataset {dataset!r}; the replay knows "
                f"{', '.join(known)} (add a [[profiler.workloads]] table for another)"
            )
        first = dataset_of.setdefault(gid, (dataset, line))
        if first[0] != dataset:
            raise TraceError(
                f"{_where(path, line, 'dataset')}: group {gid!r} is {dataset!r} here but {first[0]!r} at line {first[1]}; "
                "a group is one recurring job, of one dataset"
            )
        start = _number(path, line, "start_time", r["start_time"])
        end = _number(path, line, "end_time", r["end_time"])
        if not end > start:
            raise TraceError(f"{_where(path, line, 'end_time')}: {end:g} is not after start_time {start:g}; a job ends after it starts")
        ratio = _positive(path, line, "runtime_ratio", _number(path, line, "runtime_ratio", r["runtime_ratio"]))
        jobs.setdefault(gid, []).append(GroupJob(start, end, ratio, line))
    if not jobs:
        raise TraceError(f"{path}: no data rows after the header")
    groups = [Group(gid, dataset_of[gid][0], tuple(sorted(js, key=lambda j: j.start))) for gid, js in jobs.items()]
    return sorted(groups, key=lambda g: g.jobs[0].start)


def groups_csv(groups: Iterable[Group], extra: dict[str, dict[str, str]] | None = None) -> str:
    """The text of a group file holding ``groups``; ``extra[group id]`` adds columns (same keys for every group)."""
    extra = extra or {}
    columns = list(GROUP_COLUMNS) + sorted({k for cols in extra.values() for k in cols})
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for g in groups:
        more = [extra.get(g.id, {}).get(c, "") for c in columns[len(GROUP_COLUMNS) :]]
        for j in g.jobs:
            w.writerow([g.id, repr(j.start), repr(j.end), g.dataset, repr(j.runtime_ratio), *more])
    return buf.getvalue()


def write_groups(path: str | Path, groups: Iterable[Group], extra: dict[str, dict[str, str]] | None = None) -> Path:
    """Write a group file atomically (a reader never sees half of it)."""
    return write_atomic(Path(path), groups_csv(groups, extra))

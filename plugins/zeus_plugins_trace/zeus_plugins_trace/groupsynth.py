"""Synthetic group files: recurring jobs with the arrival and overlap patterns of a shared GPU cluster.

The NSDI'23 group file (the six workloads mapped onto recurring groups of the Alibaba
PAI GPU trace of July-August 2020) is no longer downloadable. This generator makes
files in its format whose *timing* has the shapes that matter to a replay: how often
a group's jobs overlap, and in what pattern. It is a parametric model, not a fit to
the trace: every number below is an assumption, stated so it can be changed. A file
from it is synthetic and says so in its ``pattern`` column and in every report.

Why the patterns: in a shared cluster a job recurs for three reasons, and each gives
a different overlap, which is what the replay's in-flight rules are about:

* ``periodic`` (scheduled retraining, 40 % of groups): submitted every ``period``
  (1, 2, 6, 12 or 24 h, one that fits all runs in the window) with a few minutes of jitter, an occasional run skipped
  (10 %). Jobs overlap only when a run lasts longer than the period, and then all
  of them do (a group whose runtime exceeds its period always has one in flight).
* ``burst`` (sweeps and debugging, 35 %): sessions of a few jobs (geometric, mean 5)
  submitted minutes apart (exponential gaps, mean 3 min), sessions hours to days
  apart (exponential, mean 1.5 days, less for a large group so that it fits the window); jobs within
  a session overlap heavily, sessions rarely.
* ``sequential`` (a user iterating by hand, 25 %): the next job follows the end of
  the previous one after some think time (exponential, mean 1-8 h, less for a large
  group), and in 15 % of
  cases is submitted before it ended (impatience): occasional overlap.

Submissions of bursts and sequential groups follow the day: they are accepted with
probability ``(1 + 0.6 cos(2 pi (hour - 15) / 24)) / 1.6`` (more in the afternoon,
few at night), retried an hour later otherwise; periodic ones are the clock's.

Runtimes: a group's typical runtime is log-normal around its dataset's median
(``MEDIAN_RUNTIME_S``, spread 0.6 in log), and each job's is that times a log-normal
factor (spread 0.35), so runtimes are heavy-tailed across groups and vary within one.
``runtime_ratio`` is each job's runtime over the mean runtime of all jobs of its
dataset in the file, as the published column is defined. Group sizes are
``2 + lognormal(log 30, 0.7)`` jobs (at most 300): most groups have tens of jobs, a
few have hundreds. Start times are seconds from the beginning of a 60-day window.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np

from zeus_plugins_trace.groups import Group, GroupJob, write_groups

HOUR = 3600.0
DAY = 24 * HOUR
SPAN_S = 60 * DAY

#: Median runtime of a job of each dataset, in seconds (an assumption of the order of the traces'
#: time to target on a V100: minutes for movielens, hours for most, a day and more for imagenet).
MEDIAN_RUNTIME_S = {
    "cifar100": 1.5 * HOUR,
    "imagenet": 30 * HOUR,
    "librispeech": 10 * HOUR,
    "movielens-1m": 0.2 * HOUR,
    "squad": 2 * HOUR,
    "sentiment140": 3 * HOUR,
}

PATTERNS = (("periodic", 0.40), ("burst", 0.35), ("sequential", 0.25))
PERIODS_S = (1 * HOUR, 2 * HOUR, 6 * HOUR, 12 * HOUR, 24 * HOUR)


def _daytime(rng: np.random.Generator, t: float) -> float:
    """``t`` or later: the first time a submission is accepted by the day's rhythm."""
    while True:
        hour = (t % DAY) / HOUR
        if rng.random() < (1 + 0.6 * math.cos(2 * math.pi * (hour - 15) / 24)) / 1.6:
            return t
        t += HOUR


def _periodic(rng: np.random.Generator, n: int, runtime) -> list[tuple[float, float]]:
    # A group with many runs has a short period: all of them fit in the window.
    fitting = [p for p in PERIODS_S if n * p <= SPAN_S] or [PERIODS_S[0]]
    period = float(rng.choice(fitting))
    t0 = float(rng.uniform(0, SPAN_S / 4))
    out: list[tuple[float, float]] = []
    k = 0
    while len(out) < n:
        k += 1
        if rng.random() < 0.10:  # a skipped run
            continue
        start = t0 + k * period + float(rng.normal(0, 120))
        out.append((start, start + runtime()))
    return out


def _burst(rng: np.random.Generator, n: int, runtime) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    t = float(rng.uniform(0, SPAN_S / 4))
    gap = min(1.5 * DAY, SPAN_S / 2 / (n / 5))  # sessions of about 5 jobs within the window
    while len(out) < n:
        t = _daytime(rng, t + float(rng.exponential(gap)))
        size = min(int(rng.geometric(1 / 5)), n - len(out))
        s = t
        for _ in range(size):
            out.append((s, s + runtime()))
            s += float(rng.exponential(180))
    return out


def _sequential(rng: np.random.Generator, n: int, runtime) -> list[tuple[float, float]]:
    think = min(float(rng.uniform(1, 8)) * HOUR, SPAN_S / 2 / n)
    start = _daytime(rng, float(rng.uniform(0, SPAN_S / 4)))
    out = []
    for _ in range(n):
        end = start + runtime()
        out.append((start, end))
        if rng.random() < 0.15:  # resubmitted before the previous one ended
            start = start + float(rng.uniform(0.2, 0.9)) * (end - start)
        else:
            start = _daytime(rng, end + float(rng.exponential(think)))
    return out


GENERATORS = {"periodic": _periodic, "burst": _burst, "sequential": _sequential}


def synthesize(groups: int, seed: int = 0, datasets: tuple[str, ...] = tuple(MEDIAN_RUNTIME_S)) -> tuple[list[Group], dict[str, str]]:
    """``groups`` synthetic groups (datasets drawn uniformly from ``datasets``) and each group's pattern."""
    unknown = [d for d in datasets if d not in MEDIAN_RUNTIME_S]
    if unknown:
        raise ValueError(f"the generator has no runtime for {', '.join(unknown)}; it knows {', '.join(MEDIAN_RUNTIME_S)}")
    rng = np.random.default_rng(seed)
    names = [name for name, _ in PATTERNS]
    weights = [weight for _, weight in PATTERNS]
    drafts = []
    for k in range(groups):
        dataset = str(rng.choice(list(datasets)))
        pattern = str(rng.choice(names, p=weights))
        n = min(300, 2 + int(rng.lognormal(math.log(30), 0.7)))
        typical = MEDIAN_RUNTIME_S[dataset] * float(rng.lognormal(0, 0.6))

        def runtime(typical=typical) -> float:
            return typical * float(rng.lognormal(0, 0.35))

        jobs = sorted(GENERATORS[pattern](rng, n, runtime))
        gid = hashlib.md5(f"zeus-synthetic-group-{seed}-{k}".encode()).hexdigest()
        drafts.append((gid, dataset, pattern, jobs))
    # runtime_ratio: over the mean runtime of all the file's jobs of the same dataset.
    mean: dict[str, float] = {}
    for d in {d for _, d, _, _ in drafts}:
        runtimes = [e - s for _, dd, _, js in drafts if dd == d for s, e in js]
        mean[d] = float(np.mean(runtimes))
    out = [Group(gid, d, tuple(GroupJob(round(s, 1), round(e, 1), (e - s) / mean[d]) for s, e in js)) for gid, d, _, js in drafts]
    # In order of first submission, as a group file reads (so a written file replays in the same order).
    return sorted(out, key=lambda g: g.jobs[0].start), {gid: p for gid, _, p, _ in drafts}


def write(path: str | Path, groups: int, seed: int = 0) -> Path:
    """Write ``groups`` synthetic groups to ``path`` (with a ``pattern`` column, which readers ignore)."""
    gs, patterns = synthesize(groups, seed)
    return write_groups(path, gs, {gid: {"pattern": p} for gid, p in patterns.items()})


def overlap_share(group: Group) -> float:
    """The share of a group's jobs submitted while an earlier job of the group was still running."""
    latest_end, overlapped = -math.inf, 0
    for j in group.jobs:
        overlapped += j.start < latest_end
        latest_end = max(latest_end, j.end)
    return overlapped / len(group.jobs)

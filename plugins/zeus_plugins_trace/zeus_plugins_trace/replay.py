"""Recurring groups of a cluster replayed concurrently: the NSDI'23 Alibaba simulation.

A group's jobs are submitted at their start times, and several may be in flight at
once, so a batch size must be handed out before earlier runs of the same job have
reported. Each job's result is computed when it is submitted (one sampled train
run, charged as :class:`zeus_plugins_trace.simulate.Tries` charges a try of the
single-job simulator) and observed when it ends, in order of end time, which is
not the order of submission.

Two rules decide what a job submitted while others are in flight runs
(``inflight``):

* ``paper`` (the published simulator): the batch size of the cheapest run that
  reached the target so far (the default before any has), at the JIT's limit; the
  batch-size policy is asked only when nothing of the group is in flight.
* ``improved``: the same, except that the policy is asked whenever none of the
  tries *it* chose is in flight. Under ``paper`` a group whose jobs overlap is asked
  only in the gaps between its runs (a group that always has a job in flight runs
  its default, or its first lucky size, for ever), so its policy stops exploring and
  learning exactly where many jobs would benefit; here it keeps its own pace, one
  try at a time. The exploration risk stays bounded as under ``paper``: at most one
  try of a group is ever at a size the policy chose (the others run the cheapest
  known one), and it stops at ``beta_knob x`` the cheapest run, or sooner at the
  policy's own bound (:class:`zeus_core.TryCostBound`).

Under both rules the policy observes exactly the tries it chose, each before it
chooses again: the order the batch-size protocol promises (choose, then observe
that try), which the ``mab`` policy's exploration relies on. Every try, the policy's
or the rule's, updates the cheapest run (the early-stop reference and the size
in-flight jobs run) when it ends, whatever order the tries end in.

As in the published simulator: a retry (a run that did not reach the target) is
submitted when the failed run ends and takes as long in the cluster as it did; the
early-stop reference is the cheapest single run that reached the target (not a
recurrence's sum of tries); each group has its own seed, ``adler32(group id)`` plus
``job.seed``; energy and time (and so cost) of a job are scaled by its
``runtime_ratio``. Differences: the published optimizer also observed the tries it did
not choose, into its history (so its Thompson-sampling stage also learnt from the
in-flight runs of the best size) and, while pruning, into its pruning whenever the try's
batch size was the one pruning expected next; here a policy observes only its own tries.
A try the cost bound did not let start is fed to the policy as any other (the ``mab``
policy charges it ``100 x beta x min_cost``; the published replay fed it a cost of 0),
and a job that does not reach the target in ``job.max_tries`` tries is an error naming
the in-flight rule (the published replay retries forever).
"""

from __future__ import annotations

import heapq
import math
import zlib
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from zeus_core import JobOptions, PolicyContext, TryRecord
from zeus_plugins_trace import baselines
from zeus_plugins_trace.groups import Group
from zeus_plugins_trace.options import INFLIGHT_RULES
from zeus_plugins_trace.simulate import SimulationError, Tries, own_bound
from zeus_plugins_trace.traces import WorkloadTrace

POLICY, BEST_KNOWN = "policy", "best-known"


def group_seed(group_id: str, job_seed: int = 0) -> int:
    """A group's seed: ``adler32`` of its id (the published replay's), plus the job's seed."""
    return zlib.adler32(group_id.encode("utf-8")) + int(job_seed)


@attrs.frozen
class ReplayTry:
    """One try of a replayed group: when it ran in the cluster, who chose its batch size, what it cost.

    ``record`` is what the trace gives for the try (what a policy observes);
    ``runtime_ratio`` scales its energy, time and cost into the group's totals.
    ``in_flight``: how many other tries of the group were running when it started.
    """

    start: float
    end: float
    in_flight: int
    chooser: str
    runtime_ratio: float
    record: TryRecord

    @property
    def energy_j(self) -> float:
        return self.record.energy_j * self.runtime_ratio

    @property
    def time_s(self) -> float:
        return self.record.time_s * self.runtime_ratio

    @property
    def cost(self) -> float:
        return self.record.cost * self.runtime_ratio


@attrs.frozen
class GroupResult:
    """Every try of one group under one rule, and both baselines over the same jobs."""

    group: str
    dataset: str
    rule: str
    jobs: int
    tries: tuple[ReplayTry, ...]
    default: baselines.Baseline
    oracle: baselines.Baseline
    ratio_sum: float  # the baselines' per-job expectations scale by each job's runtime_ratio

    def totals(self) -> dict[str, float]:
        return {
            "energy_j": float(sum(t.energy_j for t in self.tries)),
            "time_s": float(sum(t.time_s for t in self.tries)),
            "cost": float(sum(t.cost for t in self.tries)),
        }

    def baseline_totals(self, which: str) -> dict[str, float]:
        b = self.default if which == "default" else self.oracle
        return {"energy_j": b.energy_j * self.ratio_sum, "time_s": b.time_s * self.ratio_sum, "cost": b.cost * self.ratio_sum}


def replay_group(
    group: Group,
    wt: WorkloadTrace,
    make_policy: Callable[[int], Any],
    job: JobOptions,
    default_batch_size: int,
    rule: str = "paper",
) -> GroupResult:
    """Replay ``group``'s jobs on ``wt`` with a fresh policy from ``make_policy(seed)``, under ``rule``.

    ``job`` gives eta, beta, max_epochs, max_tries and the seed offset;
    ``default_batch_size`` is the user's (the largest traced size not above it is used).
    """
    if rule not in INFLIGHT_RULES:
        raise ValueError(f"unknown in-flight rule {rule!r}; rules: {', '.join(INFLIGHT_RULES)}")
    seed = group_seed(group.id, job.seed)
    policy = make_policy(seed)
    rng = np.random.default_rng(seed)
    tries = Tries(wt, job.eta_knob, job.max_epochs)
    bss = [int(b) for b in wt.batch_sizes]
    below = [b for b in bss if b <= default_batch_size]
    b0 = max(below) if below else bss[0]
    best = b0  # what a job submitted while others run uses: the size of the cheapest reached run
    beta, maxp = job.beta_knob, wt.max_power_w
    min_cost = math.inf  # the cheapest single run that reached the target: the early-stop reference
    # In flight: (end, submission order, the try, the policy's context when it chose it, or None).
    running: list[tuple[float, int, ReplayTry, PolicyContext | None]] = []
    own_in_flight = 0
    seq = 0
    done: list[ReplayTry] = []

    def submit(job_index: int, try_index: int, start: float, end: float, ratio: float) -> None:
        nonlocal seq, own_in_flight
        ask = not running if rule == "paper" else own_in_flight == 0
        ctx = None
        if ask:
            ctx = PolicyContext(job, job_index, try_index, min_cost, bss, b0, maxp)
            bs = int(policy.choose(ctx))
        else:
            bs = best
        i = tries.position(bs, bss)
        target = tries.sample(i, rng)  # one draw per try, at submission (the published order)
        bound = beta * min_cost if ctx is None else own_bound(policy, ctx, bs, beta * min_cost)
        record = tries.run(job_index, try_index, i, bound, target)
        own_in_flight += ctx is not None
        entry = ReplayTry(start, end, len(running), POLICY if ask else BEST_KNOWN, ratio, record)
        heapq.heappush(running, (end, seq, entry, ctx))
        seq += 1

    def reap(now: float) -> None:
        nonlocal min_cost, own_in_flight, best
        while running and running[0][0] <= now:
            _, _, t, ctx = heapq.heappop(running)
            rec = t.record
            done.append(t)
            if ctx is not None:
                own_in_flight -= 1
                policy.observe(ctx, rec)
            if rec.reached:
                if rec.cost < min_cost:
                    min_cost, best = rec.cost, rec.batch_size
            elif rec.try_index >= job.max_tries:
                raise SimulationError(
                    f"in-flight rule {rule!r}: group {group.id} ({group.dataset}), job {rec.recurrence}: no try reached the "
                    f"target in {job.max_tries} "
                    f"tries (batch sizes {[d.record.batch_size for d in done if d.record.recurrence == rec.recurrence]}); "
                    "raise job.max_tries"
                )
            else:  # a retry, submitted when the failed run ends, as long as it in the cluster
                submit(rec.recurrence, rec.try_index + 1, t.end, t.end + (t.end - t.start), t.runtime_ratio)

    for k, gj in enumerate(group.jobs, start=1):
        reap(gj.start)
        submit(k, 1, gj.start, gj.end, gj.runtime_ratio)
    reap(math.inf)
    ratio_sum = float(sum(j.runtime_ratio for j in group.jobs))
    return GroupResult(
        group.id,
        group.dataset,
        rule,
        len(group.jobs),
        tuple(done),
        baselines.default(wt, job.eta_knob, job.max_epochs, b0),
        baselines.oracle(wt, job.eta_knob, job.max_epochs),
        ratio_sum,
    )

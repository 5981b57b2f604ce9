"""The group replay on a group small enough to work out by hand.

Trace (eta 0.5, MAXPOWER 200 W), as in test_simulate.py:
bs 8:  JIT holds 100 W, epoch cost 1740; its first run profiles (first epoch 1745);
       every run reaches the target at epoch 3: first run 5225, later ones 5220.
bs 16: JIT holds 200 W, epoch cost 1140, profiling epoch 1245; never reaches the target.
max_epochs 5, beta 2: a run of 16 with no bound costs 1245 + 4 x 1140 = 5805.

Group "g" (default batch size 8), the policy scripted to choose 16, then 8:

  job 1  t=0..100    nothing in flight -> the policy: 16, fails (5805); its retry at t=100..200
  job 2  t=10..50    job 1 in flight   -> the cheapest run so far: none yet, the default 8 (5225, ratio 2)
  job 3  t=60..200   job 1 in flight   -> the cheapest run: 8 (job 2's, 5225); bound 2 x 5225
  job 4  t=300..400  nothing in flight -> the policy: 8

Job 2 ends (t=50) before job 1 (t=100), which started first: the policy, which chose
job 1, observes it at t=100 although a later job had already reported. At t=100 the
retry of job 1 starts while job 3 runs: under ``paper`` it runs the cheapest run's 8
without asking the policy; under ``improved`` none of the policy's own tries is in
flight, so the policy chooses it.
"""

from __future__ import annotations

import pytest

from zeus_core import JobOptions
from zeus_plugins_trace.groups import Group, GroupJob
from zeus_plugins_trace.replay import group_seed, replay_group
from zeus_plugins_trace.simulate import SimulationError
from zeus_plugins_trace.traces import load_traces, select

TRAIN = """dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch
d,n,8,sgd,0.1,1,0.5,3
d,n,16,sgd,0.1,1,0.5,nan
"""
POWER = """dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power
d,n,8,sgd,200,10,150
d,n,8,sgd,100,12,90
d,n,16,sgd,200,6,180
d,n,16,sgd,100,9,100
"""
GROUP = Group("g", "d", (GroupJob(0, 100, 1.0), GroupJob(10, 50, 2.0), GroupJob(60, 200, 1.0), GroupJob(300, 400, 1.0)))


class Scripted:
    """Chooses from a list; records every choice and observation with the context it got."""

    def __init__(self, sizes):
        self.sizes = list(sizes)
        self.events = []

    def choose(self, ctx):
        bs = self.sizes.pop(0)
        self.events.append(("choose", ctx.recurrence, ctx.try_index, bs, ctx.min_cost))
        return bs

    def observe(self, ctx, record):
        self.events.append(("observe", record.recurrence, record.try_index, record.batch_size, record.reached))


@pytest.fixture
def trace(tmp_path):
    (tmp_path / "summary_train.csv").write_text(TRAIN)
    (tmp_path / "summary_power_g.csv").write_text(POWER)
    return select(load_traces(tmp_path, "g"), "d", "n", "sgd", 0.5)


def job(max_tries=20):
    return JobOptions(name="t", seed=0, eta_knob=0.5, beta_knob=2.0, target_metric=0.5, max_epochs=5, max_tries=max_tries)


def replay(trace, rule, sizes=(16, 8, 8)):
    policy = Scripted(sizes)
    seeds = []

    def make(seed):
        seeds.append(seed)
        return policy

    return replay_group(GROUP, trace, make, job(), 8, rule), policy, seeds


def rows(result):
    return [
        (
            t.record.recurrence,
            t.record.try_index,
            t.start,
            t.end,
            t.in_flight,
            t.chooser,
            t.record.batch_size,
            t.record.reached,
            round(t.record.cost, 6),
        )
        for t in result.tries
    ]


def test_paper_rule_by_hand(trace):
    r, policy, seeds = replay(trace, "paper")
    # (job, try, start, end, others in flight, chosen by, batch size, reached, cost), in order of end time
    assert rows(r) == [
        (2, 1, 10, 50, 1, "best-known", 8, True, 5225.0),  # nothing reached yet: the default
        (1, 1, 0, 100, 0, "policy", 16, False, 5805.0),  # max_epochs, no bound yet
        (3, 1, 60, 200, 1, "best-known", 8, True, 5220.0),  # 8 already profiled
        (1, 2, 100, 200, 1, "best-known", 8, True, 5220.0),  # retry while job 3 runs: not the policy's
        (4, 1, 300, 400, 0, "policy", 8, True, 5220.0),
    ]
    # The policy saw its own tries only, each before its next choice; job 4 sees the cheapest single run.
    assert policy.events == [
        ("choose", 1, 1, 16, float("inf")),
        ("observe", 1, 1, 16, False),
        ("choose", 4, 1, 8, 5220.0),
        ("observe", 4, 1, 8, True),
    ]
    assert seeds == [group_seed("g")] and group_seed("g", 3) == group_seed("g") + 3
    # Totals scale each job's tries by its runtime_ratio (job 2: 2x).
    assert r.totals()["cost"] == pytest.approx(5805 + 2 * 5225 + 5220 + 5220 + 5220)
    assert r.totals()["energy_j"] == pytest.approx(sum(t.record.energy_j * t.runtime_ratio for t in r.tries))
    # The baselines are per-job expectations, scaled by the same ratios (1 + 2 + 1 + 1).
    assert r.ratio_sum == 5.0 and r.default.batch_size == 8 and r.oracle.batch_size == 8
    assert r.baseline_totals("default")["cost"] == pytest.approx(5 * r.default.cost)


def test_improved_rule_asks_the_policy_when_none_of_its_own_tries_runs(trace):
    r, policy, _ = replay(trace, "improved")
    assert [(t.record.recurrence, t.record.try_index, t.chooser, t.record.batch_size) for t in r.tries] == [
        (2, 1, "best-known", 8),  # the policy's job 1 is in flight
        (1, 1, "policy", 16),
        (3, 1, "best-known", 8),
        (1, 2, "policy", 8),  # job 3 runs, but it is not the policy's: the policy chooses the retry
        (4, 1, "policy", 8),
    ]
    assert [e[:3] for e in policy.events] == [
        ("choose", 1, 1),
        ("observe", 1, 1),
        ("choose", 1, 2),
        ("observe", 1, 2),
        ("choose", 4, 1),
        ("observe", 4, 1),
    ]
    # The retry's context had the cheapest run so far (job 2's 5225) as its early-stop reference.
    assert policy.events[2][4] == 5225.0


def test_a_job_that_never_reaches_the_target_names_its_group(trace):
    with pytest.raises(
        SimulationError,
        match=r"^in-flight rule 'improved': group g \(d\), job 1: no try reached the target in 2 "
        r"tries \(batch sizes \[16, 16\]\)",
    ):
        replay_group(GROUP, trace, lambda _s: Scripted([16] * 9), job(max_tries=2), 8, "improved")


def test_unknown_rule(trace):
    with pytest.raises(ValueError, match="unknown in-flight rule 'fifo'"):
        replay_group(GROUP, trace, lambda _s: Scripted([8]), job(), 8, "fifo")

"""The mab policy through its protocol: restarts, the never-ran penalty, steady costs, bad state."""

from __future__ import annotations

import json
import re

import pytest

from zeus_core import JobOptions, PolicyContext, TryRecord
from zeus_plugins_mab.options import JitOptions, MabOptions
from zeus_plugins_mab.policy import MabPolicy

BSS = [8, 16, 32, 64, 128]
COST = {8: 30.0, 16: 12.0, 32: 10.0, 64: 11.0, 128: 25.0}
JOB = JobOptions(name="t", seed=5, beta_knob=2.0)


def ctx(rec, min_cost=float("inf")):
    return PolicyContext(JOB, rec, 1, min_cost, BSS, 64, 250.0)


def record(rec, bs, n):
    cost = COST[bs] * (1.0 + 0.05 * ((n * 7) % 3 - 1))
    return TryRecord(rec, 1, bs, 200.0, 3, cost, cost, cost, bs != 8, None if bs != 8 else "early-stop")


@pytest.mark.parametrize("variant", ["paper", "improved"])
def test_restarting_every_recurrence_changes_nothing(variant):
    opts = MabOptions(variant=variant)
    steady = MabPolicy(opts, JOB.seed)
    chosen_a, chosen_b, state = [], [], None
    for rec in range(1, 41):
        c = ctx(rec, 20.0 if rec > 1 else float("inf"))
        bs = steady.choose(c)
        chosen_a.append(bs)
        steady.observe(c, record(rec, bs, rec))
        fresh = MabPolicy(opts, JOB.seed)  # a new process each recurrence
        if state is not None:
            fresh.set_state(json.loads(json.dumps(state)))
        bs = fresh.choose(c)
        chosen_b.append(bs)
        fresh.observe(c, record(rec, bs, rec))
        state = fresh.get_state()
    assert chosen_a == chosen_b
    assert chosen_a[0] == 64  # the default first
    assert chosen_a[-10:].count(32) >= 7  # and it settles on the cheapest


def test_never_ran_is_fed_back_as_a_large_penalty():
    p = MabPolicy(MabOptions(variant="paper"), 0)
    p.choose(ctx(1))
    p.observe(ctx(1), record(1, 64, 1))
    c = ctx(2, min_cost=11.0)
    assert p.choose(c) == 32
    p.observe(c, TryRecord(2, 1, 32, 200.0, 0, 0.0, 0.0, 0.0, False, "never-ran"))
    assert p.history[-1] == (32, -100.0 * 2.0 * 11.0)


@pytest.mark.parametrize("variant", ["paper", "improved"])
def test_a_try_that_never_ran_without_a_finite_bound_teaches_the_explorer_only(variant):
    """Upstream's clients end a trial before its first report (the process died); under
    ``beta_knob = inf``, or before any recurrence finished, there is no bound to charge it."""
    p = MabPolicy(MabOptions(variant=variant), 0)
    c = ctx(1)  # min_cost inf: nothing finished yet
    first = p.choose(c)
    p.observe(c, TryRecord(1, 1, first, 200.0, 0, 0.0, 0.0, 0.0, False, "never-ran"))
    assert p.history == []  # no cost learnt
    assert p.choose(ctx(1)) != first  # the explorer moved on from the size that failed
    boundless = PolicyContext(JobOptions(name="t", seed=5, beta_knob=float("inf")), 2, 1, 11.0, BSS, 64, 250.0)
    p.observe(boundless, TryRecord(2, 1, p.choose(boundless), 200.0, 0, 0.0, 0.0, 0.0, False, "never-ran"))
    assert p.history == []
    with pytest.raises(ValueError, match="non-finite cost"):  # a try that ran with a non-finite cost is still refused
        p.observe(boundless, TryRecord(2, 2, p.choose(boundless), 200.0, 2, float("nan"), 1.0, float("nan"), False, None))


def test_improved_variant_learns_the_steady_cost():
    p = MabPolicy(MabOptions(), 0)
    p.choose(ctx(1))
    r = TryRecord(1, 1, 64, 200.0, 3, 1.0, 1.0, 14.0, True, None, steady_cost=11.0)
    p.observe(ctx(1), r)
    assert p.history == [(64, -11.0)]
    paper = MabPolicy(MabOptions(variant="paper"), 0)
    paper.choose(ctx(1))
    paper.observe(ctx(1), r)
    assert paper.history == [(64, -14.0)]


def test_state_of_another_variant_or_batch_size_list_is_refused():
    p = MabPolicy(MabOptions(variant="paper"), 0)
    p.choose(ctx(1))
    with pytest.raises(ValueError, match="variant 'paper'.*--fresh"):
        MabPolicy(MabOptions(), 0).set_state(p.get_state())
    with pytest.raises(ValueError, match=r"batch sizes \[8, 16, 32, 64, 128\].*--fresh"):
        MabPolicy(MabOptions(variant="paper", batch_sizes=[8, 16]), 0).set_state(p.get_state())


def test_default_above_the_list_is_clamped_as_in_the_paper():
    p = MabPolicy(MabOptions(default=256), 0)
    assert p.choose(ctx(1)) == 128


@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    [
        (MabOptions, {"batch_sizes": [8, 16, 8]}, "batch_sizes lists 8 twice: [8, 16, 8]"),
        (MabOptions, {"batch_sizes": [0, 8]}, "batch_sizes must list batch sizes, each at least 1; got 0 in [0, 8]"),
        (MabOptions, {"eta_knob": 1.5}, "eta_knob must be between 0 and 1 inclusive, got 1.5"),
        (MabOptions, {"beta_knob": 0.5}, "beta_knob must be at least 1, got 0.5"),
        (MabOptions, {"variant": "fast"}, "variant must be one of 'improved', 'paper'; got 'fast'"),
        (MabOptions, {"sigma_w": 0.0}, "sigma_w must be at least 0.01, got 0.0"),
        (JitOptions, {"eta_knob": -0.1}, "eta_knob must be between 0 and 1 inclusive, got -0.1"),
        (JitOptions, {"measure_iters": 0}, "measure_iters must be at least 1, got 0"),
    ],
)
def test_options_name_the_field_and_what_it_accepts(cls, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cls(**kwargs)


def test_optional_knobs_and_an_empty_batch_size_list_mean_the_jobs_and_the_workloads():
    o = MabOptions(batch_sizes=[], eta_knob=None, beta_knob=None)
    assert (o.batch_sizes, o.eta_knob, o.beta_knob) == ([], None, None)

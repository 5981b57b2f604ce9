"""``explore_budget``: what stopped exploratory tries may waste, over the job's horizon."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from mab_tiny_trace import BEST, CPE_16
from mab_tiny_trace import run_tiny as run

from zeus_core import JobOptions
from zeus_core.engine.registry import load as load_plugins
from zeus_core.engine.validation import JobError, load_job
from zeus_plugins_mab.guided import BUDGET_FLOOR_SDS, Guided
from zeus_plugins_mab.options import MabOptions
from zeus_plugins_mab.policy import MabPolicy
from zeus_plugins_trace import baselines
from zeus_plugins_trace.device import TraceDevice, TraceDeviceOptions
from zeus_plugins_trace.simulate import simulate
from zeus_plugins_trace.traces import load_traces, select


def ctx(job, recurrence):
    return SimpleNamespace(job=job, recurrence=recurrence, try_index=1, min_cost=BEST)


def test_only_exploratory_tries_that_stop_count_as_waste():
    g = Guided([8, 16, 32], [1.0, 1.0, 1.0], 8)
    g.observe(8, 3, True, cost=30.0)  # reached: not waste
    g.observe(16, 4, False, cost=40.0)  # exploratory, stopped: waste
    g.observe(8, 5, False, cost=50.0)  # a sampling try of a size that reached, stopped: not exploration
    g.observe(16, 2, False, cost=20.0)  # a retry of the stopped size: waste again
    g.observe(32, 3, True, cost=33.0)  # an exploratory try that reached: not waste
    assert g.waste == 60.0
    # 5 % of 10 recurrences at cost 100, less the waste.
    assert g.budget_left(0.05, 10, 100.0) == pytest.approx(50.0 - 60.0)
    assert g.budget_left(0.05, 40, 100.0) == pytest.approx(200.0 - 60.0)


def test_the_budget_caps_an_exploratory_try_but_never_below_the_noise_floor(tmp_path):
    # explore_stop off: the budget is the only bound of the policy's own.
    policy, r, job = run(tmp_path, recurrences=1, explore_stop=False, horizon=100)
    assert policy.explorer.reached == [0]
    best = policy.best_known_cost()
    assert best == pytest.approx(BEST)
    # Nothing wasted yet: 5 % of 100 recurrences at the best cost (and half an epoch of slack).
    assert policy.try_cost_bound(ctx(job, 2), 16) == pytest.approx(0.05 * 100 * best + 0.5 * CPE_16)
    # Once the budget is spent, the try may still run until it costs the best plus two noise sds.
    policy.explorer.waste = 10 * best
    floor = best * (1 + BUDGET_FLOOR_SDS * policy.sampler.cv())
    assert policy.try_cost_bound(ctx(job, 2), 16) == pytest.approx(floor + 0.5 * CPE_16)
    # A job that has run past its horizon has more budget.
    assert policy.try_cost_bound(ctx(job, 400), 16) == pytest.approx(0.05 * 400 * best - 10 * best + 0.5 * CPE_16)
    # Sampling tries (a size that reached the target) keep the paper's bound.
    assert policy.try_cost_bound(ctx(job, 2), 8) is None


def test_a_short_job_stops_a_size_that_never_reaches_sooner_than_a_long_one(tmp_path):
    # Default horizon: 2 x 2 batch sizes x 2 limits = 8 recurrences, 5 % of it is less than one
    # recurrence, so the never-reaching 16 stops at the noise floor; with a long horizon the
    # model's own stop acts, later.
    short, r_short, _ = run(tmp_path)
    long, r_long, _ = run(tmp_path, horizon=1000)
    assert short.explorer.horizon() == 8 and long.explorer.horizon() == 1000
    e_short, e_long = r_short.records[1], r_long.records[1]
    assert e_short.batch_size == e_long.batch_size == 16 and not e_short.reached and not e_long.reached
    assert e_short.epochs < e_long.epochs
    # It still ran until it could no longer beat the best (5220 / 1140 = 4.6 epochs).
    assert e_short.epochs * CPE_16 >= BEST
    # Its cost is the waste, kept with the state and reported in the policy's summary.
    assert short.explorer.waste == pytest.approx(e_short.cost)
    summary = short.summary(None)
    assert summary["exploration_waste"] == pytest.approx(e_short.cost) and summary["horizon"] == 8
    again = MabPolicy(MabOptions(default=8), 0, short.predict_epoch)
    again.set_state(json.loads(json.dumps(short.get_state())))
    assert (again.explorer.waste, again.explorer.horizon()) == (short.explorer.waste, 8)
    # The horizon is the option's, read afresh: a job given one later uses it.
    later = MabPolicy(MabOptions(default=8, horizon=50), 0, short.predict_epoch)
    later.set_state(json.loads(json.dumps(short.get_state())))
    assert later.explorer.horizon() == 50
    # Budget off: the model's stop alone.
    off, r_off, _ = run(tmp_path, explore_budget=math.inf)
    assert r_off.records[1].epochs == e_long.epochs


def test_a_state_stored_before_the_budget_loads_with_nothing_wasted(tmp_path):
    policy, _r, _job = run(tmp_path)
    state = json.loads(json.dumps(policy.get_state()))
    del state["explorer"]["state"]["waste"]
    state["explorer"]["state"]["horizon"] = 8  # kept in the state for a while; ignored now
    again = MabPolicy(MabOptions(default=8), 0, policy.predict_epoch)
    again.set_state(state)
    assert (again.explorer.waste, again.explorer.horizon()) == (0.0, 8)


def test_a_negative_budget_or_horizon_is_refused_with_its_key():
    job = Path(__file__).resolve().parents[2] / "examples" / "zeus_nsdi23" / "imagenet.toml"
    reg = load_plugins(entry_points=True)
    for key, value, message in (
        ("explore_budget", "-0.1", "explore_budget must be at least 0.0, got -0.1"),
        ("horizon", "-3", "horizon must be at least 0, got -3"),
    ):
        with pytest.raises(JobError) as e:
            load_job(job, reg, [f"batch_size.{key}={value}"])
        assert f"--set batch_size.{key}={value}: {message} @ $.batch_size.{key}" in e.value.format_lines()
    spec = load_job(job, reg, ["batch_size.explore_budget=inf", "batch_size.horizon=12"])
    assert (spec.parts["batch_size"].options.explore_budget, spec.parts["batch_size"].options.horizon) == (math.inf, 12)


def test_p100_imagenet_a_short_job_loses_less_than_two_recurrences_to_a_size_that_never_reaches(shared_data):
    """The public case the budget is for: 24 recurrences, 128 (the oracle) and 64 (never reaches)."""
    trace = select(load_traces(shared_data / "zeus_nsdi23", "p100"), "imagenet", "resnet50", "adadelta", 0.65)
    n = trace.recurrences_default()
    oracle = baselines.oracle(trace, 0.5, 100)
    regrets = {}
    for budget in (0.05, math.inf):
        device = TraceDevice(TraceDeviceOptions(gpu="p100"))
        device.attach(trace)
        job = JobOptions(name="imagenet", recurrences=n, seed=1, eta_knob=0.5, beta_knob=2.0, target_metric=0.65, max_epochs=100)
        policy = MabPolicy(MabOptions(default=256, explore_budget=budget), 1, device.predict_epoch)
        result = simulate(trace, policy, job, default_batch_size=256)
        assert policy.explorer.horizon() == n == 24
        stopped = [r for r in result.records if r.batch_size == 64]
        assert len(stopped) == 1 and not stopped[0].reached
        regrets[budget] = (result.cost / (oracle.cost * n) - 1.0, stopped[0].cost / oracle.cost)
    (with_budget, try_with), (without, try_without) = regrets[0.05], regrets[math.inf]
    # 5 % of 24 recurrences: the try at 64 stops at ~1.2 recurrences instead of ~1.8.
    assert try_with <= 0.05 * 24 + 0.05 < try_without
    assert with_budget <= 0.05 < without

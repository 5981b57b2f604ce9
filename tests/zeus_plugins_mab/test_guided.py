"""Exploration guided by predicted epoch costs: the epochs model, the explorer, the policy's fallback."""

from __future__ import annotations

import json
import math

import pytest

from zeus_core import EpochPrediction, JobOptions, PolicyContext, TryRecord
from zeus_plugins_mab.epochs_model import EpochsModel
from zeus_plugins_mab.guided import Guided, epoch_costs
from zeus_plugins_mab.options import MabOptions
from zeus_plugins_mab.policy import MabPolicy
from zeus_plugins_mab.walk import Walk

BSS = [16, 32, 64, 128, 256, 512, 1024, 2048]


def critical(b, e_min=10.0, b_noise=200.0):
    """Epochs to target of the large-batch model (McCandlish et al.)."""
    return e_min * (1 + b / b_noise)


def test_model_recovers_a_critical_batch_curve_from_three_sizes():
    m = EpochsModel(BSS)
    obs = {k: [math.log(critical(BSS[k]))] for k in (2, 4, 6)}  # 64, 256, 1024
    post = m.fit(obs, {}, 0.05)
    for k in (3, 5):  # 128 and 512, never observed
        median = sum(w * mu for w, mu in zip(post.weights, post.mu[:, k]))
        assert math.exp(median) == pytest.approx(critical(BSS[k]), rel=0.1)


def test_flat_epochs_make_the_largest_cheap_batch_size_the_best_bet():
    """Movielens-like: epochs the same at 1024 and 2048, so 16384 (a quarter the epoch cost) should win."""
    bss = [256, 512, 1024, 2048, 4096, 8192, 16384]
    cpe = [4.0, 2.2, 1.2, 0.75, 0.6, 0.47, 0.4]
    g = Guided(bss, cpe, 1024)
    for b in (1024, 2048):
        g.observe(b, 4, True)
    best = min(cpe[2], cpe[3]) * 4
    assert g.explore(best) == 16384


def test_sizes_the_model_rules_out_are_not_explored():
    """Epoch cost tripling per halving: even at half the epochs (steps to target cannot fall
    as the batch shrinks) nothing below the default can pay."""
    bss = [8, 16, 32, 64]
    g = Guided(bss, [27.0, 9.0, 3.0, 1.0], 64)
    assert g.explore(None) == 64
    for _ in range(3):
        g.observe(64, 5, True)
    assert g.explore(5.0) is None


def test_a_stopped_try_is_a_lower_bound_on_its_epochs():
    m = EpochsModel(BSS)
    obs = {3: [math.log(20.0)]}
    free = m.fit(obs, {}, 0.05)
    bounded = m.fit(obs, {4: math.log(60.0)}, 0.05)  # 256 ran 60 epochs without reaching the target
    p_free, _ = free.improvement([5], [1.0], 20.0)
    p_bounded, _ = bounded.improvement([5], [1.0], 20.0)
    assert p_bounded[0] < p_free[0]  # 512 looks worse once 256 is known to need > 60 epochs


def test_epoch_costs_take_the_cheapest_limit_and_degrade_to_none():
    rows = {8: [EpochPrediction(250.0, 10.0, 2000.0), EpochPrediction(150.0, 12.0, 1500.0)], 16: [EpochPrediction(250.0, 6.0, 1200.0)]}
    got = epoch_costs(rows.get, [8, 16], 0.5, 250.0)
    assert got == [pytest.approx(min(0.5 * 2000 + 0.5 * 250 * 10, 0.5 * 1500 + 0.5 * 250 * 12)), pytest.approx(0.5 * 1200 + 0.5 * 250 * 6)]
    assert epoch_costs(None, [8, 16], 0.5, 250.0) is None
    assert epoch_costs(lambda b: None if b == 16 else rows[b], [8, 16], 0.5, 250.0) is None


# -- through the policy --

JOB = JobOptions(name="t", seed=5, beta_knob=2.0)
PBSS = [8, 16, 32, 64, 128]
CPE = {8: 10.0, 16: 5.0, 32: 2.6, 64: 1.2, 128: 1.0}
EPOCHS = {8: 4, 16: 4, 32: 4, 64: 6, 128: 12}  # cost: 40, 20, 10.4, 7.2, 12


def predict(b):
    # One limit; cost = 0.5 x energy + 0.5 x 250 x time = CPE[b] x 250 with these rows.
    return [EpochPrediction(250.0, CPE[b], CPE[b] * 250.0)]


def ctx(rec, min_cost=math.inf):
    return PolicyContext(JOB, rec, 1, min_cost, PBSS, 128, 250.0)


def record(rec, bs):
    cost = CPE[bs] * 250.0 * EPOCHS[bs]
    return TryRecord(rec, 1, bs, 250.0, EPOCHS[bs], cost, cost, cost, True, None)


def test_policy_explores_by_the_model_with_a_predicting_device_and_walks_without():
    guided = MabPolicy(MabOptions(), JOB.seed, predict)
    walking = MabPolicy(MabOptions(), JOB.seed)
    forced = MabPolicy(MabOptions(use_predictions=False), JOB.seed, predict)
    chosen = []
    for rec in range(1, 31):
        for p in (guided, walking, forced):
            c = ctx(rec, 1000.0 if rec > 1 else math.inf)
            bs = p.choose(c)
            p.observe(c, record(rec, bs))
            if p is guided:
                chosen.append(bs)
    assert isinstance(guided.explorer, Guided)
    assert isinstance(walking.explorer, Walk) and isinstance(forced.explorer, Walk)
    assert chosen[0] == 128
    assert 8 not in chosen  # 10x the epoch cost of 128: never worth a try
    assert chosen[-10:].count(64) >= 7
    assert guided.summary(None)["predicted_cost_per_epoch"]["64"] == pytest.approx(1.2 * 250.0)


def test_guided_state_survives_restarts():
    steady = MabPolicy(MabOptions(), JOB.seed, predict)
    a, b, state = [], [], None
    for rec in range(1, 21):
        c = ctx(rec, 1000.0 if rec > 1 else math.inf)
        bs = steady.choose(c)
        a.append(bs)
        steady.observe(c, record(rec, bs))
        fresh = MabPolicy(MabOptions(), JOB.seed, predict)
        if state is not None:
            fresh.set_state(json.loads(json.dumps(state)))
        bs = fresh.choose(c)
        b.append(bs)
        fresh.observe(c, record(rec, bs))
        state = fresh.get_state()
    assert a == b


def test_min_improvement_prob_must_be_a_probability():
    with pytest.raises(ValueError, match="min_improvement_prob must be between 0 and 1"):
        MabOptions(min_improvement_prob=1.5)

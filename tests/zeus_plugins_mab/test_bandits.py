"""Posterior updates of both Thompson samplers, and their generator state across restarts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zeus_plugins_mab.gaussian_ts import GaussianTS, posterior
from zeus_plugins_mab.relative_ts import RelativeTS


def test_flat_prior_posterior_is_mean_and_n_over_variance():
    mean, precision = posterior([-10.0, -14.0], 0.0, 0.0)
    assert mean == pytest.approx(-12.0)
    assert precision == pytest.approx(2 / 4.0)  # population variance 4


def test_equal_rewards_give_infinite_precision():
    assert posterior([-3.0, -3.0], 0.0, 0.0) == (-3.0, math.inf)


def test_informative_prior_is_conjugate():
    # lambda = 1/var = 1/4; tau = 1 + 2/4 = 1.5; mu = (1 * -20 + (-24) / 4) / 1.5
    mean, precision = posterior([-10.0, -14.0], -20.0, 1.0)
    assert precision == pytest.approx(1.5)
    assert mean == pytest.approx((-20.0 - 6.0) / 1.5)


def test_gaussian_ts_draws_the_paper_sequence():
    ts = GaussianTS([16, 8, 32], seed=7)
    for arm, rewards in {8: [-5.0, -7.0], 16: [-4.0, -4.5], 32: [-9.0, -6.0]}.items():
        for r in rewards:
            ts.observe(arm, r)
    rng = np.random.default_rng(7)
    rng.choice([8, 16, 32], 3, replace=False)  # the exploration draw, consumed even when unused
    means = np.array([-6.0, -4.25, -7.5])
    sds = np.sqrt(np.array([1.0, 0.0625, 2.25]) / 2)
    expected = [8, 16, 32][int(np.argmax(rng.normal(means, sds)))]
    assert ts.predict() == expected
    assert ts.mean == pytest.approx(means)


def test_gaussian_ts_explores_arms_with_too_few_observations():
    ts = GaussianTS([8, 16], seed=0)
    ts.observe(8, -1.0)
    ts.observe(8, -2.0)
    ts.observe(16, -1.0)
    assert ts.predict() == 16


def test_relative_ts_pools_noise_and_prefers_the_cheaper_arm():
    ts = RelativeTS([8, 16, 32], cv0=0.1, nu0=2.0, seed=1)
    for arm, costs in {8: [100.0, 120.0], 16: [50.0], 32: [80.0]}.items():
        for c in costs:
            ts.observe(arm, -c)
    # pooled cv^2 = (2 x 0.01 + (10^2 + 10^2) / 110^2) / (2 + 1)
    assert ts.cv() == pytest.approx(math.sqrt((0.02 + 200 / 110**2) / 3))
    mean, sd = ts.posterior()
    assert mean == pytest.approx([-110.0, -50.0, -80.0])
    assert sd[1] == pytest.approx(ts.cv() * 50.0)
    assert sd[0] == pytest.approx(ts.cv() * 110.0 / math.sqrt(2))
    picks = [ts.predict() for _ in range(200)]
    assert picks.count(16) > 190


@pytest.mark.parametrize("cls", [GaussianTS, RelativeTS])
def test_state_round_trip_continues_the_same_draws(cls):
    a = cls([8, 16, 32], seed=3)
    for arm, r in [(8, -5.0), (8, -6.0), (16, -5.5), (16, -5.0), (32, -5.2), (32, -5.9)]:
        a.observe(arm, r)
    a.predict()
    b = cls.from_json(a.to_json())
    assert [a.predict() for _ in range(20)] == [b.predict() for _ in range(20)]


@pytest.mark.parametrize("cls", [GaussianTS, RelativeTS])
def test_unknown_arm_and_no_arms_are_refused(cls):
    ts = cls([32, 64], window=2)
    with pytest.raises(ValueError, match=r"batch size 48 is not an arm of the bandit \(arms: \[32, 64\]\)"):
        ts.observe(48, -1.0)
    with pytest.raises(ValueError, match="at least one arm"):
        cls([])
    for r in (-1.0, -2.0, -3.0):
        ts.observe(32, r)
    assert ts._window(32) == [-2.0, -3.0]  # only the last `window` rewards count
    assert cls.from_json(ts.to_json()).rewards == {32: [-1.0, -2.0, -3.0], 64: []}


def _observed(cls, arms, seed=11):
    ts = cls(arms, seed=seed)
    for arm, r in [(8, -5.0), (8, -6.0), (16, -5.5), (16, -5.1), (32, -5.2), (32, -5.9)]:
        if arm in arms:
            ts.observe(arm, r)
    return ts


@pytest.mark.parametrize("cls", [GaussianTS, RelativeTS])
def test_drawing_among_some_arms_is_drawing_over_those_arms_alone(cls):
    # The policy always names the arms a draw is among; naming all of them changes nothing.
    everything, named = _observed(cls, [8, 16, 32]), _observed(cls, [8, 16, 32])
    assert [everything.predict() for _ in range(30)] == [named.predict(among=[8, 16, 32]) for _ in range(30)]
    some, alone = _observed(cls, [8, 16, 32]), _observed(cls, [8, 32])
    picks = [some.predict(among=[8, 32]) for _ in range(30)]
    assert picks == [alone.predict() for _ in range(30)] and set(picks) == {8, 32}
    with pytest.raises(ValueError, match=r"batch size 64 is not an arm"):
        some.predict(among=[8, 64])


def test_gaussian_ts_posterior_and_pooled_noise():
    ts = GaussianTS([8, 16, 32], seed=0)
    assert ts.cv() == 0.0  # no arm has two observations: no estimate, and no prior on the noise
    for arm, r in [(8, -10.0), (8, -14.0), (16, -3.0), (16, -3.0), (32, -7.0)]:
        ts.observe(arm, r)
    mean, sd = ts.posterior()
    assert mean == pytest.approx([-12.0, -3.0, -7.0])
    # 8: sd sqrt(var / n) = sqrt(4 / 2); 16: equal rewards, known mean; 32: one reward, var 0 -> known too.
    assert sd == pytest.approx([math.sqrt(2.0), 0.0, 0.0])
    assert GaussianTS([8], seed=0).posterior()[1][0] == math.inf  # flat prior, no data
    # Relative deviations pooled over repeats: 8's (+-2 around 12), 16's none; 2 degrees of freedom.
    assert ts.cv() == pytest.approx(math.sqrt((2 * 2.0**2 / 12.0**2 + 0.0) / 2))

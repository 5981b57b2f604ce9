import math

import numpy as np
import pytest

from zeus_core import lower_convex_hull, pareto_frontier, zeus_cost


def test_cost_metric_weighs_energy_against_time():
    assert zeus_cost(1000.0, 10.0, 1.0, 300.0) == 1000.0
    assert zeus_cost(1000.0, 10.0, 0.0, 300.0) == 3000.0
    assert zeus_cost(1000.0, 10.0, 0.5, 300.0) == pytest.approx(2000.0)
    np.testing.assert_allclose(zeus_cost(np.array([1.0, 2.0]), np.array([1.0, 1.0]), 0.25, 4.0), [3.25, 3.5])


@pytest.mark.parametrize("eta", [-0.1, 1.5, math.nan])
def test_cost_rejects_eta_outside_unit_interval(eta):
    with pytest.raises(ValueError, match="eta_knob must be between 0 and 1"):
        zeus_cost(1.0, 1.0, eta, 100.0)


def test_pareto_frontier_drops_dominated_duplicates_and_nan():
    t = [3.0, 1.0, 2.0, 2.0, 4.0, 1.0, math.nan, 2.0]
    e = [5.0, 9.0, 6.0, 7.0, 5.0, 9.0, 1.0, 6.0]
    idx = pareto_frontier(t, e)
    assert list(idx) == [1, 2, 0]  # fastest first; first duplicate kept; (4,5) dominated by (3,5)


def test_pareto_frontier_matches_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(20):
        t = rng.integers(0, 10, 30).astype(float)
        e = rng.integers(0, 10, 30).astype(float)
        got = set(pareto_frontier(t, e).tolist())
        want = set()
        seen = set()
        for i in range(30):
            dominated = any((t[j] <= t[i] and e[j] <= e[i] and (t[j] < t[i] or e[j] < e[i])) for j in range(30))
            if not dominated and (t[i], e[i]) not in seen:
                want.add(i)
                seen.add((t[i], e[i]))
        assert {(t[i], e[i]) for i in got} == {(t[i], e[i]) for i in want}


def test_lower_convex_hull_removes_points_above_chords():
    t = [1.0, 2.0, 3.0, 4.0]
    e = [10.0, 8.0, 3.0, 2.0]  # (2,8) lies above the chord (1,10)-(3,3)
    assert list(lower_convex_hull(t, e)) == [0, 2, 3]

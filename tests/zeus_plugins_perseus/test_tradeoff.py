import itertools

import numpy as np
import pytest

from zeus_plugins_perseus.dag_times import longest_path
from zeus_plugins_perseus.tradeoff import TradeoffError, solve_frontier


def brute_force(n, edges, spec, lo, hi, tables):
    """Least cost for every critical-path length, over every duration combination."""
    best = {}
    for d in itertools.product(*[range(lo[spec[i]], hi[spec[i]] + 1) for i in range(n)]):
        t = longest_path(n, edges, d)
        c = sum(tables[spec[i]][d[i] - lo[spec[i]]] for i in range(n))
        best[t] = min(best.get(t, np.inf), c)
    return best


def random_instance(rng):
    n = int(rng.integers(1, 6))
    edges = [(a, b) for a in range(n) for b in range(a + 1, n) if rng.random() < 0.45]
    nspec = int(rng.integers(1, n + 1))
    spec = rng.integers(0, nspec, n)
    lo, hi, tables = [], [], []
    for _ in range(nspec):
        lo_j = int(rng.integers(0, 4))
        hi_j = lo_j + int(rng.integers(0, 5))
        saving = np.sort(rng.integers(0, 6, hi_j - lo_j))[::-1] * (1.0 if rng.random() < 0.5 else 0.37)
        tables.append(50.0 - np.concatenate([[0.0], np.cumsum(saving)]))
        lo.append(lo_j)
        hi.append(hi_j)
    return n, edges, spec, lo, hi, tables


@pytest.mark.parametrize("seed", range(4))
def test_matches_brute_force_on_tiny_dags(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        n, edges, spec, lo, hi, tables = random_instance(rng)
        fr = solve_frontier(n, edges, spec, lo, hi, tables)
        best = brute_force(n, edges, spec, lo, hi, tables)
        ts = sorted(best)
        # one plan per unit from the all-slowest to the all-fastest critical path
        assert list(fr.times) == list(range(ts[-1], ts[0] - 1, -1))
        for t, cost, d in zip(fr.times, fr.costs, fr.durations):
            assert longest_path(n, edges, d) <= t
            assert cost == pytest.approx(min(v for k, v in best.items() if k <= t), abs=1e-9)


def test_hand_example_two_paths():
    # a -> c and b -> c; a and b in parallel. Speeding c is cheapest, then a+b together.
    edges = [(0, 2), (1, 2)]
    lo, hi = [1, 1, 1], [3, 3, 2]
    tables = [[10.0, 7.0, 5.0], [10.0, 8.0, 6.0], [4.0, 3.5]]
    fr = solve_frontier(3, edges, [0, 1, 2], lo, hi, tables)
    assert list(fr.times) == [5, 4, 3, 2]
    assert list(fr.costs) == pytest.approx([14.5, 15.0, 19.0, 24.0])
    assert list(fr.durations[1]) == [3, 3, 1]


def test_t_stop_and_errors():
    fr = solve_frontier(2, [(0, 1)], [0, 0], [1], [4], [[4.0, 3.0, 2.0, 1.0]], t_stop=5)
    assert list(fr.times) == [8, 7, 6, 5]
    with pytest.raises(TradeoffError, match="must not increase"):
        solve_frontier(1, [], [0], [1], [2], [[1.0, 2.0]])
    with pytest.raises(TradeoffError, match="convex"):
        solve_frontier(1, [], [0], [1], [3], [[3.0, 2.9, 0.0]])
    with pytest.raises(TradeoffError, match="expected 2 costs"):
        solve_frontier(1, [], [0], [1], [2], [[1.0]])
    with pytest.raises(TradeoffError, match="cycle"):
        solve_frontier(2, [(0, 1), (1, 0)], [0, 0], [1], [2], [[2.0, 1.0]])


@pytest.mark.parametrize("seed", range(3))
def test_a_priced_walk_makes_optimal_plans_from_above_the_least_priced_cost(seed):
    """With ``time_price``, the plans start at or above the shortest time of least cost plus price x time (so
    every plan that can be of least priced cost is there) and are optimal at every time, as the full walk's."""
    rng = np.random.default_rng(100 + seed)
    started_late = 0
    for _ in range(40):
        n, edges, spec, lo, hi, tables = random_instance(rng)
        price = float(rng.choice([0.0, 0.2, 0.7, 1.5, 4.0]))
        full = solve_frontier(n, edges, spec, lo, hi, tables)
        priced = solve_frontier(n, edges, spec, lo, hi, tables, time_price=price)
        start = int(priced.times[0])
        assert list(priced.times) == list(range(start, int(full.times[-1]) - 1, -1))
        started_late += start < full.times[0]
        priced_cost = full.costs + price * full.times
        best = int(full.times[np.flatnonzero(priced_cost <= priced_cost.min() + 1e-9)].min())
        assert start >= best
        at = {int(t): c for t, c in zip(full.times, full.costs)}
        for t, cost, d in zip(priced.times, priced.costs, priced.durations):
            assert longest_path(n, edges, d) <= t
            assert cost == pytest.approx(at[int(t)], abs=1e-9)
    assert started_late > 10  # the price does cut the walk short


def gpt3_problem(path, microbatches):
    """The quantised frontier's problem of GPT-3 175B / A100, 8 stages, measured model (as the planner poses it)."""
    from zeus_plugins_perseus.planner import build_specs, frontier_problem
    from zeus_plugins_perseus.profile import read_profile
    from zeus_plugins_perseus.schedule import build_dag

    return frontier_problem(build_dag("1f1b", 8, microbatches), build_specs(read_profile(path), 8, "measured", 0.001, 83.64))


def test_a_priced_walk_gives_the_full_walks_plans_on_a_published_profile(gpt3_a100):
    problem = gpt3_problem(gpt3_a100, 12)
    full = solve_frontier(*problem)
    priced = solve_frontier(*problem, time_price=8 * 0.001 * 83.64)
    assert priced.phases < 0.6 * full.phases
    k = len(full.times) - len(priced.times)
    assert k > 0 and np.array_equal(full.times[k:], priced.times)
    assert np.array_equal(full.durations[k:], priced.durations)
    # a price of time too small for the model's rounding to be sure of the start: the walk starts at the slowest
    barely = solve_frontier(*problem, time_price=1e-9)
    assert barely.phases == full.phases and np.array_equal(barely.durations, full.durations)


def test_without_or_tools_the_priced_walk_starts_at_the_slowest_time(gpt3_a100, monkeypatch):
    """OR-Tools is what finds the priced start; where it cannot be imported the walk starts at the all-slowest
    time and gives the same plans."""
    import sys

    problem = gpt3_problem(gpt3_a100, 12)
    with_it = solve_frontier(*problem, time_price=8 * 0.001 * 83.64)
    import ortools.graph.python as og

    monkeypatch.setitem(sys.modules, "ortools.graph.python.min_cost_flow", None)  # its import raises ImportError
    monkeypatch.delattr(og, "min_cost_flow", raising=False)
    without = solve_frontier(*problem, time_price=8 * 0.001 * 83.64)
    full = solve_frontier(*problem)
    assert with_it.phases < without.phases == full.phases
    k = len(full.times) - len(with_it.times)
    assert np.array_equal(without.durations, full.durations) and np.array_equal(full.durations[k:], with_it.durations)

"""Exploration order: the paper's two pruning rounds, and the improved best-first walk."""

from __future__ import annotations

import json

import pytest

from zeus_plugins_mab.options import MabOptions
from zeus_plugins_mab.pruning import Pruning
from zeus_plugins_mab.strategies import Env
from zeus_plugins_mab.walk import Walk

ENV = Env(MabOptions())


def drive(explorer, outcome):
    """Run ``explorer`` to the end; ``outcome(bs, nth_try_of_bs)`` -> (cost, reached)."""
    order, seen = [], {}
    while (bs := explorer.next()) is not None:
        seen[bs] = seen.get(bs, 0) + 1
        cost, reached = outcome(bs, seen[bs])
        order.append(bs)
        explorer.observe(bs, cost, reached)
        explorer = type(explorer).from_json(json.loads(json.dumps(explorer.to_json())), ENV)  # survives a restart at every step
    return order, explorer


def test_paper_pruning_order():
    # 8 fails; 128 fails; 16 is cheapest in round 1; in round 2, 32 now fails (early-stopped)
    costs = {8: None, 16: 1.0, 32: 2.0, 64: 3.0, 128: None}

    def outcome(bs, n):
        if costs[bs] is None or (bs == 32 and n == 2):
            return 5.0, False
        return costs[bs], True

    order, p = drive(Pruning.start([8, 16, 32, 64, 128], 32), outcome)
    # round 1: down from 32 (32, 16, 8 fails), up (64, 128 fails)
    # round 2 from 16 over survivors [16, 32, 64]: down (16), up (32 fails: stop)
    assert order == [32, 16, 8, 64, 128, 16, 32]
    assert p.done and p.survivors == [16]


def test_paper_pruning_names_no_best_cost_and_stores_its_rounds_cheapest_as_before():
    # The round's cheapest cost is state; the explorer's best_cost(sampler) is the protocol's answer
    # (None: pruning bounds no try). A field of that name used to hide the method (TypeError).
    p = Pruning.start([8, 16, 32], 16)
    p.observe(16, 2.5, True)
    assert p.best_cost(None) is None
    state = json.loads(json.dumps(p.to_json()))
    assert state["best_cost"] == 2.5 and "round_best" not in state
    assert list(state) == ["survivors", "default", "rounds", "round", "down", "up", "leg", "pos", "good", "best_cost"]
    again = Pruning.from_json(state, ENV)
    assert again.round_best == 2.5 and again.to_json() == p.to_json()


def test_paper_pruning_rejects_out_of_order_observation():
    p = Pruning.start([8, 16, 32], 16)
    with pytest.raises(RuntimeError, match="expected a try at batch size 16"):
        p.observe(32, 1.0, True)


def test_walk_stops_where_cost_turns_up_and_skips_the_uphill_side():
    # unimodal, minimum at 64; the default 512 is far above it
    costs = {8: 9.0, 16: 4.0, 32: 1.6, 64: 1.0, 128: 1.1, 256: 1.2, 512: 2.0, 1024: 3.0}
    order, w = drive(Walk.start(sorted(costs), 512, tolerance=0.3), lambda b, n: (costs[b], True))
    # down: 256, 128, 64 improve; 32 and 16 are out of tolerance twice in a row: stop.
    # up from 512 (2.0 > 1.3 x 1.0): never started
    assert order == [512, 256, 128, 64, 32, 16]
    assert w.done and w.survivors == [16, 32, 64, 128, 256, 512]


def test_walk_goes_up_first_when_down_does_not_improve():
    costs = {256: 6.0, 512: 5.0, 1024: 4.0, 2048: 1.8, 4096: 1.3, 8192: 1.9, 16384: 1.0}
    order, w = drive(Walk.start(sorted(costs), 1024, tolerance=0.3), lambda b, n: (costs[b], True))
    # 512 is worse than the default: the up side (scored by the default) goes next and
    # keeps improving; one unlucky try (8192) is not enough to stop; 512 is then uphill.
    assert order == [1024, 512, 2048, 4096, 8192, 16384]


def test_walk_ends_a_direction_at_a_failure():
    order, _ = drive(Walk.start([8, 16, 32, 64], 32, tolerance=0.3), lambda b, n: (1.0, b != 16))
    assert order == [32, 16, 64]

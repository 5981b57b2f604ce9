"""Guided exploration's own stop for exploratory tries (``explore_stop``) and retries of stopped sizes."""

from __future__ import annotations

import json
import math

import pytest
from mab_tiny_trace import run_tiny

from zeus_plugins_mab.guided import Guided
from zeus_plugins_mab.options import MabOptions
from zeus_plugins_mab.strategies import Env


def run(tmp_path, recurrences=3, **options):
    policy, result, _job = run_tiny(tmp_path, recurrences, **options)
    return policy, result


def test_an_exploratory_try_that_never_reaches_stops_past_break_even_and_is_censored(tmp_path):
    policy, r = run(tmp_path)
    first, explore, restart = r.records[:3]
    assert (first.batch_size, first.reached) == (8, True)
    # 16 costs 1140 an epoch, the best (8) 3 x 1740 = 5220: break-even after 4.6 epochs;
    # beta x min_cost (2 x 5225) would let it run 9.
    assert explore.batch_size == 16 and not explore.reached and explore.stopped == "early-stop"
    assert 5 <= explore.epochs < 9
    # The stopped try is a censored observation of 16 (a lower bound on its epochs) ...
    assert policy.explorer.censored == {"1": [math.log(explore.epochs)]}
    assert 1 not in policy.explorer.reached
    # ... and the recurrence restarts at the size known to reach the target.
    assert (restart.recurrence, restart.try_index, restart.batch_size, restart.reached) == (2, 2, 8, True)


def test_explore_stop_and_budget_off_keep_the_paper_bound(tmp_path):
    policy, r = run(tmp_path, explore_stop=False, explore_budget=math.inf)
    assert r.records[1].batch_size == 16 and r.records[1].epochs == 9
    assert policy.try_cost_bound(None, 16) is None


def test_the_stop_never_comes_before_break_even_and_comes_sooner_with_more_failure_risk():
    g = Guided([64, 128], [1.033, 1.0], 128)
    for e in (33, 31, 32):
        g.observe(128, e, True)
    best = 32.0
    stops = [g.stop_epochs(64, best, f, 64) for f in (0.05, 0.1, 0.2, 0.3)]
    assert None not in stops and stops == sorted(stops, reverse=True) and stops[0] > stops[-1]
    assert stops[-1] >= math.ceil(best / 1.033)  # the try has cost the best recurrence by then
    # Without failure risk, a run past break-even is likely to reach soon: never worth a restart.
    assert g.stop_epochs(64, best, 0.0, 64) is None
    # A size known to reach, or nothing to compare with: no bound of the model's.
    assert g.stop_epochs(128, best, 0.3, 64) is None
    assert g.stop_epochs(64, None, 0.3, 64) is None


def test_a_stopped_size_is_retried_while_its_bound_still_leaves_room():
    bss = [1024, 2048, 4096, 8192, 16384]
    cpe = [3.1, 1.9, 1.5, 1.19, 1.0]
    g = Guided(bss, cpe, 1024)
    for b in (1024, 2048, 8192):
        g.observe(b, 4, True)
    best = 4 * 1.19
    g.tried.append(bss.index(4096))  # a try at 4096 never ran (cost bound): not a candidate
    # An unlucky run of 16384 stopped after 3 epochs: 16384 still likely needs ~4 (4.76 breaks even).
    g.observe(16384, 3, False)
    assert g.explore(best) == 16384
    # Stopped again far past break-even: its chance of beating the best is gone.
    g.observe(16384, 9, False)
    assert g.explore(best) is None
    assert g.censored == {"4": [math.log(3), math.log(9)]}


def test_several_stopped_runs_count_more_than_one():
    g = Guided([64, 128], [1.0, 1.0], 128)
    g.observe(128, 20, True)
    post_one = g._posterior()
    g.observe(64, 18, False)
    one = g._posterior().improvement([0], [1.0], 20.0)[0][0]
    g.observe(64, 18, False)
    two = g._posterior().improvement([0], [1.0], 20.0)[0][0]
    free = post_one.improvement([0], [1.0], 20.0)[0][0]
    assert free > one > two


def test_state_of_older_stores_with_one_censored_value_per_size_loads():
    g = Guided([64, 128], [1.0, 1.0], 128)
    g.observe(128, 20, True)
    g.observe(64, 30, False)
    d = json.loads(json.dumps(g.to_json()))
    assert d["censored"] == {"0": [pytest.approx(math.log(30))]}
    d["censored"] = {"0": math.log(30)}  # the format before retries
    assert Guided.from_json(d, Env(MabOptions())).censored == {"0": [pytest.approx(math.log(30))]}


def test_fail_prob_must_be_a_probability():
    with pytest.raises(ValueError, match="fail_prob must be between 0 and 1"):
        MabOptions(fail_prob=-0.1)

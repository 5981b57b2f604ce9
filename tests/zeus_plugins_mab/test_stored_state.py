"""Policy states stored by earlier versions of the plugin load and continue exactly as they would have.

``data/pre_refactor_states.json`` was written by :func:`record_fixture` run against
the plugin as it was before the variants became compositions of an explorer and a
sampler (issue #12; the state then kept the explorer under "pruning" or "guided" and
the sampler under "bandit"): for each variant (the paper's pruning, the walk with a
noise bound, guided exploration), the policy's state at two points of a job driven by
:func:`drive`, the driver's own position there, and every try the old code made from
there to the end of the job (batch size, the policy's own cost bound, epochs,
reached), with its final state and summary. A store written then must go on choosing
the same tries now. (Run against today's code, :func:`record_fixture` would write
today's layout: the file is not to be regenerated.)
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from zeus_core import EpochPrediction, JobOptions, PolicyContext, TryCostBound, TryRecord, epochs_within
from zeus_plugins_mab.options import MabOptions
from zeus_plugins_mab.policy import MabPolicy

FIXTURE = Path(__file__).with_name("data") / "pre_refactor_states.json"

BSS = [8, 16, 32, 64, 128, 256]
DEFAULT = 64
#: Steady cost of one epoch at the limit the JIT holds; the first try at a size profiles (+50 % on one epoch).
CPE = {8: 10.0, 16: 3.0, 32: 1.5, 64: 1.2, 128: 1.0, 256: 0.7}
#: Epochs to target (None: never reaches), varied by -1, 0, +1 per try.
EPOCHS = {8: 4, 16: 4, 32: 5, 64: 6, 128: 7, 256: None}
MAX_POWER = 250.0
JOB = JobOptions(name="stored", recurrences=40, seed=5, eta_knob=0.5, beta_knob=2.0, max_epochs=30)
#: Variant -> (mab options, whether the device predicts epoch costs).
SCENARIOS: dict[str, tuple[dict[str, Any], bool]] = {
    "paper": ({"variant": "paper"}, False),
    "walk": ({"explore_bound_sds": 2.0}, False),
    "guided": ({}, True),
}
CHECKPOINTS = (3, 15)  # tries made before the state is stored


def predict(batch_size: int) -> list[EpochPrediction]:
    """Two limits; the higher one costs CPE per epoch (eta 0.5, 250 W), the lower 10 % more."""
    c = CPE[batch_size]
    return [EpochPrediction(250.0, c / MAX_POWER, c), EpochPrediction(200.0, 1.3 * c / MAX_POWER, 0.9 * c)]


def make_policy(name: str) -> MabPolicy:
    options, predicts = SCENARIOS[name]
    return MabPolicy(MabOptions(**options), JOB.seed, predict if predicts else None)


def outcome(rec: int, try_index: int, bs: int) -> int | None:
    base = EPOCHS[bs]
    return None if base is None else base + (rec * 7 + try_index * 3 + bs) % 3 - 1


def drive(policy: Any, pos: dict[str, Any], tries: int | None = None) -> list[list[Any]]:
    """Run the job from ``pos`` (recurrence, try, min_cost, the recurrence's cost so far, the
    sizes profiled; updated in place) for ``tries`` tries or to its end, as the runner
    would: each try is bounded by beta x min_cost and the policy's own bound. Returns
    [recurrence, try, batch size, own bound, epochs, reached] per try."""
    out: list[list[Any]] = []
    while pos["rec"] <= JOB.recurrences and (tries is None or len(out) < tries):
        rec, t = pos["rec"], pos["try"]
        ctx = PolicyContext(JOB, rec, t, pos["min_cost"], BSS, DEFAULT, MAX_POWER)
        bs = int(policy.choose(ctx))
        own = policy.try_cost_bound(ctx, bs) if isinstance(policy, TryCostBound) else None
        bound = JOB.beta_knob * pos["min_cost"] if own is None else min(JOB.beta_knob * pos["min_cost"], own)
        horizon = epochs_within(bound, CPE[bs], JOB.max_epochs)
        target = outcome(rec, t, bs)
        reached = horizon > 0 and target is not None and target <= horizon
        epochs = target if reached else horizon
        steady = None
        cost = epochs * CPE[bs]
        if epochs and bs not in pos["profiled"]:
            pos["profiled"].append(bs)
            steady, cost = cost, cost + 0.5 * CPE[bs]
        stopped = None if reached else ("never-ran" if epochs == 0 else "early-stop")
        policy.observe(ctx, TryRecord(rec, t, bs, 250.0, epochs, cost, cost, cost, reached, stopped, steady_cost=steady))
        out.append([rec, t, bs, own, epochs, reached])
        pos["acc"] += cost
        if reached:
            pos["min_cost"] = min(pos["min_cost"], pos["acc"])
            pos["rec"], pos["try"], pos["acc"] = rec + 1, 1, 0.0
        else:
            pos["try"] = t + 1
    return out


def start() -> dict[str, Any]:
    return {"rec": 1, "try": 1, "min_cost": math.inf, "acc": 0.0, "profiled": []}


def record_fixture() -> dict[str, Any]:
    """What ``data/pre_refactor_states.json`` holds (``json.dumps(..., indent=1)``), with the code whose states it keeps."""
    out: dict[str, Any] = {}
    for name in SCENARIOS:
        for n in CHECKPOINTS:
            policy, pos = make_policy(name), start()
            drive(policy, pos, n)
            state, at = json.loads(json.dumps(policy.get_state())), json.loads(json.dumps(pos))
            rest = drive(policy, pos)
            out[f"{name}@{n}"] = {
                "state": state,
                "position": at,
                "tries": rest,
                "final_state": policy.get_state(),
                "summary": policy.summary(None),
            }
    return out


STORED = json.loads(FIXTURE.read_text())
#: What each variant's state holds now: the explorer and the sampler by name.
NAMES = {"paper": ("pruning", "gaussian-ts"), "walk": ("walk", "relative-ts"), "guided": ("guided", "relative-ts")}


@pytest.mark.parametrize("key", sorted(STORED))
def test_a_state_stored_before_compositions_goes_on_as_it_would_have(key):
    old = STORED[key]
    name = key.split("@")[0]
    policy = make_policy(name)
    policy.set_state(json.loads(json.dumps(old["state"])))
    pos = json.loads(json.dumps(old["position"]))
    # Every try from there: batch size, the policy's own bound, epochs, reached.
    assert drive(policy, pos) == old["tries"]
    state = json.loads(json.dumps(policy.get_state()))
    final = old["final_state"]
    # What it learnt is what the old code learnt, now stored under the strategies' names.
    assert (state["explorer"]["name"], state["sampler"]["name"]) == NAMES[name]
    assert state["explorer"]["state"] == (final["guided"] if name == "guided" else final["pruning"])
    assert state["sampler"]["state"] == final["bandit"]
    assert state["history"] == final["history"]
    # The summary says the same, but for a batch size never tried: the old code wrote its posterior mean
    # as -0.0, today's writes null (issue 38: summary.json never shows a negative zero).
    summary = copy.deepcopy(old["summary"])
    means = summary["posterior_mean_cost"]
    summary["posterior_mean_cost"] = {bs: (None if v == 0.0 and math.copysign(1.0, v) < 0 else v) for bs, v in means.items()}
    assert json.loads(json.dumps(policy.summary(None))) == summary


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_state_stored_now_goes_on_as_one_long_run(name):
    steady, pos = make_policy(name), start()
    whole = drive(steady, pos)
    for n in CHECKPOINTS:
        first, pos = make_policy(name), start()
        head = drive(first, pos, n)
        again = make_policy(name)
        again.set_state(json.loads(json.dumps(first.get_state())))
        assert head + drive(again, pos) == whole
        assert again.get_state() == steady.get_state()

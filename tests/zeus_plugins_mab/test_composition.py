"""A variant is an explorer and a sampler: what each variant composes, and a new explorer plugged in.

``LargestFirst`` is an explorer written the way a contributor would add one:
one class, then its place in a composition. It runs through the trace plugin's
simulator and through the core's runner (``zeus run`` on an unchanged example
job), and both consult it for every exploratory try and for its cost bound.
"""

from __future__ import annotations

import json
import math
from io import StringIO
from pathlib import Path
from typing import Any

import attrs
import pytest
from rich.console import Console

from zeus_core import EpochPrediction, JobOptions, PolicyContext, TryRecord, epochs_within
from zeus_core.engine.registry import load as load_plugins
from zeus_core.engine.runner import Runner
from zeus_core.engine.stores.sqlite import Store
from zeus_core.engine.validation import load_job
from zeus_plugins_mab import plugin as mab_plugin
from zeus_plugins_mab import variants
from zeus_plugins_mab.gaussian_ts import GaussianTS
from zeus_plugins_mab.guided import Guided
from zeus_plugins_mab.options import VARIANTS, MabOptions
from zeus_plugins_mab.policy import MabPolicy
from zeus_plugins_mab.pruning import Pruning
from zeus_plugins_mab.relative_ts import RelativeTS
from zeus_plugins_mab.strategies import Env, Explorer, Sampler
from zeus_plugins_mab.variants import COMPOSITIONS, Composition
from zeus_plugins_mab.walk import Walk
from zeus_plugins_trace import plugin as trace_plugin
from zeus_plugins_trace.options import TraceWorkloadOptions
from zeus_plugins_trace.simulate import jit_knobs, simulate
from zeus_plugins_trace.tracesets import load_workload_trace

SQUAD = Path(__file__).resolve().parents[2] / "examples" / "zeus_nsdi23" / "squad.toml"


@attrs.define
class LargestFirst(Explorer):
    """Every batch size once, largest first; a try stops once it has cost the best
    recurrence so far (it can no longer beat it); then Thompson sampling over the
    sizes that reached the target."""

    name = "largest-first"

    left: list[int]
    costs: dict[str, float] = attrs.field(factory=dict)
    #: (batch size, bound) of every bound set by this object (not stored).
    bounds: list[tuple[int, float]] = attrs.field(factory=list, init=False)

    @classmethod
    def create(cls, env: Env, batch_sizes: list[int], default: int, ctx: PolicyContext) -> LargestFirst:
        return cls(sorted(batch_sizes, reverse=True))

    @classmethod
    def from_json(cls, state: dict[str, Any], env: Env) -> LargestFirst:
        return cls(**state)

    def to_json(self) -> dict[str, Any]:
        return {"left": self.left, "costs": self.costs}

    def propose(self, ctx: PolicyContext, sampler: Sampler | None) -> int | None:
        return self.left[0] if self.left else None

    def observe_try(self, record: TryRecord, cost: float) -> None:
        if self.left and record.batch_size == self.left[0]:
            self.left.pop(0)
            if record.reached:
                self.costs[str(record.batch_size)] = cost

    def arms(self) -> list[int] | None:
        return None if self.left else sorted(int(b) for b in self.costs)

    def best_cost(self, sampler: Sampler | None) -> float | None:
        return min(self.costs.values(), default=None)

    def try_cost_bound(self, ctx: PolicyContext, batch_size: int, sampler: Sampler | None) -> float | None:
        best = self.best_cost(sampler)
        if best is None or str(batch_size) in self.costs:
            return None
        self.bounds.append((batch_size, best))
        return best

    def summary(self) -> dict[str, Any]:
        return {"reached_largest_first": sorted((int(b) for b in self.costs), reverse=True)}


LARGEST_FIRST = Composition((LargestFirst,), RelativeTS)


def squad_trace():
    """The example job's trace (synthetic: made in memory, V100): batch sizes 8 to 48."""
    return load_workload_trace(
        TraceWorkloadOptions(dataset="squad", model="bert_base_uncased", optimizer="adamw"), "v100", 84.0, SQUAD.parent
    )


def test_every_variant_has_a_composition():
    assert sorted(COMPOSITIONS) == sorted(VARIANTS)


# -- what each variant composes --

BSS = [8, 16, 32, 64, 128]
COST = {8: 30.0, 16: 12.0, 32: 10.0, 64: 11.0, 128: 25.0}  # a recurrence at each size, 8 never reaches
JOB = JobOptions(name="t", seed=5, beta_knob=2.0)


def predict(b: int) -> list[EpochPrediction]:
    return [EpochPrediction(250.0, COST[b] / 1000.0, COST[b] / 2.0)]


def run_policy(policy: MabPolicy, recurrences: int = 20) -> list[int]:
    chosen = []
    for rec in range(1, recurrences + 1):
        ctx = PolicyContext(JOB, rec, 1, 20.0 if rec > 1 else math.inf, BSS, 64, 250.0)
        bs = policy.choose(ctx)
        chosen.append(bs)
        reached = bs != 8
        policy.observe(ctx, TryRecord(rec, 1, bs, 250.0, 4, COST[bs], COST[bs], COST[bs], reached, None if reached else "early-stop"))
    return chosen


@pytest.mark.parametrize(
    ("options", "predictor", "explorer", "sampler", "sampler_from_the_start"),
    [
        ({"variant": "paper"}, predict, Pruning, GaussianTS, False),
        ({}, predict, Guided, RelativeTS, True),
        ({}, None, Walk, RelativeTS, False),
        ({"use_predictions": False}, predict, Walk, RelativeTS, False),
        ({}, lambda b: None if b == 128 else predict(b), Walk, RelativeTS, False),  # a size it cannot predict
    ],
    ids=["paper", "improved-predicting-device", "improved-real-gpu", "improved-predictions-off", "improved-partial-predictions"],
)
def test_each_variant_composes_its_explorer_and_sampler(options, predictor, explorer, sampler, sampler_from_the_start):
    policy = MabPolicy(MabOptions(**options), JOB.seed, predictor)
    first = run_policy(policy, 1)
    assert first == [64] and type(policy.explorer) is explorer
    assert (policy.sampler is not None) == sampler_from_the_start
    run_policy(policy, 20)
    assert type(policy.sampler) is sampler
    # The sampler keeps posteriors for what the explorer names: every size (guided) or the survivors.
    assert policy.sampler.arms == policy.explorer.arms()
    state = json.loads(json.dumps(policy.get_state()))
    assert (state["explorer"]["name"], state["sampler"]["name"]) == (explorer.name, sampler.name)


@pytest.mark.parametrize(("variant", "learnt"), [("paper", -14.0), ("improved", -11.0)])
def test_only_the_improved_composition_learns_the_steady_state_cost(variant, learnt):
    policy = MabPolicy(MabOptions(variant=variant), 0)
    ctx = PolicyContext(JOB, 1, 1, math.inf, BSS, 64, 250.0)
    policy.observe(ctx, TryRecord(1, 1, policy.choose(ctx), 250.0, 3, 1.0, 1.0, 14.0, True, None, steady_cost=11.0))
    assert policy.history == [(64, learnt)]


def test_a_stored_explorer_or_sampler_the_composition_does_not_use_is_refused():
    guided = MabPolicy(MabOptions(), JOB.seed, predict)
    run_policy(guided, 3)
    state = json.loads(json.dumps(guided.get_state()))
    walk_only = MabPolicy(MabOptions(), JOB.seed, predict, composition=Composition((Walk,), RelativeTS))
    with pytest.raises(ValueError, match=r"state of the 'guided' explorer, which this mab variant does not use \(walk\).*--fresh"):
        walk_only.set_state(state)
    other_sampler = MabPolicy(MabOptions(), JOB.seed, predict, composition=Composition((Guided, Walk), GaussianTS))
    with pytest.raises(ValueError, match=r"'relative-ts' sampler, but this mab variant samples with 'gaussian-ts'.*--fresh"):
        other_sampler.set_state(state)


def test_an_exploration_where_nothing_reaches_the_target_says_what_to_check():
    policy = MabPolicy(MabOptions(batch_sizes=[8, 16], default=16), JOB.seed)
    with pytest.raises(RuntimeError, match=r"no batch size reached the target during exploration \(tried \[8, 16\]\).*job.target_metric"):
        for rec in range(1, 4):
            ctx = PolicyContext(JOB, rec, 1, math.inf, [8, 16], 16, 250.0)
            bs = policy.choose(ctx)
            policy.observe(ctx, TryRecord(rec, 1, bs, 250.0, 30, 9.0, 9.0, 9.0, False, "max-epochs"))


# -- a new explorer, plugged in --


def test_a_new_explorer_runs_through_the_simulator_and_bounds_its_tries():
    wt = squad_trace()
    job = JobOptions(name="squad", recurrences=12, seed=1, eta_knob=0.5, beta_knob=2.0, target_metric=84.0, max_epochs=6)
    policy = MabPolicy(MabOptions(default=32), job.seed, composition=LARGEST_FIRST)
    result = simulate(wt, policy, job, default_batch_size=32)
    sizes = sorted((int(b) for b in wt.batch_sizes), reverse=True)
    explored = result.records[: len(sizes)]
    # Its proposals, one try each, largest first, across recurrences.
    assert [r.batch_size for r in explored] == sizes
    # Its bound (the best cost so far) stopped the tries that could no longer beat the best.
    cpe = dict(zip((int(b) for b in wt.batch_sizes), jit_knobs(wt, job.eta_knob).cost.tolist()))
    bounds = dict(policy.explorer.bounds) if not policy.explorer.left else None
    assert bounds is not None and bounds
    stopped = [r for r in explored if r.stopped == "early-stop"]
    assert stopped
    for r in explored:
        if r.batch_size in bounds and not r.reached:
            assert r.epochs == epochs_within(bounds[r.batch_size], cpe[r.batch_size], job.max_epochs) < job.max_epochs
    # Then Thompson sampling over the sizes that reached the target.
    reached = sorted({r.batch_size for r in explored if r.reached})
    assert policy.sampler.arms == reached and {r.batch_size for r in result.records[len(sizes) :]} <= set(reached)
    summary = policy.summary(None)
    assert summary["reached_largest_first"] == reached[::-1] and set(summary["posterior_mean_cost"]) == {str(b) for b in reached}


def test_a_new_explorer_in_a_variant_runs_through_zeus_run_as_through_the_simulator(tmp_path, monkeypatch):
    # The one line that adds an explorer: its place in a variant's composition.
    monkeypatch.setitem(variants.COMPOSITIONS, "improved", LARGEST_FIRST)
    reg = load_plugins(entry_points=False, extra_plugins=[("trace", trace_plugin), ("mab", mab_plugin)])
    store = tmp_path / "s.sqlite"
    spec = load_job(SQUAD, reg, ["job.recurrences=10", f'job.store="{store}"'])
    runner = Runner(spec, reg, Console(file=StringIO()))
    try:
        runner.build()
        runner.run()
    finally:
        runner.close()
    with Store(store) as s:
        tries = s.tries()
        state = s.get("policy:batch_size")
    assert state["explorer"]["name"] == "largest-first" and state["explorer"]["state"]["left"] == []
    job = JobOptions(name="squad", recurrences=10, seed=1, eta_knob=0.5, beta_knob=2.0, target_metric=84.0, max_epochs=6)
    sim = simulate(squad_trace(), MabPolicy(MabOptions(default=32), job.seed, composition=LARGEST_FIRST), job, default_batch_size=32)
    assert [(r.batch_size, r.epochs, r.reached) for r in tries] == [(r.batch_size, r.epochs, r.reached) for r in sim.records]
    assert [r.batch_size for r in tries[:6]] == [48, 32, 24, 16, 12, 8]
    assert any(r.stopped == "early-stop" for r in tries[:6])

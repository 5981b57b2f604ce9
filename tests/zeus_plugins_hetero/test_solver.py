"""The step model on hand-computed cases, the exact solver against exhaustive enumeration, and infeasible inputs."""

import numpy as np
import pytest

from zeus_plugins_hetero.baselines import all_baselines, even_split_best_limits, strongest_at_lowest_limit
from zeus_plugins_hetero.bruteforce import count_allocations, enumerate_optimum
from zeus_plugins_hetero.model import GpuType, InfeasibleError, Problem, evaluate
from zeus_plugins_hetero.profile import HeteroError, Profile
from zeus_plugins_hetero.solver import solve

# Type A (1 GPU): 0.1 s/sample at 200 W, 0.15 s/sample at 100 W; type B (2 GPUs): 0.2 s/sample at 50 W.
PROF_A = Profile([10, 30], [200, 100], time=[[1.0, 1.5], [3.0, 4.5]], energy=[[100, 90], [300, 270]], profile_steps=1)
PROF_B = Profile([10, 30], [50], time=[[2.0], [6.0]], energy=[[40], [120]], profile_steps=1)


def hand_problem(**kw):
    gpus = (GpuType("A", 1, PROF_A, idle_power_w=10), GpuType("B", 2, PROF_B, idle_power_w=5))
    args = dict(global_batch=70, granularity=10, allreduce_time_s=0.5, objective="zeus-cost", eta=0.5)
    args.update(kw)
    return Problem(gpus, **args)


def test_evaluate_hand_computed():
    # b_A = 20 at 200 W: t = 2, e = 200; b_B = 20: t = 4, e = 80. T = 4 + 0.5.
    # E = (200 + 10 * 2.5) + 2 * (80 + 5 * 0.5) = 390; MAXPOWER = 200 + 2 * 50 = 300.
    alloc = evaluate(hand_problem(global_batch=60), [20, 20], [200, 50])
    assert alloc.iteration_time_s == pytest.approx(4.5)
    assert alloc.iteration_energy_j == pytest.approx(390)
    assert alloc.cost == pytest.approx(0.5 * 390 + 0.5 * 300 * 4.5)


# The four allocations of the hand problem (b_A + 2 b_B = 70 on a grid of 10):
#   X (30 @ 200, 20): T = 4.5, E = 480, cost 915      Y (30 @ 100, 20): T = 5.0, E = 445, cost 972.5
#   Z (10 @ 200, 30): T = 6.5, E = 400, cost 1175     W (10 @ 100, 30): T = 6.5, E = 385, cost 1167.5
@pytest.mark.parametrize(
    "kw, batch_a, limit_a, value",
    [
        (dict(objective="zeus-cost", eta=0.5), 30, 200, 915),
        (dict(objective="zeus-cost", eta=1.0), 10, 100, 385),
        (dict(objective="zeus-cost", eta=0.0), 30, 200, 300 * 4.5),
        (dict(objective="min-energy", max_slowdown=1.1), 30, 200, 480),
        (dict(objective="min-energy", max_slowdown=1.2), 30, 100, 445),
        (dict(objective="min-energy", max_slowdown=1.5), 10, 100, 385),
    ],
)
def test_optimum_hand_computed(kw, batch_a, limit_a, value):
    problem = hand_problem(**kw)
    assert count_allocations(problem) == 4
    alloc = solve(problem)
    assert alloc.objective_value == pytest.approx(value)
    assert (alloc.choices[0].local_batch, alloc.choices[0].power_limit) == (batch_a, limit_a)
    assert alloc.choices[1].local_batch == (70 - batch_a) // 2


def test_min_energy_reports_the_time_bound():
    alloc = solve(hand_problem(objective="min-energy", max_slowdown=1.2))
    assert alloc.extra["fastest_iteration_time_s"] == pytest.approx(4.5)
    assert alloc.iteration_time_s <= 1.2 * 4.5


def _random_problem(rng, random_profile, n_types):
    gpus = []
    for k in range(n_types):
        lo = int(rng.choice([8, 16, 24]))
        batches = np.unique(np.concatenate([[lo], rng.choice(np.arange(lo + 8, 129, 8), size=3, replace=False)]))
        limits = rng.choice([300, 250, 200, 150, 100], size=int(rng.integers(1, 4)), replace=False)
        prof = random_profile(rng, batches, limits, steps=int(rng.integers(1, 20)), speed=rng.uniform(0.5, 2))
        gpus.append(GpuType(f"g{k}", int(rng.integers(1, 4)), prof, idle_power_w=float(rng.uniform(0, 40))))
    lo = sum(g.count * g.profile.min_batch for g in gpus)
    hi = sum(g.count * g.profile.max_batch for g in gpus)
    objective = str(rng.choice(["zeus-cost", "min-energy"]))
    return Problem(
        tuple(gpus),
        global_batch=int(rng.integers(lo, hi + 1)) // 8 * 8,
        granularity=int(rng.choice([4, 8, 16])),
        allreduce_time_s=float(rng.choice([0.0, rng.uniform(0, 0.1)])),
        objective=objective,
        eta=float(rng.choice([0.0, 1.0, rng.uniform()])),
        max_slowdown=float(rng.uniform(1.0, 1.5)),
    )


@pytest.mark.parametrize("n_types", [1, 2, 3, 4])
def test_matches_exhaustive_enumeration(n_types, random_profile):
    rng = np.random.default_rng(100 + n_types)
    checked = 0
    while checked < 12:
        problem = _random_problem(rng, random_profile, n_types)
        try:
            reference = enumerate_optimum(problem)
        except InfeasibleError:
            with pytest.raises(InfeasibleError):
                solve(problem)
            continue
        alloc = solve(problem)
        assert alloc.objective_value == pytest.approx(reference.objective_value, rel=1e-6, abs=1e-9)
        assert sum(c.count * c.local_batch for c in alloc.choices) == problem.global_batch
        if problem.objective == "min-energy":
            assert alloc.iteration_time_s <= problem.max_slowdown * alloc.extra["fastest_iteration_time_s"] * (1 + 1e-9)
        checked += 1


@pytest.mark.parametrize("workload, steps, batch", [("cifar", 10, 1024), ("imagenet", 40, 512)])
@pytest.mark.parametrize("objective", ["zeus-cost", "min-energy"])
def test_public_profiles_match_enumeration_and_beat_baselines(hetero_aws, workload, steps, batch, objective):
    a10 = Profile.load(hetero_aws / f"{workload}_a10.json", steps)
    t4 = Profile.load(hetero_aws / f"{workload}_t4.json", steps)
    problem = Problem((GpuType("A10", 1, a10, 20.0), GpuType("T4", 1, t4, 10.0)), batch, 8, 0.01, objective)
    alloc = solve(problem)
    assert alloc.objective_value == pytest.approx(enumerate_optimum(problem).objective_value, rel=1e-6)
    # The straggler is priced in: the weaker T4 never gets the larger share.
    assert alloc.choices[1].local_batch < alloc.choices[0].local_batch
    baselines = all_baselines(problem)
    for name, base in baselines.items():
        if isinstance(base, str):  # a baseline that cannot meet the min-energy time bound says so
            assert objective == "min-energy" and "within max_slowdown" in base
        elif base.extra.get("meets_time_bound", True):
            assert base.objective_value >= alloc.objective_value * (1 - 1e-9), name
            assert base.iteration_time_s <= alloc.extra.get("fastest_iteration_time_s", 1e9) * 1.1 * (1 + 1e-9)


def test_baselines_follow_their_definitions():
    problem = hand_problem(global_batch=60)
    even = even_split_best_limits(problem)
    assert [c.local_batch for c in even.choices] == [20, 20]
    heuristic = strongest_at_lowest_limit(problem)
    assert heuristic.choices[0].power_limit == 100  # A is the stronger type
    assert "does not split evenly" in all_baselines(hand_problem())["even split, best limits"]


def test_unreachable_global_batch_says_the_range():
    with pytest.raises(InfeasibleError, match=r"can only take a global batch between 30 and 90.*A x1: local batch 10..30"):
        solve(hand_problem(global_batch=1000))


def test_granularity_that_cannot_sum_to_the_batch():
    with pytest.raises(InfeasibleError, match="no combination of local batches in steps of 10 sums to it"):
        solve(hand_problem(global_batch=75))


def test_granularity_outside_a_profile():
    with pytest.raises(InfeasibleError, match=r"'A': no multiple of batch_granularity 40 lies in its profiled batch range \[10, 30\]"):
        solve(hand_problem(granularity=40, global_batch=80))


def test_single_batch_size_profile_is_explained():
    single = Profile([32], [200], time=[[1.0]], energy=[[10.0]], profile_steps=1, source="one.json")
    problem = Problem((GpuType("A", 1, single), GpuType("B", 1, PROF_B)), global_batch=100, granularity=2)
    with pytest.raises(InfeasibleError, match=r"A x1: local batch 32..32 \(single profiled batch size\)"):
        solve(problem)
    # Where the single size is all that is needed, it is used as it is.
    fits = Problem((GpuType("A", 1, single), GpuType("B", 1, PROF_B)), global_batch=52, granularity=2)
    assert [c.local_batch for c in solve(fits).choices] == [32, 20]


def test_problem_validation():
    with pytest.raises(HeteroError, match="objective must be one of zeus-cost, min-energy"):
        hand_problem(objective="fast")
    with pytest.raises(ValueError, match="eta_knob must be between 0 and 1"):
        hand_problem(eta=1.5)
    with pytest.raises(HeteroError, match="max_slowdown must be a finite number >= 1"):
        hand_problem(max_slowdown=0.9)
    with pytest.raises(HeteroError, match="names must be unique; repeated: A"):
        Problem((GpuType("A", 1, PROF_A), GpuType("A", 1, PROF_B)), global_batch=40)
    with pytest.raises(HeteroError, match="count must be at least 1"):
        GpuType("A", 0, PROF_A)

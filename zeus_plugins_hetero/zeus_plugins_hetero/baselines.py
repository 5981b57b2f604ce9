"""The allocations the optimum is compared against, all priced by the same step model.

* ``even split, max limits``: what plain data-parallel training does.
* ``even split, best limits``: the published prototype's baseline (it searched the
  limit pairs at a 50/50 split).
* ``strongest at lowest limit``: the prototype's heuristic ("give the strongest
  GPU the weakest power limit", then search the rest), generalised to K types by
  pinning the type with the highest profiled throughput and searching everything
  else exactly.

Each returns an :class:`Allocation`, or raises :class:`InfeasibleError` saying why
that baseline does not exist for the job (an even split off the profiled range).
Under ``min-energy`` the searched baselines are held to the same time bound as
the optimum (max_slowdown x the fastest step of the whole problem); the fixed
``even split, max limits`` is reported as it is, with ``meets_time_bound``.
"""

from __future__ import annotations

import numpy as np

from zeus_plugins_hetero.model import Allocation, InfeasibleError, Problem, evaluate
from zeus_plugins_hetero.solver import SLOWDOWN_RTOL, fastest_step_time, solve

EVEN_MAX = "even split, max limits"
EVEN_BEST = "even split, best limits"
HEURISTIC = "strongest at lowest limit"


def even_batch(problem: Problem) -> int:
    """The per-GPU batch of an even split, or an error saying why there is none."""
    n = problem.n_gpus
    if problem.global_batch % n:
        raise InfeasibleError(f"global batch {problem.global_batch} does not split evenly over {n} GPUs")
    b = problem.global_batch // n
    for gpu in problem.gpus:
        prof = gpu.profile
        if not prof.min_batch <= b <= prof.max_batch:
            raise InfeasibleError(
                f"an even split gives {gpu.name} a local batch of {b}, outside its profile [{prof.min_batch}, {prof.max_batch}]"
            )
    return b


def even_split_max_limits(problem: Problem) -> Allocation:
    b = even_batch(problem)
    limits = [g.profile.max_power_limit for g in problem.gpus]
    alloc = evaluate(problem, [b] * len(problem.gpus), limits, method=EVEN_MAX)
    if problem.objective == "min-energy":
        bound = problem.max_slowdown * fastest_step_time(problem)
        alloc.extra["meets_time_bound"] = alloc.iteration_time_s <= bound * (1 + SLOWDOWN_RTOL)
    return alloc


def even_split_best_limits(problem: Problem) -> Allocation:
    b = even_batch(problem)
    return solve(problem, restrict={k: ([b], None) for k in range(len(problem.gpus))}, method=EVEN_BEST)


def strongest_type(problem: Problem) -> int:
    """The type with the highest profiled throughput (largest batch, highest limit)."""
    rates = []
    for gpu in problem.gpus:
        prof = gpu.profile
        j = int(np.argmax(prof.power_limits))
        rates.append(prof.max_batch * prof.profile_steps / prof.time[-1, j])
    return int(np.argmax(rates))


def strongest_at_lowest_limit(problem: Problem) -> Allocation:
    k = strongest_type(problem)
    low = float(problem.gpus[k].profile.power_limits.min())
    return solve(problem, restrict={k: (None, [low])}, method=HEURISTIC)


BASELINES = {
    EVEN_MAX: even_split_max_limits,
    EVEN_BEST: even_split_best_limits,
    HEURISTIC: strongest_at_lowest_limit,
}


def all_baselines(problem: Problem) -> dict[str, Allocation | str]:
    """Every baseline by name: its allocation, or the reason it does not exist."""
    out: dict[str, Allocation | str] = {}
    for name, fn in BASELINES.items():
        try:
            out[name] = fn(problem)
        except InfeasibleError as exc:
            out[name] = str(exc)
    return out

"""Problem instances shared by the hetero benchmarks (not a benchmark itself).

The public profiles are read from ../shared/data/hetero_aws (never copied). Only
two GPU types were profiled publicly, so the 4-type case adds two derived types,
a faster/hungrier A10 variant and a slower T4 variant, made by scaling the
public tables; the solver's work does not depend on what the numbers mean.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zeus_plugins_hetero.model import GpuType, Problem
from zeus_plugins_hetero.profile import Profile

HETERO_AWS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "hetero_aws"
STEPS = {"cifar": 10, "imagenet": 40}


def public(workload: str, gpu: str) -> Profile:
    return Profile.load(HETERO_AWS / f"{workload}_{gpu}.json", STEPS[workload])


def scaled(p: Profile, time: float, energy: float, limits: float, name: str) -> Profile:
    return Profile(p.batch_sizes, p.power_limits * limits, p.time * time, p.energy * energy, p.profile_steps, name)


def four_types(count: int = 2) -> tuple[GpuType, ...]:
    a10, t4 = public("cifar", "a10"), public("cifar", "t4")
    return (
        GpuType("A10", count, a10, 20.0),
        GpuType("T4", count, t4, 10.0),
        GpuType("A10-fast", count, scaled(a10, 0.6, 1.25, 1.2, "a10 x0.6 time"), 30.0),
        GpuType("T4-slow", count, scaled(t4, 1.5, 1.1, 1.0, "t4 x1.5 time"), 8.0),
    )


def eight_gpu_problem(objective: str = "zeus-cost", eta: float = 0.5) -> Problem:
    """8 GPUs of 4 types, granularity 8, global batch 4096: the issue's speed target."""
    return Problem(four_types(2), global_batch=4096, granularity=8, allreduce_time_s=0.01, objective=objective, eta=eta, max_slowdown=1.1)


def random_problem(rng: np.random.Generator, n_types: int) -> Problem:
    """A small random problem (noisy, roughly linear profiles) that exhaustive enumeration can check."""
    gpus = []
    for k in range(n_types):
        lo = int(rng.choice([8, 16, 32]))
        batches = np.unique(np.concatenate([[lo], rng.choice(np.arange(lo + 8, 161, 8), size=4, replace=False)]))
        limits = np.sort(rng.choice([300, 250, 200, 150, 100, 70], size=int(rng.integers(1, 5)), replace=False))
        slow = 1.0 + 0.6 * (limits.max() - limits) / limits.max()
        t = (0.02 + 0.002 * batches[:, None] / rng.uniform(0.5, 2.0)) * slow[None, :]
        t = t * rng.uniform(0.9, 1.1, size=t.shape)
        e = t * limits[None, :] * rng.uniform(0.6, 0.95, size=t.shape)
        steps = int(rng.integers(1, 40))
        prof = Profile(batches, limits, t * steps, e * steps, steps, f"random{k}")
        gpus.append(GpuType(f"g{k}", int(rng.integers(1, 4)), prof, float(rng.uniform(0, 40))))
    lo = sum(g.count * g.profile.min_batch for g in gpus)
    hi = sum(g.count * g.profile.max_batch for g in gpus)
    return Problem(
        tuple(gpus),
        global_batch=int(rng.integers(lo, hi + 1)) // 8 * 8,
        granularity=int(rng.choice([4, 8, 16])),
        allreduce_time_s=float(rng.choice([0.0, rng.uniform(0, 0.05)])),
        objective=str(rng.choice(["zeus-cost", "min-energy"])),
        eta=float(rng.choice([0.0, 1.0, rng.uniform()])),
        max_slowdown=float(rng.uniform(1.0, 1.5)),
    )

"""Exactness of the hetero allocator: its optimum against exhaustive enumeration, same run.

Random small problems (1-4 GPU types, both objectives, eta in {0, 1, random}) and
the public A10+T4 profiles at several global batches and eta values. Objective
values must agree to 1e-6 relative (argmins may differ where ties exist).
Prints the worst relative gap and the time of both methods.

    python benchmarks/hetero_exactness.py [--cases 300]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from hetero_cases import public
from rich.console import Console
from rich.table import Table

from zeus_plugins_hetero.bruteforce import count_allocations, enumerate_optimum
from zeus_plugins_hetero.model import GpuType, InfeasibleError, Problem
from zeus_plugins_hetero.solver import solve

RTOL = 1e-6


def compare(problem: Problem):
    """(relative gap, solver s, enumeration s, allocations) or None when infeasible."""
    t0 = time.perf_counter()
    try:
        ref = enumerate_optimum(problem)
    except InfeasibleError:
        return None
    t1 = time.perf_counter()
    got = solve(problem)
    t2 = time.perf_counter()
    gap = abs(got.objective_value - ref.objective_value) / max(abs(ref.objective_value), 1e-12)
    return gap, t2 - t1, t1 - t0, count_allocations(problem)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    from hetero_cases import random_problem

    console = Console()
    rng = np.random.default_rng(args.seed)
    table = Table(title="hetero allocator vs exhaustive enumeration (objective values, rtol 1e-6)")
    for col in (
        "problems",
        "cases",
        "checked",
        "allocations (max)",
        "worst rel. gap",
        "solver s (total)",
        "enumeration s (total)",
        "mismatches",
    ):
        table.add_column(col, justify="right")
    failures = 0
    groups = {}
    for i in range(args.cases):
        n_types = 1 + i % 4
        problem = random_problem(rng, n_types)
        r = compare(problem)
        groups.setdefault(f"random, {n_types} type(s)", []).append(r)
    for workload, batches in (("cifar", (256, 1024, 1536)), ("imagenet", (128, 512, 896))):
        a10, t4 = public(workload, "a10"), public(workload, "t4")
        for b in batches:
            for objective, eta in (("zeus-cost", 0.0), ("zeus-cost", 0.5), ("zeus-cost", 1.0), ("min-energy", 0.5)):
                problem = Problem((GpuType("A10", 1, a10, 20.0), GpuType("T4", 1, t4, 10.0)), b, 8, 0.01, objective, eta, 1.1)
                groups.setdefault(f"public {workload} A10+T4", []).append(compare(problem))
    for name, results in groups.items():
        ok = [r for r in results if r is not None]
        bad = sum(1 for r in ok if r[0] > RTOL)
        failures += bad
        table.add_row(
            name,
            str(len(results)),
            str(len(ok)),
            f"{max(r[3] for r in ok):,}" if ok else "-",
            f"{max(r[0] for r in ok):.1e}" if ok else "-",
            f"{sum(r[1] for r in ok):.3f}",
            f"{sum(r[2] for r in ok):.3f}",
            str(bad),
        )
    console.print(table)
    console.print(f"[bold]{'all optima match' if not failures else f'{failures} MISMATCHES'}[/]")
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()

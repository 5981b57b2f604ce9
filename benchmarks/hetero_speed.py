"""Speed of the exact hetero allocator on the issue's target: 8 GPUs of 4 types, granularity 8, batch 4096.

Measured in one run and printed as ratios:

* the exact solver (threshold search + DP), both objectives, median of repeats;
* exhaustive enumeration vectorised in numpy (same optimum, checked to 1e-6);
* a prototype-style brute force: pure-Python loops over every allocation of the
  same model, run for ``--cap`` seconds and extrapolated from its measured rate
  to the exact number of allocations (counted, not estimated);
* for scale only, the published prototype's own two-GPU loop shape: a pure-Python
  scan of all (b1, PL1) x (b2, PL2) pairs for B = 4096 with 5 and 3 limits
  (251.7 M pairs), keeping pairs with b1 + b2 = B and costing them with
  quadratic fits. This lean loop is far faster than the prototype's code
  (which stores every cost in a dict through pandas); it solves a different,
  smaller problem, so it gets no ratio.

    python benchmarks/hetero_speed.py [--cap 10] [--no-exhaustive]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import numpy as np
from hetero_cases import eight_gpu_problem, public
from rich.console import Console
from rich.table import Table

from zeus_plugins_hetero.bruteforce import count_allocations, enumerate_optimum
from zeus_plugins_hetero.model import Problem
from zeus_plugins_hetero.solver import solve


def time_solver(problem: Problem, repeats: int):
    times, alloc = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        alloc = solve(problem)
        times.append(time.perf_counter() - t0)
    return alloc, statistics.median(times), max(times)


def python_brute_force(problem: Problem, cap_s: float):
    """Every allocation in pure Python until ``cap_s``; returns (evaluated, seconds, best value, finished)."""
    tables = [problem.table(k) for k in range(len(problem.gpus))]
    counts = [g.count for g in problem.gpus]
    idle = [g.idle_power_w for g in problem.gpus]
    rows = [
        [(int(b), [(float(t.time[i, j]), float(t.energy[i, j])) for j in range(t.limits.size)]) for i, b in enumerate(t.batches)]
        for t in tables
    ]
    last = {int(b) * counts[-1]: i for i, b in enumerate(tables[-1].batches)}
    eta, mp, ar = problem.eta, problem.max_power_w, problem.allreduce_time_s
    best, done = float("inf"), 0
    start = time.perf_counter()
    deadline = start + cap_s
    for head in itertools.product(*rows[:-1]):
        rest = problem.global_batch - sum(c * b for c, (b, _) in zip(counts, head))
        if rest not in last:
            continue
        choice = head + (rows[-1][last[rest]],)
        for limits in itertools.product(*[opts for _, opts in choice]):
            step = max(t for t, _ in limits) + ar
            energy = sum(c * (e + p * (step - t)) for c, p, (t, e) in zip(counts, idle, limits))
            cost = eta * energy + (1 - eta) * mp * step
            if cost < best:
                best = cost
            done += 1
        if time.perf_counter() > deadline:
            return done, time.perf_counter() - start, best, False
    return done, time.perf_counter() - start, best, True


def prototype_pair_scan(cap_s: float, batch: int = 4096):
    """The prototype's search shape on A10+T4 (cifar): all pairs of (b, PL) entries, b in 0..B-1.

    Quadratic fits of time and average power per limit, clamped at 0, cost summed
    over both GPUs with eta = 0.5 and each GPU's own limit in place of MAXPOWER.
    Returns (pairs scanned, seconds, total pairs, finished).
    """
    fits = []
    for gpu in ("a10", "t4"):
        prof = public("cifar", gpu)
        b = prof.batch_sizes.astype(float)
        fits.append(
            [
                (float(p), np.polyfit(b, prof.time[:, j], 2), np.polyfit(b, prof.energy[:, j] / prof.time[:, j], 2))
                for j, p in enumerate(prof.power_limits)
            ]
        )
    lists = [[(b, i) for b in range(batch) for i in range(len(f))] for f in fits]
    total = len(lists[0]) * len(lists[1])

    def cost(gpu, b, i):
        p, tc, pc = fits[gpu][i]
        t = max(tc[0] * b * b + tc[1] * b + tc[2], 0.0)
        w = max(pc[0] * b * b + pc[1] * b + pc[2], 0.0)
        return (0.5 * w + 0.5 * p) * t

    best = float("inf")
    scanned = 0
    start = time.perf_counter()
    deadline = start + cap_s
    for b1, i1 in lists[0]:
        for b2, i2 in lists[1]:
            if b1 + b2 == batch:
                c = cost(0, b1, i1) + cost(1, b2, i2)
                if c < best:
                    best = c
        scanned += len(lists[1])
        if time.perf_counter() > deadline:
            return scanned, time.perf_counter() - start, total, False
    return scanned, time.perf_counter() - start, total, True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cap", type=float, default=10.0, help="seconds each pure-Python search may run")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-exhaustive", action="store_true", help="skip the numpy enumeration (~20 s)")
    args = ap.parse_args()
    console = Console()

    cost_problem = eight_gpu_problem("zeus-cost")
    energy_problem = eight_gpu_problem("min-energy")
    n_alloc = count_allocations(cost_problem)
    console.print(
        f"8 GPUs ({', '.join(f'{g.count}x {g.name}' for g in cost_problem.gpus)}), granularity 8, "
        f"global batch 4096: {n_alloc:,} allocations"
    )

    best, t_cost, t_cost_max = time_solver(cost_problem, args.repeats)
    best_e, t_energy, t_energy_max = time_solver(energy_problem, args.repeats)
    table = Table(title="hetero allocator speed (same run)")
    for col in ("method", "seconds", "vs exact solver (zeus-cost)", "note"):
        table.add_column(col, justify="right")
    table.add_row("exact solver, zeus-cost", f"{t_cost:.3f}", "1.0x", f"median of {args.repeats}, max {t_cost_max:.3f} s")
    table.add_row(
        "exact solver, min-energy", f"{t_energy:.3f}", f"{t_energy / t_cost:.2f}x", f"median of {args.repeats}, max {t_energy_max:.3f} s"
    )

    if not args.no_exhaustive:
        t0 = time.perf_counter()
        ref = enumerate_optimum(cost_problem)
        t_enum = time.perf_counter() - t0
        gap = abs(ref.cost - best.cost) / ref.cost
        table.add_row(
            "numpy exhaustive enumeration",
            f"{t_enum:.2f}",
            f"{t_enum / t_cost:,.0f}x",
            f"optimum gap {gap:.1e} ({'match' if gap <= 1e-6 else 'MISMATCH'})",
        )

    done, secs, py_best, finished = python_brute_force(cost_problem, args.cap)
    rate = done / secs
    t_py = secs if finished else n_alloc / rate
    table.add_row(
        "pure-Python brute force (this model)",
        f"{t_py:,.0f}" + ("" if finished else " (extrap.)"),
        f"{t_py / t_cost:,.0f}x",
        f"{done:,} of {n_alloc:,} in {secs:.1f} s, {rate:,.0f}/s",
    )

    scanned, secs, total, finished = prototype_pair_scan(args.cap)
    t_proto = secs if finished else total / (scanned / secs)
    table.add_row(
        "prototype's 2-GPU pair scan (A10+T4)",
        f"{t_proto:,.1f}" + ("" if finished else " (extrap.)"),
        "n/a",
        f"{scanned:,} of {total:,} pairs in {secs:.1f} s; a lean re-implementation of its "
        "loop shape on its own smaller problem, so no ratio",
    )
    console.print(table)
    console.print(
        "optimum (zeus-cost): "
        + ", ".join(f"{c.count}x {c.name} {c.local_batch}@{c.power_limit:g}W" for c in best.choices)
        + f"; step {best.iteration_time_s * 1e3:.1f} ms, {best.iteration_energy_j:.1f} J, cost {best.cost:.2f}"
    )
    console.print(
        f"target < 1 s: {'met' if max(t_cost_max, t_energy_max) < 1 else 'MISSED'} (slowest solve {max(t_cost_max, t_energy_max):.3f} s)"
    )


if __name__ == "__main__":
    main()

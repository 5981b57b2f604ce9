"""The Alibaba group replay: both in-flight rules side by side, its speed, and zeus sweep's scaling.

    python benchmarks/alibaba_replay.py [--groups 100] [--seeds 0-1] [--gpu v100] [--traces DIR|synthetic]

For each seed it generates ``--groups`` synthetic groups (``zeus traces alibaba-synth``'s
model) and replays them on the public NSDI'23 traces with the ``mab`` policy (the job
of ``examples/alibaba/job.toml``, built through the registry as ``zeus run`` builds it)
under the ``paper`` and ``improved`` in-flight rules, and prints per rule:

* cost saved against the default and regret against the oracle over all groups
  (totals: expensive groups weigh more) and as the mean over groups (each group
  counts once), with the worst group's regret;
* the same by arrival pattern (periodic, burst, sequential);
* groups per second, next to the single-job simulator's speed measured in the same
  run on jobs of the same length (one simulation of each group's dataset with as many
  recurrences as the group has jobs, the same policy);

then ``zeus sweep`` over a small grid with 1 and 2 local workers, as a wall-time ratio.
"""

from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

import attrs
import numpy as np
from rich.console import Console
from rich.table import Table

from zeus_core import BuildContext
from zeus_core.engine.registry import get_registry
from zeus_core.engine.validation import load_job
from zeus_plugins_trace.groupsynth import overlap_share
from zeus_plugins_trace.simulate import simulate
from zeus_plugins_trace.sweep import sweep

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "examples" / "alibaba" / "job.toml"


def build_replay(traces: str, gpu: str, groups: int, seed: int):
    """The example job's replay part (and its context), as zeus run builds them."""
    registry = get_registry()
    spec = load_job(
        JOB,
        registry,
        [f'profiler.traces="{traces}"', f'device.gpu="{gpu}"', f"profiler.synthetic_groups={groups}", f"profiler.groups_seed={seed}"],
    )
    ctx = BuildContext(spec, None, Console(file=io.StringIO()), registry)
    for section in ("device", "profiler"):
        part = spec.parts[section]
        ctx.parts[section] = part.registration.factory(part.options, ctx)
    return ctx.parts["profiler"], ctx


def single_job_speed(replay, ctx) -> tuple[float, int]:
    """Seconds to simulate one single job per group (same dataset, as many recurrences as the group has jobs)."""
    from zeus_plugins_trace.tracesets import load_workload_traces

    traces = load_workload_traces(replay.options, replay.gpu, ctx.job_dir)
    settings = {w.dataset: w for w in replay.options.workloads}
    makers = {d: replay.make_policy(wt) for d, wt in traces.items()}
    t0 = time.perf_counter()
    for k, g in enumerate(replay.groups):
        w = settings[g.dataset]
        job = attrs.evolve(ctx.spec.job, recurrences=len(g.jobs), seed=k, target_metric=w.target_metric, max_epochs=w.max_epochs)
        simulate(traces[g.dataset], makers[g.dataset](k), job, default_batch_size=w.default_batch_size)
    return time.perf_counter() - t0, sum(len(g.jobs) for g in replay.groups)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=100, help="groups per seed (default 100)")
    ap.add_argument("--seeds", default="0-1", help="first-last seed of the group generator (default 0-1)")
    ap.add_argument("--gpu", default="v100")
    ap.add_argument("--traces", default=str(REPO.parent / "shared" / "data" / "zeus_nsdi23"), help="trace folder, or synthetic")
    ap.add_argument("--sweep-points", type=int, default=4, help="points of the zeus sweep timing (default 4)")
    args = ap.parse_args()
    first, _, last = args.seeds.partition("-")
    seeds = range(int(first), int(last or first) + 1)
    console = Console(width=150)

    rows: dict[str, list] = {}
    replay_s = single_s = 0.0
    n_groups = n_jobs = 0
    overlap: dict[str, list[float]] = {}
    per_seed: list[str] = []
    for seed in seeds:
        replay, ctx = build_replay(args.traces, args.gpu, args.groups, seed)
        t0 = time.perf_counter()
        replay.plan(ctx)
        replay_s += time.perf_counter() - t0
        s, jobs = single_job_speed(replay, ctx)
        single_s += s
        n_groups += len(replay.groups)
        n_jobs += jobs
        for g in replay.groups:
            overlap.setdefault(replay.extra[g.id]["pattern"], []).append(overlap_share(g))
        for r in replay.results:
            rows.setdefault(r.rule, []).append(
                (
                    replay.extra[r.group]["pattern"],
                    r.totals()["cost"],
                    r.baseline_totals("default")["cost"],
                    r.baseline_totals("oracle")["cost"],
                )
            )
        line = []
        for rule in replay.options.inflight:
            mine = [r for r in replay.results if r.rule == rule]
            c = sum(r.totals()["cost"] for r in mine)
            o = sum(r.baseline_totals("oracle")["cost"] for r in mine)
            mean = np.mean([r.totals()["cost"] / r.baseline_totals("oracle")["cost"] - 1 for r in mine])
            line.append(f"{rule} {c / o - 1:.2%} total, {mean:.2%} per group")
        per_seed.append(f"seed {seed}: regret vs oracle: " + "; ".join(line))
    rules = list(rows)
    table = Table(
        title=f"{n_groups} synthetic groups ({args.groups} per seed, seeds {args.seeds}), {n_jobs} jobs, "
        f"mab policy on {args.gpu} ({'synthetic' if args.traces == 'synthetic' else 'public'} traces)"
    )
    for col in ("rule", "groups", "total: cost saved", "total: regret", "per group: cost saved", "per group: regret", "worst group regret"):
        table.add_column(col, justify="right")
    for rule in rules:
        for pattern in (None, "periodic", "burst", "sequential"):
            sel = [x for x in rows[rule] if pattern is None or x[0] == pattern]
            c, d, o = (np.array([x[i] for x in sel]) for i in (1, 2, 3))
            table.add_row(
                rule if pattern is None else f"  {pattern}",
                str(len(sel)),
                f"{1 - c.sum() / d.sum():.2%}",
                f"{c.sum() / o.sum() - 1:.2%}",
                f"{np.mean(1 - c / d):.2%}",
                f"{np.mean(c / o - 1):.2%}",
                f"{np.max(c / o - 1):.1%}",
            )
        table.add_section()
    console.print(table)
    for line in per_seed:
        console.print(line)
    console.print(
        "jobs submitted while an earlier one of their group ran: " + ", ".join(f"{p} {np.mean(v):.0%}" for p, v in sorted(overlap.items()))
    )
    for a, b in zip(rules, rules[1:]):
        ra = np.array([x[1] / x[3] - 1 for x in rows[a]])
        rb = np.array([x[1] / x[3] - 1 for x in rows[b]])
        console.print(
            f"{b} vs {a}: lower regret in {np.mean(rb < ra - 1e-12):.0%} of groups, higher in {np.mean(rb > ra + 1e-12):.0%}; "
            f"total cost {sum(x[1] for x in rows[b]) / sum(x[1] for x in rows[a]):.4f}x"
        )
    per_rule = replay_s / len(rules)
    console.print(
        f"replay: {n_groups / per_rule:.1f} groups/s per rule ({per_rule / n_groups * 1000:.1f} ms per group, "
        f"{n_jobs / per_rule:,.0f} jobs/s); single-job simulator on jobs of the same lengths: "
        f"{n_groups / single_s:.1f} simulations/s ({n_jobs / single_s:,.0f} recurrences/s); "
        f"replay / simulator speed: {single_s / per_rule:.2f}x"
    )

    axis = [("job.eta_knob", [round(0.2 + 0.6 * k / max(args.sweep_points - 1, 1), 3) for k in range(args.sweep_points)])]
    sets = (f'profiler.traces="{args.traces}"', f'device.gpu="{args.gpu}"', "profiler.synthetic_groups=20")
    wall = {}
    for workers in (1, 2):
        t0 = time.perf_counter()
        text = sweep(JOB, axis, sets, executor="pool", workers=workers)
        wall[workers] = time.perf_counter() - t0
        if workers == 1:
            first_table = text
        else:
            assert text == first_table, "the sweep's table depends on the worker count"
    console.print(
        f"zeus sweep, {args.sweep_points} points x 20 groups x {len(rules)} rules: 1 worker {wall[1]:.2f} s, "
        f"2 workers {wall[2]:.2f} s; speed-up {wall[1] / wall[2]:.2f}x (same table)"
    )


if __name__ == "__main__":
    main()

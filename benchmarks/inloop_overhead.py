"""What ``PowerLimitOptimizer.on_step_begin`` / ``on_step_end`` cost a training loop, on the simulated driver.

A loop of fixed work (each step busy-waits ``--step-ms``, 1 ms by default) runs
bare and with the two calls around every step, the power policy (``jit``)
holding the limit it chose in an earlier run of the job (the steady state of a
recurring job: no profiling left). The rounds interleave bare and instrumented
epochs (the order alternating), so load from other processes falls on both
alike, and the figure is the median over rounds of (instrumented time / bare
time - 1). Target: under 1 % of a 1 ms step.

The calls' own cost is also timed directly (a million calls, no work), which
does not depend on the noise of the 1 ms steps; and, for reference, a profiling
epoch (the policy acting at every step: a synchronisation, its windows and
limits), which is not a steady-state cost and has no target.

    python benchmarks/inloop_overhead.py [--steps 1000] [--rounds 21] [--step-ms 1.0] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def bare(steps: int, step_s: float) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        spin(step_s)
    return time.perf_counter() - t0


def instrumented(plo, steps: int, step_s: float) -> float:
    plo.on_epoch_begin(steps)
    t0 = time.perf_counter()
    for _ in range(steps):
        plo.on_step_begin()
        spin(step_s)
        plo.on_step_end()
    elapsed = time.perf_counter() - t0
    plo.on_epoch_end()
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000, help="steps per epoch")
    ap.add_argument("--rounds", type=int, default=21, help="interleaved bare/instrumented epoch pairs; the median is reported")
    ap.add_argument("--step-ms", type=float, default=1.0, help="work per step (busy wait)")
    ap.add_argument("--calls", type=int, default=1_000_000, help="calls of the direct timing")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="zeus-inloop-bench-") as tmp:
        os.environ["ZEUS_STATE_DIR"] = str(Path(tmp) / "state")
        os.chdir(tmp)
        from zeus_plugins_nvml import fake_pynvml

        fake_pynvml.install(fake_pynvml.create(Path(tmp) / "driver.json", 1, privileged=True))
        from zeus_core import PowerLimitOptimizer, ZeusMonitor

        step_s = args.step_ms / 1000
        jit = {"warmup_iters": 2, "measure_iters": 10}
        with ZeusMonitor(gpu_indices=[0], cpu_indices=[]) as monitor:
            # An earlier run of the job profiled the limits: its choice is in the job's store.
            with PowerLimitOptimizer(monitor, "jit", job="bench", options=jit, batch_size=64) as first:
                profiling = instrumented(first, 13 * 12, step_s)  # every limit profiled in one epoch
                chosen = first.power_limit
                profiled_steps = 13 * 12
            profile_bare = bare(profiled_steps, step_s)
            with PowerLimitOptimizer(monitor, "jit", job="bench", options=jit, batch_size=64) as plo:
                assert plo.power_limit == chosen
                ratios, bares, insts = [], [], []
                for r in range(args.rounds):
                    if r % 2:
                        b = bare(args.steps, step_s)
                        i = instrumented(plo, args.steps, step_s)
                    else:
                        i = instrumented(plo, args.steps, step_s)
                        b = bare(args.steps, step_s)
                    assert not plo.profiling
                    bares.append(b)
                    insts.append(i)
                    ratios.append(i / b - 1)
                # The calls alone, in a long epoch of no work.
                plo.on_epoch_begin()
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    plo.on_step_begin()
                    plo.on_step_end()
                per_call_s = (time.perf_counter() - t0) / args.calls
                plo.on_epoch_end()
        back = fake_pynvml.read_state()["gpus"][0]["limit_w"]

    median = statistics.median(ratios)
    direct = per_call_s / step_s
    out = {
        "step_ms": args.step_ms,
        "steps": args.steps,
        "rounds": args.rounds,
        "overhead_median": median,
        "overhead_quartiles": statistics.quantiles(ratios, n=4),
        "bare_epoch_s_median": statistics.median(bares),
        "instrumented_epoch_s_median": statistics.median(insts),
        "calls_us_per_step": per_call_s * 1e6,
        "calls_share_of_step": direct,
        "profiling_epoch_overhead": profiling / profile_bare - 1,
        "held_limit_w": chosen,
        "limit_after_w": back,
    }
    print(f"on_step_begin + on_step_end around a {args.step_ms:g} ms step, jit holding {chosen:g} W (steady state)")
    print(
        f"  interleaved epochs ({args.rounds} rounds x {args.steps} steps): median overhead {median * 100:+.3f} % "
        f"(quartiles {', '.join(f'{q * 100:+.3f} %' for q in out['overhead_quartiles'])})"
    )
    print(f"  the calls alone: {per_call_s * 1e6:.3f} µs per step = {direct * 100:.4f} % of the step")
    print(f"  target: under 1 % of a 1 ms step: {'met' if max(median, direct) < 0.01 else 'NOT met'}")
    print(
        f"  one profiling epoch ({profiled_steps} steps, 13 limits) against one bare epoch, a single pair: "
        f"{out['profiling_epoch_overhead'] * 100:+.1f} %"
    )
    print(f"  GPU limit after the run: {back:g} W (back at its original)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if max(median, direct) < 0.01 and back == 400.0 else 1


if __name__ == "__main__":
    sys.exit(main())

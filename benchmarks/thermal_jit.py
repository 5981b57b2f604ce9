"""How often the JIT power profiler picks the wrong limit on a GPU whose power depends on its
temperature, with and without thermally stable profiling (issue 37, item 3).

On the simulated NVIDIA driver with its temperature quirk on (``thermal_tau_s``: the die heats
towards ``ambient + thermal_c_per_w x draw`` with that time constant, and leakage takes
``leakage_w_per_c`` per degree out of the power limit), a training loop whose speed follows the
power the GPU spends on work (``fake_pynvml.useful_w``: throughput grows as power^(1/3), the
cube law of dynamic power in frequency) is driven by ``PowerLimitOptimizer(policy="jit")``
from a cold GPU, once as today (``warmup_iters`` then a window per limit, highest first) and
once with ``thermally_stable = true`` (each limit warms up until power and temperature have
settled). Each seed draws another GPU (demand, leakage, heating per watt, time constant);
the right limit is the one with the lowest cost per step at its own steady temperature,
computed from the driver's model. A pick is wrong when its steady cost exceeds the best by
more than ``--tolerance`` (1 %: limits closer than that are as good as each other).

    python benchmarks/thermal_jit.py [--seeds 5] [--step-ms 4] [--tau-s 0.5] [--json out.json]

It prints, for each way, the wrong picks out of the seeds and the mean regret (extra steady
cost of the pick), and the ratio of wrong picks (without / with). Figures come only from a run.

Each JIT run is its own Python process on a **virtual clock** (:class:`VirtualClock`: the
``time`` module's ``monotonic``, ``perf_counter`` and ``sleep`` replaced before zeus is
imported): the simulated driver's heating and energy, the monitor's windows and the JIT's
timing all read it, and only the training loop's steps advance it, each by its modelled
length. The figures therefore do not move with the machine's load or speed: a run gives the
same picks, regrets and ratio every time, on any machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ETA = 0.5
IDLE_W = 60.0


class VirtualClock:
    """Simulated time for a whole process (installed before zeus is imported): ``monotonic`` and
    ``perf_counter`` read it, ``sleep`` and :meth:`advance` move it; nothing else does, so what the
    process measures is what its model says, not how long this machine took."""

    def __init__(self, start_s: float = 1000.0) -> None:
        self.t = start_s

    def now(self) -> float:
        return self.t

    def now_ns(self) -> int:
        return int(self.t * 1e9)

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self.t += seconds

    def install(self) -> None:
        time.monotonic = time.perf_counter = self.now  # type: ignore[assignment]
        time.monotonic_ns = time.perf_counter_ns = self.now_ns  # type: ignore[assignment]
        time.sleep = self.advance  # type: ignore[assignment]


def gpu_params(seed: int, tau_s: float) -> dict[str, float]:
    """One simulated GPU: its demand, heating and leakage (seeded)."""
    rng = random.Random(seed)
    return {
        "demand_w": rng.uniform(280.0, 360.0),
        "thermal_c_per_w": rng.uniform(0.12, 0.16),
        "leakage_w_per_c": rng.uniform(1.0, 2.5),
        "thermal_tau_s": tau_s * rng.uniform(0.8, 1.2),
    }


def steady_cost(limit: float, p: dict[str, float], max_w: float, work_s: float) -> float:
    """Cost per step at ``limit`` once the die has reached its steady temperature there (the driver's model)."""
    base = max(min(p["demand_w"], limit), IDLE_W)
    leak = p["leakage_w_per_c"] * p["thermal_c_per_w"] * base
    total = min(base + leak, max(base, limit))
    step = work_s / ((total - leak) / p["demand_w"]) ** (1 / 3)
    return step * (ETA * total + (1 - ETA) * max_w)


def run_jit(
    p: dict[str, float], stable: bool, args: argparse.Namespace, path: Path, min_limit_w: float = 100.0
) -> tuple[float, list[float]]:
    """The limit the JIT holds after its profiling epoch on the GPU ``p`` (from cold), and the limits it profiled."""
    got = jit_run(p, stable, args, path, min_limit_w)
    return got["chosen_w"], got["limits"]


def jit_run(p: dict[str, float], stable: bool, args: argparse.Namespace, path: Path, min_limit_w: float = 100.0) -> dict:
    """:func:`run_jit` with what the JIT measured: ``chosen_w``, ``limits``, ``profile`` (limit -> [seconds,
    joules] per step), and the ``steps`` the loop ran until the JIT chose. The run is a fresh Python
    process on a :class:`VirtualClock` (``path``: its simulated driver's state)."""
    job = {
        "gpu": p,
        "stable": stable,
        "path": str(path),
        "min_limit_w": min_limit_w,
        "options": {k: getattr(args, k) for k in ("step_w", "warmup_iters", "measure_iters", "settle_readings", "step_ms")},
    }
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}  # the simulated GPU is index 0
    got = subprocess.run(
        [sys.executable, "-W", "ignore", str(Path(__file__).resolve()), "--one-run", json.dumps(job)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if got.returncode != 0:
        raise RuntimeError(f"the JIT run failed (exit {got.returncode}):\n{got.stderr}")
    out = json.loads(got.stdout.strip().splitlines()[-1])
    return {
        "chosen_w": float(out["chosen_w"]),
        "limits": [float(x) for x in out["limits"]],
        "profile": out["profile"],
        "steps": out["steps"],
    }


def _one_run(job: dict) -> dict:
    """One JIT run on a virtual clock (this process's: installed here, before zeus is imported)."""
    clock = VirtualClock()
    clock.install()
    from zeus_core import PowerLimitOptimizer, ZeusMonitor
    from zeus_plugins_nvml import fake_pynvml

    p, a = job["gpu"], job["options"]
    gpu = fake_pynvml.FakeGpu(
        ambient_c=40.0,
        temperature_c=40.0,
        idle_w=IDLE_W,
        min_limit_w=job["min_limit_w"],
        demand_w=p["demand_w"],
        thermal_c_per_w=p["thermal_c_per_w"],
        leakage_w_per_c=p["leakage_w_per_c"],
        thermal_tau_s=p["thermal_tau_s"],
    )
    path = fake_pynvml.create(job["path"], [gpu], privileged=True)
    fake_pynvml.install(path)
    # today's way is thermally_stable = false (the default is on), with the fixed warmup_iters
    options = {
        "step_w": a["step_w"],
        "warmup_iters": a["warmup_iters"],
        "measure_iters": a["measure_iters"],
        "thermally_stable": job["stable"],
    }
    if job["stable"]:
        options |= {"settle_readings": a["settle_readings"], "max_warmup_iters": 100_000}
    step_s = a["step_ms"] / 1000.0
    mon = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    try:
        with PowerLimitOptimizer(mon, policy="jit", options=options, eta_knob=ETA) as plo:
            limits = plo.policy.limits(plo.devices)
            plo.on_epoch_begin()  # one epoch of unknown length: windows back to back until the JIT has chosen
            steps = 0
            while not plo.policy.choices:
                plo.on_step_begin()
                clock.advance(step_s / (fake_pynvml.useful_w(0) / p["demand_w"]) ** (1 / 3))  # the step, at the speed it has now
                plo.on_step_end()
                steps += 1
            plo.on_epoch_end()
            chosen = plo.held_limit
            profile = next(iter(plo.policy.choices.values()))["profile"]
    finally:
        mon.close()
    assert chosen is not None
    return {"chosen_w": float(chosen), "limits": [float(x) for x in limits], "profile": profile, "steps": steps}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5, help="simulated GPUs (seeds 0..N-1)")
    ap.add_argument("--step-ms", type=float, default=4.0, help="a step's time at full speed (ms)")
    ap.add_argument("--tau-s", type=float, default=0.5, help="the die's thermal time constant (s; real boards: tens of seconds)")
    ap.add_argument("--step-w", type=float, default=100.0, help="the JIT's power-limit step (W)")
    ap.add_argument("--warmup-iters", type=int, default=5)
    ap.add_argument("--measure-iters", type=int, default=50)
    ap.add_argument("--settle-readings", type=int, default=100, help="readings (one a step) that must agree (thermally stable)")
    ap.add_argument("--tolerance", type=float, default=0.01, help="a pick within this of the best steady cost is right")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--one-run", help=argparse.SUPPRESS)  # internal: one JIT run in this process (run_jit's child)
    args = ap.parse_args(argv)
    if args.one_run is not None:
        print(json.dumps(_one_run(json.loads(args.one_run))))
        return 0
    if args.seeds < 1 or args.step_ms <= 0 or args.tau_s <= 0:
        ap.error("--seeds must be at least 1, --step-ms and --tau-s positive")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            row: dict[str, object] = {"seed": seed}
            for stable in (False, True):
                p = gpu_params(seed, args.tau_s)
                chosen, limits = run_jit(p, stable, args, Path(tmp) / f"nvml-{seed}-{int(stable)}.json")
                costs = {lim: steady_cost(lim, p, max(limits), args.step_ms / 1000.0) for lim in limits}
                best = min(costs.values())
                regret = costs[chosen] / best - 1
                key = "stable" if stable else "today"
                row[key] = {"chosen_w": chosen, "right_w": min(costs, key=costs.__getitem__), "regret": regret}
                row[f"{key}_wrong"] = regret > args.tolerance
            rows.append(row)
            print(
                f"seed {seed}: right {row['today']['right_w']:.0f} W; today picks {row['today']['chosen_w']:.0f} W "  # type: ignore[index]
                f"(regret {row['today']['regret']:.1%}), thermally stable picks {row['stable']['chosen_w']:.0f} W "  # type: ignore[index]
                f"(regret {row['stable']['regret']:.1%})",  # type: ignore[index]
                flush=True,
            )
    wrong_today = sum(1 for r in rows if r["today_wrong"])
    wrong_stable = sum(1 for r in rows if r["stable_wrong"])
    mean = lambda key: sum(r[key]["regret"] for r in rows) / len(rows)  # type: ignore[index]  # noqa: E731
    ratio = wrong_today / wrong_stable if wrong_stable else float("inf") if wrong_today else 1.0
    print(f"\nwrong picks out of {len(rows)}: today {wrong_today}, thermally stable {wrong_stable}")
    print(f"mean regret: today {mean('today'):.2%}, thermally stable {mean('stable'):.2%}")
    print(f"ratio of wrong picks (today / thermally stable): {ratio:g}")
    if args.json:
        args.json.write_text(
            json.dumps({"rows": rows, "wrong_today": wrong_today, "wrong_stable": wrong_stable, "ratio": ratio}, indent=1) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

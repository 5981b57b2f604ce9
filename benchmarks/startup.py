"""How fast ``zeus`` starts, as a ratio to ``python -c pass`` measured in the same run.

    python benchmarks/startup.py [--rounds 15] [--job examples/zeus_nsdi23/cifar100.toml]

Each round runs every command once, in turn (interleaved, so a busy moment of
the machine hits all of them alike); the figure is the median over rounds of
the wall time, and the ratio is that median over the median of ``python -c
pass`` with the same interpreter. Targets (issue #12): ``zeus --help`` and
``zeus plugins`` at most 8x, ``zeus validate`` and ``zeus run --dry-run`` at
most 10x. The ``zeus`` run is the console script next to this interpreter
(not a shell shim), as a user's ``zeus`` is.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def zeus_command() -> list[str]:
    script = shutil.which("zeus", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "zeus_core"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--job", type=Path, default=REPO / "examples" / "zeus_nsdi23" / "cifar100.toml")
    args = ap.parse_args()
    zeus = zeus_command()
    commands = {
        "python -c pass": ([sys.executable, "-c", "pass"], None),
        "zeus --help": (zeus + ["--help"], 8.0),
        "zeus plugins": (zeus + ["plugins"], 8.0),
        "zeus validate": (zeus + ["validate", str(args.job)], 10.0),
        "zeus run --dry-run": (zeus + ["run", str(args.job), "--dry-run"], 10.0),
    }
    env = dict(os.environ, COLUMNS="200")
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, (cmd, _target) in commands.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
            times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["python -c pass"])
    print(f"{'command':<22}{'median s':>10}{'ratio':>8}  target")
    ok = True
    for name, (_cmd, target) in commands.items():
        med = statistics.median(times[name])
        ratio = med / base
        verdict = "" if target is None else f"<= {target:g}x: {'PASS' if ratio <= target else 'FAIL'}"
        ok = ok and (target is None or ratio <= target)
        print(f"{name:<22}{med:>10.3f}{ratio:>7.1f}x  {verdict}")
    print(f"{args.rounds} interleaved rounds; zeus = {' '.join(zeus)}; all targets {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()

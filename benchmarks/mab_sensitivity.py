"""Sensitivity of the improved ``mab`` variant to its stopping options, on the NSDI'23 grid.

    python benchmarks/mab_sensitivity.py [--sweep budget|stop|bound|walk] [--seeds 1-5 --seeds 6-10]

Each setting runs the grid of ``zeus_nsdi23_grid.py`` (6 workloads x 4 GPUs,
N = 2|B||P| recurrences, the improved variant only) and prints the mean and
the worst case of the cumulative cost over the oracle, and the mean excess
as a ratio against the default options measured in the same run. These are
the tables of ``zeus_plugins_mab/README.md``:

* ``budget``: ``explore_budget`` from 0.03 to off (inf);
* ``stop``: ``fail_prob`` and ``stop_margin_sds`` of the stopping rule, with
  the budget off (what was measured before it existed), and ``explore_stop`` off;
* ``bound``: the noise bound ``explore_bound_sds`` (budget off);
* ``walk``: exploration without the device's epoch predictions (a real GPU's case).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import zeus_nsdi23_grid as grid
from rich.console import Console
from rich.table import Table

from zeus_core.engine.registry import load as load_plugins

SWEEPS = {
    "budget": [{"explore_budget": b} for b in (0.03, 0.04, 0.05, 0.06, 0.08, math.inf)],
    "stop": [
        {"explore_budget": math.inf, "fail_prob": f, "stop_margin_sds": m}
        for f, m in ((0.05, 0.0), (0.1, 0.0), (0.1, 2.0), (0.2, 2.0), (0.2, 0.0))
    ]
    + [{"explore_budget": math.inf, "explore_stop": False}],
    "bound": [{"explore_budget": math.inf, "explore_bound_sds": k} for k in (1.0, 2.0)],
    "walk": [{"use_predictions": False}],
}


class WithOptions:
    """The registered ``mab`` part with some options fixed."""

    def __init__(self, mab, **fixed) -> None:
        self.mab, self.fixed = mab, fixed

    def options(self, **kw):
        return self.mab.options(**kw, **self.fixed)

    def factory(self, *args):
        return self.mab.factory(*args)


def seed_range(text: str) -> range:
    first, _, last = text.partition("-")
    return range(int(first), int(last or first) + 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default=str(grid.REPO.parent / "shared" / "data" / "zeus_nsdi23"))
    ap.add_argument("--sweep", choices=sorted(SWEEPS), default="budget")
    ap.add_argument("--seeds", action="append", help="first-last (repeatable; default 1-5 and 6-10)")
    args = ap.parse_args()
    ranges = [seed_range(s) for s in (args.seeds or ["1-5", "6-10"])]
    mab = load_plugins(entry_points=True).get("batch_size_policy", "mab")
    console = Console(width=170)
    table = Table(title=f"improved mab, cumulative cost over the oracle: sweep {args.sweep!r}")
    table.add_column("options", no_wrap=True)
    for r in ranges:
        label = f"seeds {r.start}-{r.stop - 1}"
        table.add_column(f"{label}: mean", justify="right")
        table.add_column(f"{label}: worst case", justify="right")
        table.add_column(f"{label}: mean / default's", justify="right")
    baseline = {}
    for r in ranges:  # the default options, measured in this run
        rows, _ = grid.run_grid(args.traces, "improved", mab, None, r)
        baseline[r.start] = float(np.mean(list(grid.by_case(rows, "regret").values())))
    for setting in SWEEPS[args.sweep]:
        cells = []
        for r in ranges:
            rows, _ = grid.run_grid(args.traces, "improved", WithOptions(mab, **setting), None, r)
            cases = grid.by_case(rows, "regret")
            mean = float(np.mean(list(cases.values())))
            (gpu, name), worst = max(cases.items(), key=lambda kv: kv[1])
            cells += [f"{mean:.2%}", f"{worst:.2%} ({gpu} {name})", f"{mean / baseline[r.start]:.2f}x"]
        table.add_row(", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in setting.items()), *cells)
    console.print(table)
    console.print("default options: " + ", ".join(f"seeds {r.start}-{r.stop - 1} mean {baseline[r.start]:.2%}" for r in ranges))


if __name__ == "__main__":
    main()

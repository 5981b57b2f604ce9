"""The grid plugin's forecast of the next period against "the same as now", on the shared 2020 series.

    python benchmarks/grid_forecast.py [--grid FILE ...] [--timezone UTC]

For every period of 2020 in each series (DE: 15 minutes; GB: 30, then 15 from November),
the value is forecast at the period's start from the values before it
(``zeus_plugins_grid.forecast``: an autoregressive model of the changes with a daily
term, refit every day on the trailing two weeks) and by persistence (the last period's
value). Prints the mean absolute error (gCO2eq/kWh), the mean absolute percentage error
and the ratio of the model's error to persistence's, measured in this run.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from zeus_core.engine.registry import get_registry
from zeus_core.engine.signals import open_grid
from zeus_core.job import GridOptions
from zeus_plugins_grid.forecast import persistence, predict_all

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", action="append", type=Path)
    ap.add_argument("--timezone", default="UTC")
    args = ap.parse_args(argv)
    grids = args.grid or [SHARED / "carbon_intensity" / "de_2020.csv", SHARED / "carbon_intensity" / "gb_2020.csv"]
    y0 = datetime(2020, 1, 1, tzinfo=UTC).timestamp()
    y1 = datetime(2021, 1, 1, tzinfo=UTC).timestamp()
    table = Table(title="one-step forecast of the grid's carbon intensity, 2020")
    for col in ("grid", "periods", "model MAE", "persistence MAE", "model MAPE", "persistence MAPE", "MAE ratio", "seconds"):
        table.add_column(col, justify="right")
    for g in grids:
        series = open_grid(GridOptions(carbon_intensity=str(g), timezone=args.timezone), get_registry(), Path.cwd()).carbon
        t0 = time.perf_counter()
        model = predict_all(series.starts, series.values)
        seconds = time.perf_counter() - t0
        same = persistence(series.values)
        v = series.values
        m = (series.starts >= y0) & (series.starts < y1)

        def mae(p: np.ndarray, v: np.ndarray = v, m: np.ndarray = m) -> float:
            return float(np.mean(np.abs(p - v)[m]))

        def mape(p: np.ndarray, v: np.ndarray = v, m: np.ndarray = m) -> float:
            return float(np.mean((np.abs(p - v) / v)[m]))

        table.add_row(
            g.stem,
            str(int(m.sum())),
            f"{mae(model):.2f}",
            f"{mae(same):.2f}",
            f"{100 * mape(model):.2f}%",
            f"{100 * mape(same):.2f}%",
            f"{mae(model) / mae(same):.3f}",
            f"{seconds:.2f}",
        )
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())

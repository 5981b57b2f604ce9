"""The comparison of a trace run with the default and oracle baselines: table, JSON, plots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from zeus_core.comparison import Row as Row
from zeus_core.comparison import comparison_table
from zeus_core.plots import COST_PER_RECURRENCE, PARETO, Level, Mark, cost_per_recurrence, tradeoff
from zeus_plugins_trace import baselines
from zeus_plugins_trace.traces import WorkloadTrace


@attrs.frozen
class Comparison:
    """The run's totals next to both baselines over the same number of recurrences."""

    trace: str
    synthetic: bool
    gpu: str
    recurrences: int
    max_epochs: int
    method: dict[str, float]
    default: baselines.Baseline
    oracle: baselines.Baseline

    def to_json(self) -> dict[str, Any]:
        n = self.recurrences
        return {
            "trace": self.trace,
            "synthetic": self.synthetic,
            "gpu": self.gpu,
            "baselines": {"default": self.default.to_json(n), "oracle": self.oracle.to_json(n)},
            "vs_default": baselines.compare(self.method, self.default, n),
            "vs_oracle": baselines.compare(self.method, self.oracle, n),
        }

    def totals(self) -> dict[str, dict[str, float]]:
        """Each baseline's expected energy, time and cost over the run's recurrences, by name."""
        n = self.recurrences
        return {b.name: {"energy_j": b.energy_j * n, "time_s": b.time_s * n, "cost": b.cost * n} for b in (self.default, self.oracle)}


def compare(trace: WorkloadTrace, summary: Any, job: Any, default_batch_size: int) -> Comparison:
    records = summary.records
    n = len({r.recurrence for r in records})
    method = {
        "energy_j": float(sum(r.energy_j for r in records)),
        "time_s": float(sum(r.time_s for r in records)),
        "cost": float(sum(r.cost for r in records)),
    }
    return Comparison(
        trace=trace.source,
        synthetic=trace.synthetic,
        gpu=trace.gpu,
        recurrences=n,
        max_epochs=job.max_epochs,
        method=method,
        default=baselines.default(trace, job.eta_knob, job.max_epochs, default_batch_size),
        oracle=baselines.oracle(trace, job.eta_knob, job.max_epochs),
    )


def print_table(console: Any, c: Comparison) -> None:
    n = c.recurrences
    kind = "SYNTHETIC trace" if c.synthetic else "trace"
    rows = [Row("the job so far", "(chosen per recurrence)", c.method)]
    totals = c.totals()
    rows += [Row(b.name, f"{b.batch_size} @ {b.power_limit:g} W", totals[b.name]) for b in (c.default, c.oracle)]
    console.print(
        comparison_table(
            f"{n} recurrences on {c.gpu} ({kind}: {c.trace}) against baselines by expected cost",
            rows,
            base=rows[1].totals,
            reference=rows[2].totals,
        )
    )
    console.print("savings are against the default; regret is the extra cost over the oracle")


def plots(out: Path, trace: WorkloadTrace, c: Comparison, records: list, eta: float) -> list[Path]:
    """``cost_per_recurrence.png`` and ``pareto.png`` under ``out`` (:mod:`zeus_core.plots`)."""
    title = f"{trace.dataset} on {trace.gpu}: {{}}" + (" (synthetic trace)" if trace.synthetic else "")
    levels = [
        Level(f"{b.name} {b.batch_size} @ {b.power_limit:g} W (expected)", b.cost, color)
        for b, color in ((c.default, "tab:red"), (c.oracle, "tab:green"))
    ]
    written = [
        cost_per_recurrence(
            out / COST_PER_RECURRENCE,
            records,
            levels,
            title=title.format("cost per recurrence"),
            ylabel=f"cost (eta = {eta:g})",
        )
    ]

    epochs = baselines.expected_epochs(trace, c.max_epochs)
    t = (epochs[:, None] * trace.time).ravel()
    e = (epochs[:, None] * trace.energy).ravel()
    labels = [(int(b), float(p)) for b in trace.batch_sizes for p in trace.power_limits]
    chosen: dict[tuple[int, float], int] = {}
    for r in records:
        if r.reached and r.power_limit is not None:
            chosen[(r.batch_size, float(r.power_limit))] = chosen.get((r.batch_size, float(r.power_limit)), 0) + 1
    written.append(
        tradeoff(
            out / PARETO,
            {k: (float(t[i]), float(e[i])) for i, k in enumerate(labels)},
            marks=[
                Mark((c.default.batch_size, c.default.power_limit), "rs", "default"),
                Mark((c.oracle.batch_size, c.oracle.power_limit), "g^", "oracle"),
            ],
            chosen=chosen,
            name=lambda k: f"{k[0]}@{k[1]:g}W",
            title=title.format("time-energy tradeoff"),
            points_label="(batch size, power limit), expected per recurrence",
        )
    )
    return written

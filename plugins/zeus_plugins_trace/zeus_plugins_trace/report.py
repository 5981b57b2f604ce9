"""The comparison of a trace run with the default and oracle baselines: table, JSON, plots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import numpy as np

from zeus_core import pareto_frontier
from zeus_core.comparison import Row as Row
from zeus_core.comparison import comparison_table
from zeus_core.files import atomic_path
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
    """``cost_per_recurrence.png`` and ``pareto.png`` under ``out``."""
    from matplotlib.figure import Figure  # the object API: no pyplot state, the user's backend untouched

    out.mkdir(parents=True, exist_ok=True)
    written = []

    def finish(fig, ax, what: str, name: str, legend_size: int) -> None:
        ax.set_title(f"{trace.dataset} on {trace.gpu}: {what}" + (" (synthetic trace)" if trace.synthetic else ""))
        ax.legend(fontsize=legend_size)
        fig.tight_layout()
        with atomic_path(out / name) as tmp:
            fig.savefig(tmp, dpi=110)
        written.append(out / name)

    recs = sorted({r.recurrence for r in records})
    per = np.array([sum(r.cost for r in records if r.recurrence == k) for k in recs])
    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    ax.plot(recs, per, ".-", lw=0.8, label="the job (every recurrence in its store)")
    ax.axhline(c.default.cost, color="tab:red", ls="--", label=f"default {c.default.batch_size} @ {c.default.power_limit:g} W (expected)")
    ax.axhline(c.oracle.cost, color="tab:green", ls="--", label=f"oracle {c.oracle.batch_size} @ {c.oracle.power_limit:g} W (expected)")
    ax.set_xlabel("recurrence")
    ax.set_ylabel(f"cost (eta = {eta:g})")
    ax.set_yscale("log")
    finish(fig, ax, "cost per recurrence", "cost_per_recurrence.png", legend_size=8)

    epochs = baselines.expected_epochs(trace, c.max_epochs)
    t = (epochs[:, None] * trace.time).ravel()
    e = (epochs[:, None] * trace.energy).ravel()
    ok = np.isfinite(t) & np.isfinite(e)
    labels = [(int(b), float(p)) for b in trace.batch_sizes for p in trace.power_limits]
    fig = Figure(figsize=(7, 5))
    ax = fig.subplots()
    ax.scatter(t[ok], e[ok], s=10, c="0.6", label="(batch size, power limit), expected per recurrence")
    front = pareto_frontier(np.where(ok, t, np.nan), np.where(ok, e, np.nan))
    ax.plot(t[front], e[front], "-", color="k", lw=1, label="Pareto frontier")

    def mark(b: int, p: float, style: str, name: str) -> None:
        k = labels.index((b, p))
        ax.plot(t[k], e[k], style, ms=10, mfc="none", mew=2, label=name)

    mark(c.default.batch_size, c.default.power_limit, "rs", "default")
    mark(c.oracle.batch_size, c.oracle.power_limit, "g^", "oracle")
    chosen: dict[tuple[int, float], int] = {}
    for r in records:
        if r.reached and r.power_limit is not None:
            chosen[(r.batch_size, float(r.power_limit))] = chosen.get((r.batch_size, float(r.power_limit)), 0) + 1
    for (b, p), count in sorted(chosen.items(), key=lambda kv: -kv[1])[:5]:
        if (b, p) in labels:
            k = labels.index((b, p))
            ax.plot(t[k], e[k], "o", color="tab:blue", ms=4 + 8 * count / max(chosen.values()), alpha=0.7)
            ax.annotate(f"{b}@{p:g}W x{count}", (t[k], e[k]), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.plot([], [], "o", color="tab:blue", label="chosen by this run (size: how often)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time to target (s)")
    ax.set_ylabel("energy to target (J)")
    finish(fig, ax, "time-energy tradeoff", "pareto.png", legend_size=7)
    return written

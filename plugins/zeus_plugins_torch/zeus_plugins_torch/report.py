"""This run against fixed batch sizes, measured by the run itself.

The trace simulation compares a run with the default and the best fixed knob
by their *expected* cost over the trace. Real training has no trace, but a
recurring job under a batch-size policy does run whole recurrences at several
batch sizes while it explores; a try that reached the target is one
recurrence at that fixed batch size. So the baselines here are the mean of
the job's own reached tries at a batch size, times the number of
recurrences:

* ``default``: the user's batch size (the policy's starting point);
* ``best fixed``: the batch size whose reached tries cost least, in hindsight.

Few tries per batch size make these estimates noisy; the table says how many
tries each rests on. The columns are the trace simulation's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
from rich.table import Table

from zeus_core import savings
from zeus_core.comparison import Row as Row
from zeus_core.comparison import comparison_table
from zeus_core.plots import COST_PER_RECURRENCE, PARETO, Level, Mark, cost_per_recurrence, tradeoff


@attrs.frozen
class FixedKnob:
    """Mean measured cost of one recurrence at one batch size."""

    name: str
    batch_size: int
    power_limit: float | None
    tries: int
    energy_j: float
    time_s: float
    cost: float

    def totals(self, n: int) -> dict[str, float]:
        return {"energy_j": self.energy_j * n, "time_s": self.time_s * n, "cost": self.cost * n}


def per_batch_size(records: list[Any]) -> dict[int, FixedKnob]:
    """Mean energy, time and cost of the reached tries at each batch size."""
    groups: dict[int, list[Any]] = {}
    for r in records:
        if r.reached:
            groups.setdefault(int(r.batch_size), []).append(r)
    out = {}
    for bs, rs in groups.items():
        n = len(rs)
        limits = {r.power_limit for r in rs}
        out[bs] = FixedKnob(
            name=str(bs),
            batch_size=bs,
            power_limit=limits.pop() if len(limits) == 1 else None,
            tries=n,
            energy_j=sum(r.energy_j for r in rs) / n,
            time_s=sum(r.time_s for r in rs) / n,
            cost=sum(r.cost for r in rs) / n,
        )
    return out


@attrs.frozen
class Comparison:
    recurrences: int
    method: dict[str, float]
    default: FixedKnob | None
    best: FixedKnob | None

    def totals(self) -> dict[str, dict[str, float]]:
        """Each baseline's totals over the job's recurrences, by its name (``default``, ``best fixed``)."""
        return {k.name: k.totals(self.recurrences) for k in (self.default, self.best) if k is not None}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"recurrences": self.recurrences, "this_run": self.method, "baselines": {}}
        for key, knob in (("default", self.default), ("best_fixed", self.best)):
            if knob is not None:
                out["baselines"][key] = attrs.asdict(knob) | {"totals": knob.totals(self.recurrences)}
                out[f"vs_{key}"] = savings(self.method, knob.totals(self.recurrences))
        return out


def compare(records: list[Any], default_batch_size: int | None) -> Comparison:
    n = len({r.recurrence for r in records})
    method = {k: float(sum(getattr(r, k) for r in records)) for k in ("energy_j", "time_s", "cost")}
    knobs = per_batch_size(records)
    default = knobs.get(default_batch_size) if default_batch_size is not None else None
    best = min(knobs.values(), key=lambda k: k.cost) if knobs else None
    if default is not None:
        default = attrs.evolve(default, name="default")
    if best is not None:
        best = attrs.evolve(best, name="best fixed")
    return Comparison(n, method, default, best)


def print_table(console: Any, c: Comparison) -> None:
    n = c.recurrences
    rows = [Row("the job so far", "(chosen per recurrence)", c.method)]
    for knob in (c.default, c.best):
        if knob is not None:
            limit = "" if knob.power_limit is None else f" @ {knob.power_limit:g} W"
            rows.append(Row(knob.name, f"{knob.batch_size}{limit} ({knob.tries} tr{'y' if knob.tries == 1 else 'ies'})", knob.totals(n)))
    console.print(
        comparison_table(
            f"{n} recurrences against fixed batch sizes, measured by this job's reached tries",
            rows,
            base=c.default.totals(n) if c.default else None,
            reference=c.best.totals(n) if c.best else None,
            reference_label="regret vs best",
            decimals=1,
        )
    )
    if c.default is None:
        console.print("the default batch size never reached the target in this job, so there is no default row")
    console.print(
        "baselines: mean of this job's reached tries at that batch size x recurrences; "
        "savings are against the default, regret is the extra cost over the best fixed batch size"
    )


def print_allocation(console: Any, plan: Any) -> None:
    """What each rank trained with under ``workload.allocation``."""
    table = Table(title=f"trained by the allocation {plan.source}: global batch {plan.global_batch}")
    for col in ("rank", "gpu", "local batch", "share", "power limit (W)"):
        table.add_column(col, justify="right")
    for r in plan.ranks:
        table.add_row(str(r.rank), r.gpu or "-", str(r.local_batch), f"{r.share:.3f}", f"{r.power_limit:g}")
    console.print(table)


def plots(out: Path, c: Comparison, records: list[Any], job: str, eta: float) -> list[Path]:
    """``cost_per_recurrence.png`` and ``pareto.png`` under ``out``: the trace workload's figures
    (:mod:`zeus_core.plots`) from this job's own tries, each batch size at the mean of its reached ones."""
    fixed = [(c.default, "tab:red"), (c.best, "tab:green")]
    levels = [Level(f"{k.name} {k.batch_size} (mean of {k.tries} reached)", k.cost, color) for k, color in fixed if k is not None]
    written = [
        cost_per_recurrence(
            out / COST_PER_RECURRENCE,
            records,
            levels,
            title=f"{job}: cost per recurrence (measured)",
            ylabel=f"cost (eta = {eta:g})",
        )
    ]
    knobs = per_batch_size(records)
    written.append(
        tradeoff(
            out / PARETO,
            {bs: (k.time_s, k.energy_j) for bs, k in knobs.items()},
            marks=[Mark(k.batch_size, style, k.name) for k, style in ((c.default, "rs"), (c.best, "g^")) if k is not None],
            chosen={bs: k.tries for bs, k in knobs.items()},
            most_chosen=len(knobs),  # a handful of batch sizes: every one it chose is labelled
            name=lambda bs: f"batch {bs}",
            title=f"{job}: time-energy tradeoff (measured)",
            points_label="batch size, mean of its reached tries",
        )
    )
    return written

"""The verdict that closes ``zeus run`` and ``zeus report``: the job's energy, time and cost (and
carbon, with ``[grid]``) in human units, against its baselines where a part knows them.

It is the last thing the commands print, so that the result is the first thing a person reads;
the exact figures stay in ``summary.json`` and ``recurrences.csv``. The cost is Zeus's
energy-time cost (:mod:`zeus_core.cost`): ``eta * energy + (1 - eta) * max_power * time``, in
joules, so it prints with the energy's units.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from zeus_core import units
from zeus_core.comparison import TOTAL_KEYS
from zeus_core.parts import Compares, Concludes

if TYPE_CHECKING:
    from rich.console import RenderableType

    from zeus_core.results import JobSummary

#: How each total prints (a baseline's beside it: energy without its kilowatt-hours).
_FORMAT = {"energy_j": units.energy, "time_s": units.duration, "cost": lambda j: units.si(j, "J")}
_SHORT = {**_FORMAT, "energy_j": lambda j: units.si(j, "J")}
_LABEL = {"energy_j": "energy", "time_s": "time", "cost": "cost"}


def cost_unit(eta: float | None) -> str:
    """What the cost is, in words, with its unit."""
    knob = "" if eta is None else f", eta = {eta:g}"
    return f"cost: Zeus's energy-time cost, eta * energy + (1 - eta) * max power * time{knob}, in joules"


@attrs.frozen
class Verdict:
    """A job's totals (the job so far) against named baselines over the same recurrences; or, with ``what``,
    the totals of what a part ran (``rule paper``: :class:`~zeus_core.parts.Concludes`)."""

    job: str
    recurrences: int
    totals: Mapping[str, float]
    baselines: Mapping[str, Mapping[str, float]] = attrs.field(factory=dict)
    this_run: str | None = None
    grid: Mapping[str, float] = attrs.field(factory=dict)
    eta: float | None = None
    what: str | None = None

    def head(self) -> str:
        if self.what is not None:
            return f"result of job {self.job!r}: {self.what}"
        ran = f"; this run: {self.this_run}" if self.this_run else ""
        return f"result of job {self.job!r}, the job so far ({self.recurrences} recurrence{'s' if self.recurrences != 1 else ''}{ran})"

    def rows(self) -> list[tuple[str, str, str]]:
        """(what, how much, against the baselines) for each figure."""
        out = []
        for key in TOTAL_KEYS:
            value = float(self.totals[key])
            out.append((_LABEL[key], _FORMAT[key](value), ", ".join(self._against(key, value))))
        if "carbon_g" in self.grid:
            out.append(("carbon", units.carbon(self.grid["carbon_g"]), ""))
        for key, amount in self.grid.items():
            if key.startswith("cost_"):
                out.append(("money", units.money(amount, key[len("cost_") :]), "energy bought from the grid"))
        return out

    def _against(self, key: str, value: float) -> Iterable[str]:
        for name, base in self.baselines.items():
            b = float(base[key])
            if not b:
                continue
            change = value / b - 1.0
            if abs(change) < 0.0005:
                yield f"the same as the {name} ({_SHORT[key](b)})"
            else:
                yield f"{units.percent(abs(change))} {'less' if change < 0 else 'more'} than the {name} ({_SHORT[key](b)})"

    def lines(self) -> list[str]:
        """The verdict as plain lines (the figures aligned)."""
        rows = self.rows()
        w0 = max(len(r[0]) for r in rows)
        w1 = max(len(r[1]) for r in rows)
        body = [f"  {a:<{w0}}  {b:<{w1}}  {c}".rstrip() for a, b, c in rows]
        return [self.head(), *body, f"  ({cost_unit(self.eta)})"]

    def renderable(self, unit: bool = True) -> RenderableType:
        """The verdict for a rich console: its head in bold, the figures in a borderless grid, and (``unit``)
        what the cost is."""
        from rich.console import Group
        from rich.markup import escape
        from rich.table import Table
        from rich.text import Text

        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column(style="bold cyan")
        grid.add_column()
        for what, amount, against in self.rows():
            grid.add_row(what, amount, escape(against))
        return Group(Text(self.head(), style="bold"), grid, *([Text(f"({cost_unit(self.eta)})", style="dim")] if unit else []))


def _baselines(part: Any, summary: JobSummary) -> dict[str, Mapping[str, float]]:
    known = part.baselines(summary) or {} if isinstance(part, Compares) else {}
    return {name: totals for name, totals in known.items() if all(k in totals for k in TOTAL_KEYS)}


def verdicts_of(summary: JobSummary, parts: Iterable[Any], eta: float | None = None) -> list[Verdict]:
    """The verdicts of a job: :func:`verdict_of` where it has tries, then one for each result a part
    concludes (:class:`~zeus_core.parts.Concludes`) against that part's baselines."""
    parts = list(parts)
    out = [v for v in (verdict_of(summary, parts, eta),) if v is not None]
    for part in parts:
        if isinstance(part, Concludes):
            baselines = _baselines(part, summary)
            for name, totals in (part.concluded(summary) or {}).items():
                if all(k in totals for k in TOTAL_KEYS):
                    grid = {k: float(v) for k, v in totals.items() if k == "carbon_g" or k.startswith("cost_")}
                    out.append(Verdict(job=summary.job, recurrences=0, totals=totals, baselines=baselines, grid=grid, eta=eta, what=name))
    return out


def verdict_of(summary: JobSummary, parts: Iterable[Any], eta: float | None = None) -> Verdict | None:
    """The verdict of ``summary`` against the baselines its parts know (:class:`~zeus_core.parts.Compares`);
    None for a job without tries (a planner's)."""
    if not summary.records:
        return None
    baselines: dict[str, Mapping[str, float]] = {}
    for part in parts:
        for name, totals in _baselines(part, summary).items():
            baselines.setdefault(name, totals)
    return Verdict(
        job=summary.job,
        recurrences=summary.recurrences,
        totals={"energy_j": summary.energy_j, "time_s": summary.time_s, "cost": summary.cost},
        baselines=baselines,
        this_run=summary.this_run.describe() if summary.this_run is not None else None,
        grid=dict(summary.grid),
        eta=eta,
    )

"""A job's totals against baselines: the savings arithmetic and the table both workloads print.

The trace workload compares a run with the default and oracle knobs of its
trace; the torch workload with fixed batch sizes measured in the same job. Both
report the same columns (energy, time and cost, what each saves against the
default, the regret against the best), so the arithmetic and the rendering
live here and read the same everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:  # annotations only
    from rich.table import Table

TOTAL_KEYS = ("energy_j", "time_s", "cost")


def savings(method: Mapping[str, float], base: Mapping[str, float]) -> dict[str, float]:
    """Fractions ``method`` saves against ``base`` (``energy_saved``, ``time_saved``,
    ``cost_saved``; negative when it spends more) and its ``regret``: extra cost over ``base``.

    A zero total in ``base`` gives 0 rather than a division error.
    """
    out = {f"{k.split('_')[0]}_saved": (1.0 - method[k] / base[k]) if base[k] else 0.0 for k in TOTAL_KEYS}
    out["regret"] = method["cost"] / base["cost"] - 1.0 if base["cost"] else 0.0
    return out


@attrs.frozen
class Row:
    """One method of the table: a name, how it chose its knobs, and its totals (``TOTAL_KEYS``)."""

    name: str
    knobs: str
    totals: Mapping[str, float]


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def comparison_table(
    title: str,
    rows: Sequence[Row],
    base: Mapping[str, float] | None,
    reference: Mapping[str, float] | None,
    reference_label: str = "regret vs oracle",
    decimals: int = 0,
) -> Table:
    """A rich table of ``rows``: totals, savings against ``base`` and regret against ``reference``.

    The totals print in human units (``4.45 MJ (1.24 kWh)``, ``10.5 h``: :mod:`zeus_core.units`; the cost
    is Zeus's energy-time cost, in joules); the exact figures are in the files. ``decimals`` is no longer
    used (kept for callers). A missing ``base`` or ``reference`` (e.g. the default batch size never reached
    the target) shows "-" in those columns.
    """
    from rich.table import Table  # the table's renderer, loaded when a table is made

    from zeus_core import units

    table = Table(title=title)
    for col in ("method", "knobs", "energy", "time", "cost (J)", "energy saved", "time saved", "cost saved", reference_label):
        table.add_column(col, justify="right")
    for r in rows:
        t = r.totals
        d = savings(t, base) if base else None
        table.add_row(
            r.name,
            r.knobs,
            units.energy(t["energy_j"]),
            units.duration(t["time_s"]),
            units.si(t["cost"], "J"),
            *((_pct(d["energy_saved"]), _pct(d["time_saved"]), _pct(d["cost_saved"])) if d else ("-", "-", "-")),
            _pct(savings(t, reference)["regret"]) if reference else "-",
        )
    return table


__all__ = ["TOTAL_KEYS", "Row", "comparison_table", "savings"]

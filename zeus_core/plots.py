"""The figures a recurring job's workload writes under ``--output``, drawn alike by every workload.

A simulated job (the ``trace`` workload) and a job that really trains (``torch``) answer the
same two questions, so they draw the same two figures: ``cost_per_recurrence.png`` (what each
recurrence cost, against fixed choices of the knobs) and ``pareto.png`` (the time-energy
tradeoff of the knobs' choices, and which ones the job chose). Each workload supplies its own
numbers: expected ones from a trace, measured ones from its own tries.

matplotlib comes with zeus-core's ``plots`` extra and is imported in each function, so that
importing this module costs nothing; figures go through matplotlib's object API (no pyplot
state, the user's backend untouched) and are written whole (:func:`zeus_core.files.atomic_path`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from zeus_core.cost import pareto_frontier
from zeus_core.files import atomic_path

if TYPE_CHECKING:  # annotations only
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: The two figures' file names.
COST_PER_RECURRENCE = "cost_per_recurrence.png"
PARETO = "pareto.png"


@attrs.frozen
class Level:
    """A horizontal line across the cost plot: a fixed choice's cost of one recurrence."""

    label: str
    cost: float
    color: str


@attrs.frozen
class Mark:
    """A choice singled out on the tradeoff plot (``style``: a matplotlib format, ``"rs"``)."""

    key: Hashable
    style: str
    label: str


def _save(fig: Figure, ax: Axes, title: str, path: Path, legend_size: int) -> Path:
    ax.set_title(title)
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110)
    return path


def cost_per_recurrence(path: Path, records: Sequence[Any], levels: Sequence[Level], *, title: str, ylabel: str) -> Path:
    """The cost of each recurrence of ``records`` (tries: their ``recurrence`` and ``cost``; every try of a
    recurrence counts) with a dashed line per fixed choice; log scale."""
    from matplotlib.figure import Figure

    recurrences = sorted({r.recurrence for r in records})
    costs = [sum(r.cost for r in records if r.recurrence == k) for k in recurrences]
    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    ax.plot(recurrences, costs, ".-", lw=0.8, label="the job (every recurrence in its store)")
    for level in levels:
        ax.axhline(level.cost, color=level.color, ls="--", label=level.label)
    ax.set_xlabel("recurrence")
    ax.set_ylabel(ylabel)
    ax.set_yscale("log")
    return _save(fig, ax, title, path, legend_size=8)


def tradeoff(
    path: Path,
    points: Mapping[Hashable, tuple[float, float]],
    *,
    marks: Sequence[Mark],
    chosen: Mapping[Hashable, int],
    name: Callable[[Hashable], str],
    title: str,
    points_label: str,
    most_chosen: int = 5,
    time_label: str = "time to target (s)",
    energy_label: str = "energy to target (J)",
) -> Path:
    """The time-energy plane of ``points`` (key -> (time s, energy J); non-finite ones are left out),
    their Pareto frontier, each of ``marks``, and the ``most_chosen`` keys of ``chosen`` (key -> how
    often the job chose it), sized by count and labelled ``name(key) xN``; log-log."""
    from matplotlib.figure import Figure

    shown = {k: (float(t), float(e)) for k, (t, e) in points.items() if math.isfinite(t) and math.isfinite(e)}
    keys = list(shown)
    t = [shown[k][0] for k in keys]
    e = [shown[k][1] for k in keys]
    fig = Figure(figsize=(7, 5))
    ax = fig.subplots()
    ax.scatter(t, e, s=10, c="0.6", label=points_label)
    front = pareto_frontier(t, e)
    ax.plot([t[i] for i in front], [e[i] for i in front], "-", color="k", lw=1, label="Pareto frontier")
    for mark in marks:
        if mark.key in shown:
            ax.plot(*shown[mark.key], mark.style, ms=10, mfc="none", mew=2, label=mark.label)
    top = sorted(((k, n) for k, n in chosen.items() if k in shown), key=lambda kv: -kv[1])[:most_chosen]
    most = max((n for _, n in top), default=1)
    for k, count in top:
        ax.plot(*shown[k], "o", color="tab:blue", ms=4 + 8 * count / most, alpha=0.7)
        ax.annotate(f"{name(k)} x{count}", shown[k], fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.plot([], [], "o", color="tab:blue", label="chosen by this run (size: how often)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(time_label)
    ax.set_ylabel(energy_label)
    return _save(fig, ax, title, path, legend_size=7)

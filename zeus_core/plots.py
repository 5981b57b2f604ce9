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
    ax.set_yscale(_scale(costs + [level.cost for level in levels]))
    return _save(fig, ax, title, path, legend_size=8)


def tradeoff(path: Path, points: Mapping[Hashable, tuple[float, float]], **how: Any) -> Path:
    """The time-energy plane of ``points`` (:func:`tradeoff_figure`, with ``how``), written to ``path``."""
    fig = tradeoff_figure(points, **how)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110)
    return path


def tradeoff_figure(
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
) -> Figure:
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
    ax.scatter(t, e, s=10, c="0.6", label=points_label, zorder=2)
    # the frontier in a colour of its own, its points marked, above the points and the chosen ones: a frontier
    # of two close points is otherwise a short black stroke under the markers
    front = pareto_frontier(t, e)
    ax.plot([t[i] for i in front], [e[i] for i in front], "D-", color="tab:orange", lw=2, ms=4, label="Pareto frontier", zorder=4)
    for mark in marks:
        if mark.key in shown:
            ax.plot(*shown[mark.key], mark.style, ms=11, mfc="none", mew=2, label=mark.label, zorder=5)
    top = sorted(((k, n) for k, n in chosen.items() if k in shown), key=lambda kv: -kv[1])[:most_chosen]
    most = max((n for _, n in top), default=1)
    for k, count in top:
        ax.plot(*shown[k], "o", color="tab:blue", ms=4 + 8 * count / most, alpha=0.5, zorder=3)
    ax.plot([], [], "o", color="tab:blue", alpha=0.5, label="chosen by this run (size: how often)")
    ax.set_xscale(_scale(t))
    ax.set_yscale(_scale(e))
    ax.margins(0.12)  # room for the labels of points at the edges
    _plain_log_ticks(ax)
    ax.set_xlabel(time_label)
    ax.set_ylabel(energy_label)
    # the legend below the axes, where it hides no point
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    ax.set_title(title)
    fig.tight_layout()
    place_labels(fig, ax, [(shown[k], f"{name(k)} x{count}") for k, count in top])
    return fig


def _scale(values: Sequence[float]) -> str:
    """``log`` where every value is positive (costs and energies span decades), else ``linear``: a log
    axis cannot show zero or less (a job on a device that measured no energy draws a flat zero line)."""
    return "log" if values and min(values) > 0 else "linear"


def _plain_log_ticks(ax: Axes) -> None:
    """Log axes ticked at 1, 2 and 5 of each decade, in plain numbers (``300``, ``1,000``), the other
    minor ticks unlabelled: the default labels every minor tick in scientific notation, and they collide."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    plain = FuncFormatter(lambda v, _pos: f"{v:,.0f}" if v >= 1000 else f"{v:.3g}")
    for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        if axis.get_scale() != "log":
            continue  # a linear axis (values of zero or less) keeps matplotlib's ticks
        lo, hi = sorted(limits)
        # under a decade or so wide, 1-2-5 leaves one tick or none: there evenly spaced round numbers instead
        narrow = lo > 0 and hi / lo < 8
        axis.set_major_locator(MaxNLocator(6) if narrow else LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(NullFormatter())


#: Where a point's label may go, in points from the point, tried in turn: beside it first, then further out.
_OFFSETS = [
    *((dx, dy) for dy in (4, -12, 14, -22) for dx in (6, -8)),
    *((dx, dy) for dy in (26, -34, 38, -46) for dx in (16, -16)),
]


def place_labels(fig: Figure, ax: Axes, labels: Sequence[tuple[tuple[float, float], str]], fontsize: int = 7) -> list[Any]:
    """Annotate each ``(point, text)`` of ``labels`` where it overlaps no label placed before it (nor leaves the
    axes), trying the offsets of :data:`_OFFSETS` in turn; a label with no free place takes the first, with a
    leader line to its point. Measured on the figure as it is laid out (call after ``tight_layout``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    renderer = FigureCanvasAgg(fig).get_renderer()
    frame = ax.get_window_extent(renderer)
    taken: list[Any] = []
    placed = []
    for point, text in labels:
        for k, offset in enumerate([*_OFFSETS, None]):
            last = offset is None
            note = ax.annotate(
                text,
                point,
                xytext=_OFFSETS[0] if last else offset,
                textcoords="offset points",
                fontsize=fontsize,
                ha="left" if (offset or _OFFSETS[0])[0] >= 0 else "right",
                arrowprops={"arrowstyle": "-", "color": "0.4", "lw": 0.6} if k > 1 else None,
                zorder=6,
            )
            note.update_positions(renderer)
            box = Text.get_window_extent(note, renderer)  # the text alone, not its leader line
            free = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            if last or (free and not any(box.overlaps(b) for b in taken)):
                taken.append(box)
                placed.append(note)
                break
            note.remove()
    return placed


__all__ = ["COST_PER_RECURRENCE", "PARETO", "Level", "Mark", "cost_per_recurrence", "tradeoff", "tradeoff_figure", "place_labels"]

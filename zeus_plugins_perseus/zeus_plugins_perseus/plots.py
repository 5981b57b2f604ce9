"""PNG figures of a frontier and of one plan's per-stage timeline (matplotlib's object API: no pyplot
state, and the user's backend is left as it is).

matplotlib is imported by the functions that draw (or by :func:`warm_up`), not
with this module: commands that only plan never pay for the import. ``zeus run``
imports it while its worker is still planning the real-time plans.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import numpy as np

from zeus_plugins_perseus.emulator import measured_tables, timeline
from zeus_plugins_perseus.planner import PlanSet
from zeus_plugins_perseus.profile import InstructionProfile


def _figure(figsize: tuple[float, float], margins: tuple[float, float, float, float] = (0.9, 0.2, 0.6, 0.45)):
    """A figure whose axes leave ``margins`` (left, right, bottom, top; inches) for the labels: fixed margins rather
    than ``tight_layout``, which draws the whole figure once more to measure them (a third of the drawing time)."""
    from matplotlib.figure import Figure

    w, h = figsize
    left, right, bottom, top = margins
    fig = Figure(figsize=figsize)
    fig.subplots_adjust(left=left / w, right=1 - right / w, bottom=bottom / h, top=1 - top / h)
    return fig


def warm_up() -> None:
    """Import what drawing a PNG needs (a quarter to a third of a second) before the figures are asked for, at a
    moment when this process would otherwise wait."""
    import matplotlib.backends.backend_agg  # noqa: F401 - what savefig of a PNG loads
    import matplotlib.figure  # noqa: F401


def figure_data(ps: PlanSet, chosen: int) -> PlanSet:
    """What the figures read of ``ps``: every plan's numbers, but only the chosen plan's clocks (row 0)."""
    return attrs.evolve(ps, frequencies=ps.frequencies[chosen : chosen + 1])


def write_figures(ps: PlanSet, profile: InstructionProfile, chosen: int, out_dir: Path, row: int = 0) -> list[Path]:
    """``frontier.png`` and ``timeline.png`` (of the plan in row ``row`` of ``ps.frequencies``, listed as ``chosen``)."""
    out_dir = Path(out_dir)
    return [plot_frontier(ps, out_dir / "frontier.png", chosen), plot_timeline(ps, profile, chosen, out_dir / "timeline.png", row=row)]


def plot_frontier(ps: PlanSet, path: Path, chosen: int | None = None) -> Path:
    """Planned and emulated (time, energy) of every plan, with the all-max-frequency point."""
    fig = _figure((7, 4.5))
    ax = fig.subplots()
    ax.plot(ps.planned_time_s, ps.planned_energy_j, ".", ms=3, color="tab:blue", label="planned")
    ax.plot(ps.emulated_time_s, ps.emulated_energy_j, ".", ms=3, color="tab:orange", label="emulated on the profile")
    ax.plot([ps.max_freq_time_s], [ps.max_freq_energy_j], "k*", ms=12, label="all max clocks")
    if chosen is not None:
        ax.plot(
            [ps.emulated_time_s[chosen]], [ps.emulated_energy_j[chosen]], "o", mfc="none", mec="red", ms=12, label=f"chosen plan {chosen}"
        )
    ax.set_xlabel("iteration time (s)")
    ax.set_ylabel("iteration energy (J)")
    ax.set_title(
        f"{ps.dag.stages} stages x {ps.dag.microbatches} microbatches, {ps.dag.schedule}, {ps.model} model: {len(ps)} plans", fontsize=10
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110, pil_kwargs={"compress_level": 1})
    return path


def plot_timeline(ps: PlanSet, profile: InstructionProfile, k: int, path: Path, row: int | None = None) -> Path:
    """One row per stage: each instruction as a bar from its emulated start, coloured by its clock
    (:func:`timeline_figure`), written to ``path``."""
    timeline_figure(ps, profile, k, row).savefig(path, dpi=110, pil_kwargs={"compress_level": 1})
    return path


def timeline_figure(ps: PlanSet, profile: InstructionProfile, k: int, row: int | None = None) -> Any:
    """The figure of :func:`plot_timeline`. Plan ``k``'s clocks are ``ps.frequencies[row]`` (default: row ``k``)."""
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import Normalize

    freqs = ps.frequencies[k if row is None else row]
    times, _ = measured_tables(ps.dag, profile, freqs[None, :])
    start, finish = timeline(ps.dag, times[0])
    lo, hi = float(freqs.min()), float(freqs.max())
    cmap = colormaps["viridis"]
    fig = _figure((max(8, ps.dag.microbatches * 0.6), 0.5 * ps.dag.stages + 1.5), margins=(0.8, 0.1, 0.6, 0.45))
    ax = fig.subplots()
    # one collection for every bar: a patch per op would take seconds on large pipelines (2048 ops at 16 x 64)
    frac = np.full(len(freqs), 0.5) if hi == lo else (freqs - lo) / (hi - lo)
    y = np.array([op.stage for op in ps.dag.ops], dtype=float)
    boxes = np.stack(
        [np.stack([start, y - 0.4], 1), np.stack([finish, y - 0.4], 1), np.stack([finish, y + 0.4], 1), np.stack([start, y + 0.4], 1)],
        axis=1,
    )
    edges = ["black" if op.instruction == "backward" else "white" for op in ps.dag.ops]
    # matplotlib takes an (N, 4, 2) array of boxes (its fast path); its stub types verts as a Sequence only
    ax.add_collection(PolyCollection(boxes, facecolors=cmap(frac), edgecolors=edges, linewidths=0.5))  # type: ignore[arg-type]
    ax.set_xlim(0, float(finish.max()) * 1.02)
    ax.set_ylim(-0.6, ps.dag.stages - 0.4)
    ax.set_yticks(range(ps.dag.stages))
    ax.set_yticklabels([f"stage {s}" for s in range(ps.dag.stages)])
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_title(
        f"plan {k}: {ps.emulated_time_s[k]:.4f} s, {ps.emulated_energy_j[k]:,.1f} J (emulated); colour = SM clock, black edge = backward",
        fontsize=10,
    )
    sm = ScalarMappable(cmap=cmap, norm=Normalize(lo, hi if hi > lo else lo + 1))
    fig.colorbar(sm, ax=ax, label="SM clock (MHz)")
    _label_bars(fig, ax, ps, start, finish, cmap(frac))  # after the colour bar, which narrows the axes
    return fig


#: Font size of the instruction labels in the timeline (points).
LABEL_POINTS = 6


def _label_bars(fig: Any, ax: Any, ps: PlanSet, start: np.ndarray, finish: np.ndarray, faces: np.ndarray) -> None:
    """Each bar's instruction label (``F3``, ``B10``), where it fits inside the bar (a label wider than its bar
    would run into the next one's), in black on light colours and white on dark ones."""
    width_in = fig.get_figwidth() * ax.get_position().width  # the axes' width in inches
    per_second = width_in / ax.get_xlim()[1]
    # relative luminance (ITU-R BT.709) of each face: dark text above the middle
    luminance = faces[:, :3] @ np.array([0.2126, 0.7152, 0.0722])
    for i, op in enumerate(ps.dag.ops):
        needed = (len(op.label) * 0.62 + 0.4) * LABEL_POINTS / 72  # the label's width and a margin, in inches
        if (finish[i] - start[i]) * per_second < needed:
            continue
        color = "black" if luminance[i] > 0.5 else "white"
        ax.text((start[i] + finish[i]) / 2, op.stage, op.label, ha="center", va="center", fontsize=LABEL_POINTS, color=color)


def frontier_rows(ps: PlanSet) -> list[tuple]:
    return [
        (k, float(ps.planned_time_s[k]), float(ps.planned_energy_j[k]), float(ps.emulated_time_s[k]), float(ps.emulated_energy_j[k]))
        for k in range(len(ps))
    ]


__all__ = ["figure_data", "frontier_rows", "plot_frontier", "plot_timeline", "write_figures"]

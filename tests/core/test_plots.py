"""The tradeoff figure reads: labels of the chosen knobs never overlap one another nor leave the axes, the
Pareto frontier stands out above the points even when it is two close points, and the legend hides no point."""

from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from zeus_core.plots import Mark, place_labels, tradeoff_figure

# the CIFAR-100 case that drew "256@250W x136" over "128@250W x1": the chosen knobs a few pixels apart
POINTS = {
    (256, 250.0): (277.8, 30347.2),
    (128, 250.0): (330.0, 29000.0),
    (256, 225.0): (285.0, 29500.0),
    (512, 125.0): (330.0, 43000.0),
    (1024, 125.0): (480.0, 62000.0),
    (64, 250.0): (560.0, 41000.0),
    (1024, 250.0): (444.0, 73000.0),
    (8, 250.0): (4400.0, 200000.0),
}
CHOSEN = {(256, 250.0): 136, (128, 250.0): 1, (256, 225.0): 2, (512, 125.0): 1, (1024, 125.0): 1}


def _figure():
    return tradeoff_figure(
        POINTS,
        marks=[Mark((1024, 250.0), "rs", "default"), Mark((256, 250.0), "g^", "oracle")],
        chosen=CHOSEN,
        name=lambda k: f"{k[0]}@{k[1]:g}W",
        title="t",
        points_label="(batch size, power limit)",
    )


def test_labels_of_close_points_do_not_overlap_and_stay_in_the_axes():
    fig = _figure()
    ax = fig.axes[0]
    renderer = FigureCanvasAgg(fig).get_renderer()
    for t in ax.texts:
        t.update_positions(renderer)
    boxes = [Text.get_window_extent(t, renderer) for t in ax.texts]  # the text, not its leader line
    assert sorted(t.get_text() for t in ax.texts) == sorted(["256@250W x136", "128@250W x1", "256@225W x2", "512@125W x1", "1024@125W x1"])
    frame = ax.get_window_extent(renderer)
    for i, a in enumerate(boxes):
        assert frame.x0 <= a.x0 and a.x1 <= frame.x1 and frame.y0 <= a.y0 and a.y1 <= frame.y1, ax.texts[i].get_text()
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), (ax.texts[i].get_text(), [t.get_text() for t in ax.texts])


def test_the_frontier_stands_out_and_the_legend_hides_no_point():
    fig = _figure()
    ax = fig.axes[0]
    (front,) = [line for line in ax.get_lines() if line.get_label() == "Pareto frontier"]
    assert front.get_linewidth() >= 2 and front.get_color() not in ("k", "black", "0.6") and front.get_marker() not in ("", "None")
    assert front.get_zorder() > ax.collections[0].get_zorder()  # drawn above the grey points
    chosen = [line for line in ax.get_lines() if line.get_label().startswith("_") and line.get_marker() == "o"]
    assert chosen and all(front.get_zorder() > c.get_zorder() for c in chosen)  # and above the chosen ones
    renderer = FigureCanvasAgg(fig).get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    assert legend.y1 <= ax.get_window_extent(renderer).y0  # below the axes


def test_a_label_with_no_free_place_still_shows_with_a_leader_line():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 2))
    ax = fig.subplots()
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    notes = place_labels(fig, ax, [((0.5, 0.5), f"a long label number {i}") for i in range(12)])
    assert len(notes) == 12 and all(n.axes is ax for n in notes)


def test_tick_labels_are_plain_distinct_and_apart_on_wide_and_narrow_ranges():
    narrow = {16: (3.1, 40.0), 32: (2.2, 31.0), 64: (1.6, 25.0), 128: (1.4, 24.0), 256: (1.5, 27.0)}  # a real job's seconds
    for points in (POINTS, narrow):
        fig = tradeoff_figure(points, marks=[], chosen={}, name=str, title="t", points_label="p")
        renderer = FigureCanvasAgg(fig).get_renderer()
        ax = fig.axes[0]
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            ticks = [t for t in axis.get_ticklabels(which="both") if t.get_text() and lo <= t.get_position()[axis is ax.yaxis] <= hi]
            texts = [t.get_text() for t in ticks]
            assert len(texts) >= 3 and len(set(texts)) == len(texts), texts  # "2 2 2" under a decade was the fault
            assert not any("10^" in s or "times" in s for s in texts), texts  # plain numbers, not 3 x 10^2
            boxes = [t.get_window_extent(renderer) for t in ticks]
            assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :]), texts


def test_zero_energies_draw_on_a_linear_axis_without_a_warning(tmp_path, recwarn):
    # A device that measured nothing (a CPU-only run on a device without counters) gives energies of 0:
    # a log axis cannot show them (matplotlib warns and draws an empty axis), a linear one can.
    zeros = {k: (t, 0.0) for k, (t, _) in POINTS.items()}
    fig = tradeoff_figure(zeros, marks=[], chosen={}, name=str, title="t", points_label="p")
    ax = fig.axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "linear")
    FigureCanvasAgg(fig).draw()
    from zeus_core.plots import Level, cost_per_recurrence

    class Try:
        def __init__(self, recurrence: int, cost: float) -> None:
            self.recurrence, self.cost = recurrence, cost

    out = cost_per_recurrence(tmp_path / "c.png", [Try(1, 0.0), Try(2, 0.0)], [Level("default", 0.0, "red")], title="t", ylabel="J")
    assert out.stat().st_size > 0
    assert not [w for w in recwarn if "log" in str(w.message)], [str(w.message) for w in recwarn]
    # positive values keep the log axes
    assert _figure().axes[0].get_yscale() == "log"

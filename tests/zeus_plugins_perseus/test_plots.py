"""The timeline figure reads: every instruction label fits inside its bar (none runs into the next), in black on
light colours (the fast clocks' yellow) and white on dark ones."""

from __future__ import annotations

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb

from zeus_plugins_perseus.planner import plan_frontier
from zeus_plugins_perseus.plots import timeline_figure
from zeus_plugins_perseus.profile import read_profile


def _luminance(rgb) -> float:
    return float(np.dot(rgb, [0.2126, 0.7152, 0.0722]))


def test_timeline_labels_fit_their_bars_and_contrast_with_them(gpt3_a100):
    ps = plan_frontier(read_profile(gpt3_a100), stages=8, microbatches=12, blocking_power_w=83.64, max_slowdown=1.0, workers=1)
    fig = timeline_figure(ps, read_profile(gpt3_a100), 0)
    renderer = FigureCanvasAgg(fig).get_renderer()
    ax = fig.axes[0]
    bars = ax.collections[0]
    faces = bars.get_facecolors()
    boxes = [p.get_extents() for p in bars.get_paths()]  # each bar in data coordinates (seconds, stage)
    texts = ax.texts
    assert len(texts) > 100  # most of the 192 bars are labelled
    light = dark = 0
    for t in texts:
        x, y = t.get_position()
        inside = [i for i, b in enumerate(boxes) if b.x0 <= x <= b.x1 and b.y0 <= y <= b.y1]
        assert len(inside) == 1, t.get_text()
        bar = boxes[inside[0]]
        (left, _), (right, _) = ax.transData.inverted().transform(t.get_window_extent(renderer).get_points())
        assert bar.x0 <= left and right <= bar.x1, f"{t.get_text()} is wider than its bar"
        face = _luminance(faces[inside[0]][:3])
        text = _luminance(to_rgb(t.get_color()))
        assert abs(face - text) > 0.4, f"{t.get_text()}: text {t.get_color()} on a face of luminance {face:.2f}"
        light += face > 0.5
        dark += face <= 0.5
    assert light and dark  # both kinds of bar are labelled, each in its own colour

"""The trace device's figures are replays of a published measurement whose source states no error
(issue 37): each says it is an estimate, and its bound is unknown, never claimed small."""

from __future__ import annotations

import math

from zeus_core.device import EnergyPrecision
from zeus_plugins_trace.device import TraceDevice, TraceDeviceOptions


def test_a_replayed_figure_is_an_estimate_with_an_unknown_bound():
    device = TraceDevice(TraceDeviceOptions(gpu="v100"))
    assert isinstance(device, EnergyPrecision)
    precision = device.energy_precision["gpu0"]
    assert (precision.method, precision.scope) == ("estimate", "gpu") == (device.energy_sources["gpu0"], "gpu")
    assert math.isnan(precision.bound_j(100.0, 25_000.0))

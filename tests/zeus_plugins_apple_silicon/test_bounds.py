"""Every Apple Silicon figure says how sure it is (issue 37), on the simulated zeus_apple_silicon.

A channel is a counter in whole millijoules whose update period Apple does not document: the device
infers it when it opens (the counter check) and keeps it per chip. The simulated package's
``update_s`` (off by default) renews the channels only every period; a window begun just after a
renewal and ended just before one misses most of a period's energy, which the window's bound covers
and the bound of a counter read the moment it counts (its 1 mJ step alone) does not.
"""

from __future__ import annotations

import math
import time

import pytest
from bound_helpers import measure, off_by, phase_in

from zeus_core.devicekit import model_update_period
from zeus_plugins_apple_silicon import fake_apple_silicon
from zeus_plugins_apple_silicon.device import CHIP_MAX_W, AppleSilicon


def gpu_truth() -> float:
    return fake_apple_silicon.true_energy_j("gpu_mj")


def test_channels_renewed_every_period(tmp_path, monkeypatch):
    model = "Apple M2 Max update-period test"
    monkeypatch.setenv(fake_apple_silicon.ENV, str(fake_apple_silicon.create(tmp_path / "a.json", chip=model, update_s=0.05)))
    with AppleSilicon() as dev:
        precision = dev.energy_precision["gpu"]
        assert precision.method == "counter" and precision.resolution_j == 0.001 and precision.max_w == CHIP_MAX_W
        assert precision.period_s >= 0.05  # inferred from the channels' moves, never shorter than their period
        assert model_update_period(f"apple-silicon {model}") == precision.period_s
        assert {n: p.scope for n, p in dev.energy_precision.items()} == {
            "cpu": "cpu_package",
            "gpu": "gpu",
            "ane": "device",
            "dram": "dram",
        }
        m, seen = measure(dev, gpu_truth, lambda: time.sleep(0.2), begin=phase_in(0.05, 0.002, 0.01), end=phase_in(0.05, 0.04, 0.048))
    assert m.sources["gpu"] == "counter" and m.scopes["gpu"] == "gpu"
    assert seen[0] - m.energy["gpu"] > 12.0 * 0.025  # most of a period's energy is missing
    assert off_by(m, "gpu", seen) <= m.errors["gpu"]
    assert m.errors["gpu"] == pytest.approx(CHIP_MAX_W * precision.period_s + 0.001)
    step_only = precision._replace(period_s=0.0)
    assert off_by(m, "gpu", seen) > step_only.bound_j(m.time, m.energy["gpu"]), "a counter read the moment it counts would hold"


def test_a_chip_whose_channels_never_moved_has_an_unknown_bound(tmp_path, monkeypatch):
    """Nothing seen to move at open, nothing inferred: the bound is NaN (unknown), never a guess."""
    idle = {"cpu_total_mj": 0.0, "gpu_mj": 0.0}
    monkeypatch.setenv(fake_apple_silicon.ENV, str(fake_apple_silicon.create(tmp_path / "a.json", idle, chip="Apple M1 idle test")))
    with AppleSilicon() as dev:
        m, _ = measure(dev, gpu_truth, lambda: time.sleep(0.05))
    assert math.isnan(m.errors["gpu"]) and m.sources["gpu"] == "counter"

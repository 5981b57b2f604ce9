"""Every AMD figure says how sure it is (issue 37), on the simulated AMD driver.

The accumulator's update period is inferred when the device opens and bounds a window; the
simulated driver's ``counter_period_s`` (off by default) renews the accumulator only every period,
as the GPU metrics table it comes from is (:mod:`zeus_plugins_amdsmi.sensors`). A window begun just
after a renewal and ended just before one misses most of a period's energy: the bound the window
reports covers it, and the bound of a counter read the moment it counts (its step alone) is broken.
"""

from __future__ import annotations

import math
import time

import pytest
from bound_helpers import measure, off_by, phase_in

from zeus_core.devicekit import model_update_period
from zeus_plugins_amdsmi import fake_amdsmi
from zeus_plugins_amdsmi.device import AmdGpus
from zeus_plugins_amdsmi.fake_amdsmi import FakeAmdGpu
from zeus_plugins_amdsmi.options import AmdsmiOptions
from zeus_plugins_amdsmi.sensors import COUNTER_PERIOD_S, FIRMWARE_UNIT_UJ


def truth() -> float:
    return fake_amdsmi.true_energy_j(0)


def test_an_accumulator_renewed_every_period(fake_amd):
    model = "AMD Instinct MI300X counter-period test"
    fake_amd([FakeAmdGpu(market_name=model, demand_w=500.0, counter_period_s=0.05)])
    with AmdGpus(AmdsmiOptions(counter_check_s=1.0)) as dev:
        precision = dev.energy_precision["gpu0"]
        assert precision.method == "counter" and precision.scope == "gpu" and precision.max_w == 750.0
        assert precision.period_s >= 0.05  # inferred from the accumulator's moves, never shorter than its period
        assert model_update_period(model) == precision.period_s  # kept for the model
        assert precision.resolution_j == pytest.approx(15.3e-6)  # counter_resolution as the library reports it
        m, seen = measure(dev, truth, lambda: time.sleep(0.2), begin=phase_in(0.05, 0.002, 0.01), end=phase_in(0.05, 0.04, 0.048))
    assert m.sources == {"gpu0": "counter"} and m.scopes == {"gpu0": "gpu"}
    assert seen[0] - m.energy["gpu0"] > 500.0 * 0.025  # most of a period's energy is missing
    assert off_by(m, "gpu0", seen) <= m.errors["gpu0"]
    assert m.errors["gpu0"] == pytest.approx(750.0 * precision.period_s + 15.3e-6 + precision.scale * m.energy["gpu0"])
    step_only = precision._replace(period_s=0.0)
    assert off_by(m, "gpu0", seen) > step_only.bound_j(m.time, m.energy["gpu0"]), "a counter read the moment it counts would hold"


def test_a_firmware_unit_the_library_rounds(fake_amd):
    """The firmware counts in 2**-16 J and the library multiplies by 15.3 µJ: every window counts 0.27 % too
    much. The counter's bound carries that share (``scale``); without it, a window long enough that 0.27 % of
    its energy outgrows the edges' part of the bound breaks the bound (the window's length is set from that
    part, so it is long enough whatever period the check at open inferred)."""
    fake_amd([FakeAmdGpu(market_name="AMD Instinct MI300X unit test", demand_w=750.0, counter_unit_uj=FIRMWARE_UNIT_UJ)])
    with AmdGpus(AmdsmiOptions(counter_check_s=1.0)) as dev:
        precision = dev.energy_precision["gpu0"]
        assert precision.scale == pytest.approx(15.3 / 15.2587890625 - 1, rel=1e-4)  # 0.27 % (15.3 as a C float)
        seconds = 1.25 * precision.bound_j(0.0, 0.0) / (precision.scale * 750.0)
        m, seen = measure(dev, truth, lambda: time.sleep(seconds))
    assert m.energy["gpu0"] == pytest.approx(seen[1] * 15.3 / 15.2587890625, rel=1e-3)  # counted 0.27 % high
    assert off_by(m, "gpu0", seen) <= m.errors["gpu0"]
    exact_unit = precision._replace(scale=0.0)
    assert off_by(m, "gpu0", seen) > exact_unit.bound_j(m.time, m.energy["gpu0"]), "a counter of exact unit would hold"


def test_without_the_quirk_the_figure_and_its_bound_hold(fake_amd):
    """The quirk is off by default: the accumulator counts to the moment, and the bound still holds."""
    fake_amd([FakeAmdGpu(market_name="AMD Instinct MI300X no-quirk test", demand_w=500.0)])
    with AmdGpus(AmdsmiOptions(counter_check_s=1.0)) as dev:
        m, seen = measure(dev, truth, lambda: time.sleep(0.2))
    assert off_by(m, "gpu0", seen) <= 0.01 and math.isfinite(m.errors["gpu0"])


def test_polled_power_is_bounded_where_it_is_instant_and_unknown_where_averaged(fake_amd):
    """``current_socket_power`` (MI300 on) is renewed with the metrics table: a finite bound. An older GPU
    reports only ``average_socket_power``, whose averaging window AMD does not document: the bound is
    unknown (NaN), never guessed."""
    fake_amd(
        [
            FakeAmdGpu(market_name="AMD Instinct MI300X polled test", demand_w=500.0),
            FakeAmdGpu(market_name="AMD Instinct MI210 polled test", demand_w=250.0, max_cap_w=300.0, reports_instant=False),
        ]
    )
    with AmdGpus(AmdsmiOptions(energy="polling", poll_interval_s=0.01)) as dev:
        instant, averaged = dev.energy_precision["gpu0"], dev.energy_precision["gpu1"]
        m, seen = measure(dev, truth, lambda: time.sleep(0.3))
    assert instant.method == averaged.method == "polling"
    assert instant.sensor_period_s == COUNTER_PERIOD_S and instant.average_s == 0.0
    assert m.sources["gpu0"] == "polling" and off_by(m, "gpu0", seen) <= m.errors["gpu0"]
    assert m.errors["gpu0"] == pytest.approx(2 * 750.0 * (0.01 + COUNTER_PERIOD_S))
    assert math.isnan(m.errors["gpu1"]) and math.isnan(averaged.average_s)

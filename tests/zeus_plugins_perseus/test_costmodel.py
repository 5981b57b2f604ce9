import numpy as np
import pytest

from zeus_plugins_perseus.costmodel import (
    exponential_spec,
    fit_exponential,
    measured_spec,
    published_candidates,
)
from zeus_plugins_perseus.profile import InstructionOptions, read_profile


def opts(freq, time, energy):
    return InstructionOptions(0, "forward", np.array(freq), np.array(time, float), np.array(energy, float))


def test_measured_keeps_clocks_worth_running_for_blocking_power():
    # 900 MHz burns more raw energy than 1000 MHz, but 10 ms less blocking at 1000 W saves more
    o = opts([1000, 900, 800], [0.050, 0.060, 0.0605], [20.0, 21.0, 30.0])
    spec = measured_spec(o, 0.001, blocking_w=1000.0)
    assert list(spec.option_freqs) == [1000, 900]  # 800 MHz: slower and more effective energy
    assert (spec.lo, spec.hi) == (50, 60)
    assert spec.costs[0] == pytest.approx(20.0 - 50.0) and spec.costs[-1] == pytest.approx(21.0 - 60.0)
    # without blocking power, 900 MHz is dominated
    assert list(measured_spec(o, 0.001, 0.0).option_freqs) == [1000]


def test_measured_hull_and_clock_choice():
    o = opts([4, 3, 2, 1], [0.010, 0.012, 0.014, 0.020], [10.0, 7.0, 6.5, 5.0])
    spec = measured_spec(o, 0.001, 0.0)
    # (12, 7) is a hull vertex, (14, 6.5) lies above the segment (12,7)-(20,5)
    assert spec.costs[12 - 10] == pytest.approx(7.0)
    assert spec.costs[14 - 10] == pytest.approx(7.0 - 2 * (2.0 / 8))
    assert spec.frequency_for(13) == 3 and spec.frequency_for(14) == 2 and spec.frequency_for(19) == 2
    assert spec.frequency_for(9) == 4 and spec.frequency_for(25) == 1
    # times are rounded up, so a plan's quantised time bounds the real one
    assert list(spec.option_units) == [10, 12, 14, 20]


def test_published_candidate_filter():
    t = np.array([0.0100, 0.0105, 0.0120, 0.0119, 0.0150])
    e = np.array([10.0, 9.0, 11.0, 8.0, 7.9])
    q = np.array([int(x // 0.001) for x in t])
    # 0.0120 is dominated by 0.0119; 0.0105 shares quantum 10 with 0.0100, whose larger
    # energy (the faster option within the quantum) is kept
    assert [int(i) for i in published_candidates(t, e, q, 1.0)] == [4, 3, 0]


def test_exponential_fit_recovers_exact_curve():
    x = np.arange(50, 80, 3)
    y = 15000 * np.exp(-0.15 * x) + 11.0
    a, b, c = fit_exponential(x, y, 0.001)
    assert (a, b, c) == pytest.approx((15000, -0.15, 11.0), rel=1e-4)
    with pytest.raises(ValueError, match="too few"):
        fit_exponential(x[:2], y[:2], 0.001)


def test_exponential_spec_on_published_profile(gpt3_a100):
    p = read_profile(gpt3_a100)
    spec = exponential_spec(p.get(0, "forward"), 0.001, 83.64)
    # the raw-energy filter keeps 13 options of stage 0 forward, down to 1080 MHz
    assert len(spec.option_freqs) == 13 and spec.option_freqs.min() == 1080
    assert np.all(np.diff(spec.costs) < 0)
    assert spec.frequency_for(spec.hi) == 1080 and spec.frequency_for(spec.lo) == spec.option_freqs[0]

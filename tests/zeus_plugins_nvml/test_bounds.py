"""Every figure says how sure it is (issue 37 items 1 and 2), on the simulated NVIDIA driver.

Each measurement quirk of the driver (:data:`fake_pynvml.MEASUREMENT_QUIRKS`) is switched on in
turn; a window's energy, compared with what the simulated GPU truly drew (:func:`fake_pynvml.true_energy_j`,
read just before and just after each window edge, so the truth is an interval), stays within the
bound the window itself reports (``Measurement.errors``). Each test then shows that the bound
computed as if the quirk were absent (an instant, fully covered reading; a counter read the moment
it counts) is broken by the same window: the quirk, had the project ignored it, would have been
caught. Window edges are placed by the simulated clock's phase, not by luck.
"""

from __future__ import annotations

import time
import warnings

import bound_helpers
import pytest
from bound_helpers import phase_in

from zeus_core.device import Precision
from zeus_core.devicekit import model_update_period
from zeus_core.windows import Monitor
from zeus_plugins_nvml import fake_pynvml
from zeus_plugins_nvml.device import NvmlGpus
from zeus_plugins_nvml.fake_pynvml import FakeGpu
from zeus_plugins_nvml.options import NvmlOptions


def measure(dev, body, begin=None, end=None):
    """One window over ``dev`` around ``body()`` (edges when ``begin()`` / ``end()`` hold, each edge's reading
    where its condition holds): the measurement, and the interval the GPU's true energy over it lies in."""
    return bound_helpers.measure(dev, lambda: fake_pynvml.true_energy_j(0), body, begin, end)


def off_by(m, truth) -> float:
    """How far the window's figure lies from the interval holding the true energy (0 inside it)."""
    got = m.energy["gpu0"]
    return max(0.0, truth[0] - got, got - truth[1])


def test_a_counter_that_updates_every_100_ms(fake_nvml):
    """SC'24: NVIDIA's counter updates about every 100 ms. The device infers the period when it opens
    and keeps it per model; a window begun just after an update and ended just before one misses
    most of a period's energy, which the bound covers and an instant counter's bound does not."""
    model = "NVIDIA A100-SXM4-80GB counter-period test"
    nvml = fake_nvml([FakeGpu(name=model, demand_w=250.0, counter_period_s=0.1)])
    with NvmlGpus(NvmlOptions(counter_check_s=1.0), nvml) as dev:
        precision = dev.energy_precision["gpu0"]
        assert precision.method == "counter" and precision.scope == "gpu"
        assert precision.period_s >= 0.1  # inferred from the counter's moves, never shorter than its period
        assert model_update_period(model) == precision.period_s  # kept for the model
        m, truth = measure(dev, lambda: time.sleep(0.3), begin=phase_in(0.1, 0.003, 0.02), end=phase_in(0.1, 0.08, 0.097))
    assert m.sources == {"gpu0": "counter"} and m.scopes == {"gpu0": "gpu"}
    assert off_by(m, truth) <= m.errors["gpu0"]
    assert m.errors["gpu0"] == pytest.approx(400.0 * precision.period_s + 0.001)
    instant = precision._replace(period_s=0.0)
    assert off_by(m, truth) > instant.bound_j(m.time, m.energy["gpu0"]), "an instant counter's bound would have held"


def test_a_second_gpu_of_a_model_shares_its_period(fake_nvml):
    """The period is inferred per model: a GPU whose check saw too few moves (its counter check too
    short) takes the one its model showed."""
    model = "NVIDIA A100-PCIE-40GB shared-period test"
    nvml = fake_nvml([FakeGpu(name=model, counter_period_s=0.1)])
    with NvmlGpus(NvmlOptions(counter_check_s=1.0), nvml) as dev:
        seen = dev.energy_precision["gpu0"].period_s
    with NvmlGpus(NvmlOptions(counter_check_s=0.05), nvml) as dev:  # too short to see three moves
        assert dev.energy_precision["gpu0"].period_s == seen


def test_a_counter_that_moves_in_coarse_steps(fake_nvml):
    """A counter that counts in 20 J steps: a window begun just after a step and ended just before
    one misses almost a step. The update period inferred at open (the time between the steps) covers
    it; NVML's 1 mJ resolution alone does not."""
    step_j = 20.0
    nvml = fake_nvml([FakeGpu(name="NVIDIA A100 coarse-counter test", demand_w=250.0, counter_step_mj=step_j * 1000)])

    def step_phase(lo: float, hi: float):
        return lambda: lo <= (fake_pynvml.true_energy_j(0) % step_j) / step_j <= hi

    with NvmlGpus(NvmlOptions(counter_check_s=1.0), nvml) as dev:
        m, truth = measure(dev, lambda: time.sleep(0.3), begin=step_phase(0.0, 0.15), end=step_phase(0.75, 0.95))
        precision = dev.energy_precision["gpu0"]
    assert precision.period_s >= step_j / 250.0  # a step every 80 ms at 250 W
    assert off_by(m, truth) <= m.errors["gpu0"]
    resolution_only = precision._replace(period_s=0.0)
    assert off_by(m, truth) > resolution_only.bound_j(m.time, m.energy["gpu0"])


def test_a_power_reading_that_covers_25_ms_of_each_100_ms(fake_nvml):
    """SC'24: on A100 and H100 the power reading covers 25 ms of each 100 ms. A load busy for exactly
    those 25 ms and idle for the rest reads as busy all the time, so polled energy counts the busy
    draw throughout; the bound counts the uncovered 75 % at up to the board's maximum, and the bound
    of a fully covered reading (even with the reading's averaging and refresh counted) is broken."""
    gpu = FakeGpu(demand_w=250.0, idle_w=60.0, power_period_s=0.1, power_coverage=0.25, load_wave=[0.1, 0.25])
    nvml = fake_nvml([gpu])
    with NvmlGpus(NvmlOptions(energy="polling", poll_interval_s=0.01), nvml) as dev:
        precision = dev.energy_precision["gpu0"]
        assert precision.method == "polling" and precision.coverage == 0.25  # an A100 (sensors.PARTIAL_COVERAGE)
        m, truth = measure(dev, lambda: time.sleep(3.0))
    assert m.sources == {"gpu0": "polling"}
    assert m.energy["gpu0"] > 1.8 * truth[1]  # the reading saw the busy quarter only
    assert off_by(m, truth) <= m.errors["gpu0"]
    full_coverage = precision._replace(coverage=1.0)
    assert off_by(m, truth) > full_coverage.bound_j(m.time, m.energy["gpu0"])
    instant = full_coverage._replace(sensor_period_s=0.0, average_s=0.0)
    assert off_by(m, truth) > instant.bound_j(m.time, m.energy["gpu0"])


def test_an_averaged_power_reading(fake_nvml):
    """SC'24: Ampere-and-later boards report power averaged over 1 s. A load that rises inside a
    window is integrated late: the window misses half a second of the rise, which the bound counts
    (half the averaging window at the board's maximum) and an instant reading's bound does not."""
    gpu = FakeGpu(name="NVIDIA RTX A6000", demand_w=60.0, idle_w=60.0, power_average_s=1.0)
    nvml = fake_nvml([gpu])
    with NvmlGpus(NvmlOptions(energy="polling", poll_interval_s=0.01), nvml) as dev:
        precision = dev.energy_precision["gpu0"]
        assert precision.average_s == 1.0 and precision.coverage == 1.0

        def rise() -> None:
            time.sleep(0.3)
            fake_pynvml.set_demand(0, 400.0)
            time.sleep(1.6)

        m, truth = measure(dev, rise)
    assert truth[0] - m.energy["gpu0"] > 0.8 * 340.0 / 2  # about half a second of the 340 W rise is missing
    assert off_by(m, truth) <= m.errors["gpu0"]
    instant = precision._replace(average_s=0.0)
    assert off_by(m, truth) > instant.bound_j(m.time, m.energy["gpu0"])


def test_a_window_too_short_for_the_bound_asked_warns_once_naming_the_length_that_meets_it(fake_nvml):
    nvml = fake_nvml([FakeGpu(name="NVIDIA A100 short-window test", demand_w=250.0, counter_period_s=0.1)])
    with NvmlGpus(NvmlOptions(counter_check_s=1.0), nvml) as dev:
        mon = Monitor(dev, sync="none")  # target_error: 1 % by default
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            measured = []
            for _ in range(2):
                mon.begin_window("step")
                time.sleep(0.2)
                measured.append(mon.end_window("step"))
        precision = dev.energy_precision["gpu0"]
        quiet = Monitor(dev, sync="none", target_error=None)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            quiet.begin_window("w")
            time.sleep(0.25)
            quiet.end_window("w")
    ours = [str(w.message) for w in caught if "target_error" in str(w.message)]
    assert len(ours) == 1, ours  # once per device, however many windows
    first = measured[0]  # the window that warned
    watts = first.energy["gpu0"] / first.time
    shortest = precision.min_window_s(0.01, watts)
    assert f"windows of at least {shortest:.3g} s meet it" in ours[0] and "window 'step' on gpu0" in ours[0]
    # that length meets the bound asked, and a tenth shorter does not
    assert precision.bound_j(shortest, watts * shortest) <= 0.01 * watts * shortest * (1 + 1e-9)
    assert precision.bound_j(0.9 * shortest, watts * 0.9 * shortest) > 0.01 * watts * 0.9 * shortest
    with pytest.raises(ValueError, match="target_error must be a positive fraction"):
        Monitor(dev, sync="none", target_error=0.0)


def test_partial_coverage_can_make_a_bound_unreachable_and_the_warning_says_so():
    """Polled power that covers a quarter of the time is off by up to 75 % of the maximum draw at any
    window length: no window meets 1 %, and the warning says so instead of naming a length."""
    p = Precision("polling", "gpu", 400.0, period_s=0.01, sensor_period_s=0.1, coverage=0.25)
    assert p.min_window_s(0.01, 250.0) == float("inf")
    assert Precision("polling", "gpu", 400.0, period_s=0.01).min_window_s(0.01, 250.0) == pytest.approx(2 * 400 * 0.01 / 2.5)


def test_a_counter_refused_at_open_is_polled_and_its_bound_is_pollings(fake_nvml):
    """A counter that counts 1000 times the energy (COUNTER_QUIRKS "jump") is refused by the check at open
    (zeus_core.devicekit.check_counters); the GPU's figure is then polled power with polling's bound, and
    holds what it drew. Trusted, the counter would have been off by far more than a counter's bound."""
    nvml = fake_nvml([FakeGpu(name="NVIDIA A100 jumping-counter test", demand_w=250.0, counter_quirk="jump")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the refusal's own warning: tests/zeus_plugins_nvml/test_counter_checks.py
        dev = NvmlGpus(NvmlOptions(poll_interval_s=0.01), nvml)
    with dev:
        precision = dev.energy_precision["gpu0"]
        assert precision.method == "polling"
        h = nvml.nvmlDeviceGetHandleByIndex(0)
        raw0 = nvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0
        m, truth = measure(dev, lambda: time.sleep(1.0))
        raw = nvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0 - raw0
    assert m.sources == {"gpu0": "polling"} and off_by(m, truth) <= m.errors["gpu0"]
    counter = Precision("counter", "gpu", precision.max_w, period_s=0.1, resolution_j=0.001)
    assert raw - truth[1] > counter.bound_j(m.time, raw)  # the raw counter, trusted, breaks any counter's bound

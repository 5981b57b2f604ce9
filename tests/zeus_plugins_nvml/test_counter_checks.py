"""The energy counter checked when the ``nvml`` device opens (issue 37): on the simulated driver, each
faulty counter (frozen, backwards, jumping) is refused with one warning naming the GPU and what
was seen, and the GPU's energy is then polled power matching what it drew; a good counter (one
that updates every 100 ms, an idle GPU) is kept. Each test also shows what the raw counter would
have said, had the check been absent."""

from __future__ import annotations

import re
import time
import warnings

import pytest
from zeus_test_helpers import energy_window

from zeus_core import DeviceError
from zeus_core.devicekit import CounterProbe, check_counters
from zeus_plugins_nvml import fake_pynvml
from zeus_plugins_nvml.device import NvmlGpus
from zeus_plugins_nvml.fake_pynvml import FakeGpu
from zeus_plugins_nvml.options import NvmlOptions


def raw_counter_j(nvml, seconds: float) -> float:
    """What the GPU's counter says over ``seconds``: what the device would have reported without the check."""
    nvml.nvmlInit()
    try:
        h = nvml.nvmlDeviceGetHandleByIndex(0)
        c0 = nvml.nvmlDeviceGetTotalEnergyConsumption(h)
        time.sleep(seconds)
        return (nvml.nvmlDeviceGetTotalEnergyConsumption(h) - c0) / 1000.0
    finally:
        nvml.nvmlShutdown()


@pytest.mark.parametrize(
    ("quirk", "seen"),
    [
        ("backwards", r"ran backwards, from .* J to .* J"),
        ("jump", r"jumped by .* J in .* s, more than the GPU's maximum power \(400 W\) allows"),
    ],
)
def test_a_faulty_counter_is_refused_with_one_warning_and_the_gpu_is_polled(fake_nvml, quirk, seen):
    nvml = fake_nvml([FakeGpu(demand_w=250.0, counter_quirk=quirk)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dev = NvmlGpus(NvmlOptions(poll_interval_s=0.01), nvml)
    ours = [w for w in caught if "energy counter" in str(w.message)]
    assert len(ours) == 1
    message = str(ours[0].message)
    assert "gpu0 (NVIDIA A100-SXM4-40GB, GPU-" in message and "polled power instead" in message
    assert re.search(seen, message), message
    with dev:
        assert dev.energy_sources == {"gpu0": "polling"}
        got, elapsed = energy_window(dev, 0.4)
    # polled power integrated: within 5% of what the GPU drew (250 W)
    assert got["gpu0"] == elapsed.drawn(250.0, rel=0.05)
    # the raw counter, trusted, would have reported nothing, a negative figure, or 1000 times too much
    raw = raw_counter_j(nvml, 0.2)
    assert not 0.5 * 250.0 * 0.2 <= raw <= 2 * 250.0 * 0.2, raw

    with pytest.raises(DeviceError, match='gpu0 .*cannot be measured by its energy counter.*energy = "auto"'):
        NvmlGpus(NvmlOptions(energy="counter"), nvml)


def test_a_frozen_counter_is_watched_longer_then_refused_and_its_gpu_polled_from_the_start(fake_nvml):
    """Standing still under load during the check at open could be a counter that updates less often
    than the check lasts: it is watched for counter_confirm_s more, its GPU's energy polled power
    meanwhile, then refused with one warning."""
    nvml = fake_nvml([FakeGpu(demand_w=250.0, counter_quirk="frozen")])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with NvmlGpus(NvmlOptions(poll_interval_s=0.01, counter_confirm_s=0.5), nvml) as dev:
            assert not [w for w in caught if "energy counter" in str(w.message)]  # not refused at open
            got, elapsed = energy_window(dev, 1.0)
            assert dev.energy_sources == {"gpu0": "polling"}
        ours = [str(w.message) for w in caught if "energy counter" in str(w.message)]
    assert len(ours) == 1 and re.search(
        r"gpu0 \(NVIDIA A100.*did not move in 0\.\d s while the device reported 250 W.*polled power", ours[0]
    )
    assert got["gpu0"] == elapsed.drawn(250.0, rel=0.05)
    assert raw_counter_j(nvml, 0.2) == 0.0  # what the counter, trusted, would have reported
    with pytest.raises(DeviceError, match='gpu0 .*cannot be measured by its energy counter: it did not move.*energy = "auto"'):
        NvmlGpus(NvmlOptions(energy="counter"), nvml)


def test_a_counter_that_updates_less_often_than_the_check_lasts_is_kept(fake_nvml):
    """A 0.5 s update period against a 0.3 s check: flat during the check for some phases, but it
    moves within the confirmation and is kept, without a warning; the energy is right throughout."""
    nvml = fake_nvml([FakeGpu(demand_w=250.0, counter_period_s=0.5)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with NvmlGpus(NvmlOptions(poll_interval_s=0.01, counter_confirm_s=2.0), nvml) as dev:
            got, elapsed = energy_window(dev, 1.2)
            assert dev.energy_sources == {"gpu0": "counter"}
            confirming = dev._confirming.get("gpu0")
            assert confirming is None or confirming.state == "kept"
    assert got["gpu0"] == elapsed.drawn(250.0, abs=250.0 * 0.5 + 1)  # within one update period


def test_a_counter_that_updates_every_100_ms_is_kept_and_the_check_is_short(fake_nvml):
    nvml = fake_nvml([FakeGpu(demand_w=300.0, counter_period_s=0.1), FakeGpu(demand_w=200.0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dev = NvmlGpus(NvmlOptions(), nvml)
    with dev:
        assert dev.energy_sources == {"gpu0": "counter", "gpu1": "counter"}
        got, elapsed = energy_window(dev, 0.5)
    assert got["gpu0"] == elapsed.drawn(300.0, abs=300.0 * 0.1 + 1)  # within one update period
    assert got["gpu1"] == elapsed.drawn(200.0, rel=0.03)


def test_a_check_that_cannot_decide_keeps_the_counter(fake_nvml):
    """An idle GPU (1 W: not load enough to expect a move) and a check shorter than three update
    periods (0.05 s against 100 ms) say nothing against a flat counter: it is kept, no warning."""
    # gpu1's counter may not move within 0.05 s, and it is not watched longer either
    nvml = fake_nvml([FakeGpu(idle_w=1.0, demand_w=0.0, counter_quirk="frozen"), FakeGpu(demand_w=250.0, counter_period_s=0.1)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with NvmlGpus(NvmlOptions(counter_check_s=0.05), nvml) as dev:
            assert dev.energy_sources == {"gpu0": "counter", "gpu1": "counter"}
            got, elapsed = energy_window(dev, 0.35)
    assert got["gpu1"] == elapsed.drawn(250.0, abs=250.0 * 0.1 + 1)


def test_a_gpu_without_a_counter_is_polled_without_a_warning(fake_nvml):
    """Before Volta NVML answers NotSupported for the counter: polled, as always, and not 'refused'."""
    nvml = fake_nvml([FakeGpu(arch=2, demand_w=150.0)])  # Pascal (NVML_DEVICE_ARCH_PASCAL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with NvmlGpus(NvmlOptions(poll_interval_s=0.01), nvml) as dev:
            assert dev.energy_sources == {"gpu0": "polling"}
            got, elapsed = energy_window(dev, 0.3)
    assert got["gpu0"] == elapsed.drawn(150.0, rel=0.05)
    nvml.nvmlInit()
    try:
        with pytest.raises(fake_pynvml._real.NVMLError_NotSupported):
            nvml.nvmlDeviceGetTotalEnergyConsumption(nvml.nvmlDeviceGetHandleByIndex(0))
    finally:
        nvml.nvmlShutdown()


def test_an_averaged_power_reading_that_lags_a_load_step_does_not_refuse_a_good_counter(fake_nvml):
    """Ampere-and-later boards average the default power reading over 1 s: right after the load
    drops from 400 W to 60 W it still says about 400 W, more than four times what the counter
    counts. The check compares with the instant field, so the counter is kept."""
    nvml = fake_nvml([FakeGpu(demand_w=400.0, power_average_s=2.0)])
    fake_pynvml.set_demand(0, 60.0)
    nvml.nvmlInit()
    try:
        h = nvml.nvmlDeviceGetHandleByIndex(0)
        assert nvml.nvmlDeviceGetPowerUsage(h) / 1000.0 > 4 * 60.0
        # checked against the averaged reading, the good counter would have been refused
        averaged = CounterProbe(
            lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0, lambda: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0, 400.0
        )
        assert "counted" in check_counters({"gpu0": averaged}, 0.3, kind="GPU")["gpu0"]
    finally:
        nvml.nvmlShutdown()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with NvmlGpus(NvmlOptions(), nvml) as dev:
            assert dev.energy_sources == {"gpu0": "counter"}
            got, elapsed = energy_window(dev, 0.3)
    assert got["gpu0"] == elapsed.drawn(60.0, rel=0.05)


def test_without_the_instant_power_field_the_default_reading_judges_the_counter(fake_nvml):
    """An older driver without NVML's power field values: the check falls back to nvmlDeviceGetPowerUsage."""
    nvml = fake_nvml([FakeGpu(demand_w=250.0, counter_quirk="frozen", power_fields=False)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with NvmlGpus(NvmlOptions(poll_interval_s=0.01, counter_confirm_s=0.3), nvml) as dev:
            got, elapsed = energy_window(dev, 0.6)
            assert dev.energy_sources == {"gpu0": "polling"}
    assert len([w for w in caught if "energy counter did not move" in str(w.message)]) == 1
    assert got["gpu0"] == elapsed.drawn(250.0, rel=0.05)

"""Energy, power, temperatures of the amdsmi device on the simulated driver: the accumulator's
resolution and wraparound, the check at open and the polled fallback, MI250X odd dies."""

from __future__ import annotations

import time
import warnings

import pytest
from zeus_test_helpers import energy_window as window

from zeus_core import (
    DeviceError,
    GpuSync,
    HasIdentity,
    PowerDomainReadings,
    PowerLimitControl,
    PowerReadings,
    TemperatureReadings,
)
from zeus_plugins_amdsmi import fake_amdsmi
from zeus_plugins_amdsmi.device import AmdGpus
from zeus_plugins_amdsmi.energy import WRAP_COUNTS
from zeus_plugins_amdsmi.fake_amdsmi import FakeAmdGpu
from zeus_plugins_amdsmi.options import AmdsmiOptions


def gpus(**options) -> AmdGpus:
    return AmdGpus(AmdsmiOptions(counter_check_s=options.pop("counter_check_s", 0.05), **options))


def test_accumulator_energy_is_counts_times_the_resolution(fake_amd):
    fake_amd([FakeAmdGpu(demand_w=400.0), FakeAmdGpu(demand_w=250.0, counter_resolution_uj=1.0)])
    with gpus() as dev:
        assert dev.energy_sources == {"gpu0": "counter", "gpu1": "counter"}
        t0 = time.monotonic()
        e0 = [fake_amdsmi.true_energy_j(i) for i in (0, 1)]
        got, elapsed = window(dev, 0.3)
        truth = [fake_amdsmi.true_energy_j(i) - e0[i] for i in (0, 1)]
        outer = time.monotonic() - t0  # the truth's span holds the window's, and lies within this
    # The accumulator counts 15.3 uJ (a float32) per step on gpu0 and 1 uJ on gpu1: both give joules.
    assert got["gpu0"] == elapsed.drawn(400.0, rel=0.03)
    assert got["gpu1"] == elapsed.drawn(250.0, rel=0.03)
    # never more than the GPU drew around the window, and short of it by no more than 400 W over the time
    # the truth's readings can lie outside the window's
    assert truth[0] - 400.0 * (outer - elapsed.shortest) - 0.01 <= got["gpu0"] <= truth[0] + 0.01


def test_a_32_bit_accumulator_wraps_and_no_wrap_is_missed_in_a_long_window(fake_amd):
    """2**32 counts of 0.05 uJ wrap every 0.72 s at 300 W; a 1.6 s window crosses two wraps, which a
    reader of the two window edges alone would miss one of (214.7 J short)."""
    fake_amd([FakeAmdGpu(demand_w=300.0, counter_bits=32, counter_resolution_uj=0.05, counter_start=WRAP_COUNTS - 2_000_000)])
    with gpus() as dev:
        assert dev.energy_sources["gpu0"] == "counter"
        got, elapsed = window(dev, 1.6)
        acc = dev._counters["gpu0"]
        assert acc.wraps >= 2 and acc.resets == 0
    assert got["gpu0"] == elapsed.drawn(300.0, rel=0.03)


def test_an_accumulator_that_goes_back_is_a_reset_not_a_wrap(fake_amd):
    fake_amd([FakeAmdGpu(demand_w=300.0)])
    with gpus() as dev:
        e0 = dev.read_energy()["gpu0"]
        fake_amdsmi.reset_counter(0)  # a driver reload: the 64-bit accumulator starts from 0
        t0 = time.monotonic()
        with pytest.warns(UserWarning, match="went back from .* counts"):
            e1 = dev.read_energy()["gpu0"]
        t1 = time.monotonic()
        time.sleep(0.2)
        t2 = time.monotonic()
        e2 = dev.read_energy()["gpu0"]
        t3 = time.monotonic()
    assert 0 <= e1 - e0 < 50  # not the 2**32-count "wrap" (65 kJ) a naive reader would add
    # counted on from the reset: 300 W between the reading after it (between t0 and t1) and the next (t2 to t3)
    assert 300.0 * (t2 - t1) - 0.01 <= e2 - e1 <= 300.0 * (t3 - t0) + 0.01


@pytest.mark.parametrize(
    ("gpu", "why"),
    [
        (FakeAmdGpu(demand_w=350.0, counter_mode="frozen"), "did not move"),
        (FakeAmdGpu(demand_w=350.0, counter_mode="scaled", counter_scale=0.1), "while the GPU reported 350 W"),
        (FakeAmdGpu(demand_w=350.0, counter_mode="backwards"), "ran backwards"),
        (FakeAmdGpu(demand_w=350.0, counter_mode="jump"), r"jumped by .* more than the GPU's maximum power \(750 W\) allows"),
    ],
)
def test_an_accumulator_that_fails_the_check_falls_back_to_polled_power(fake_amd, gpu, why):
    fake_amd([gpu])
    with pytest.warns(UserWarning, match=why):
        dev = gpus(poll_interval_s=0.01)
    with dev:
        assert dev.energy_sources == {"gpu0": "polling"}
        got, elapsed = window(dev, 0.4)
        # what the accumulator itself says, had it been trusted: far from the 350 W drawn
        c0 = fake_amdsmi.amdsmi_get_energy_count(dev.gpus[0].handle)
        time.sleep(0.1)
        c1 = fake_amdsmi.amdsmi_get_energy_count(dev.gpus[0].handle)
    raw_w = (c1["energy_accumulator"] - c0["energy_accumulator"]) * c0["counter_resolution"] / 1e6 / 0.1
    assert got["gpu0"] == elapsed.drawn(350.0, rel=0.05)
    assert not 350.0 / 2 <= raw_w <= 350.0 * 2, raw_w

    with pytest.raises(DeviceError, match=r'(?s)gpu0 \(AMD Instinct MI300X.*cannot be measured by its energy accumulator.*energy = "auto"'):
        gpus(energy="counter")


def test_an_idle_gpus_still_accumulator_is_kept_for_nothing_judges_it(fake_amd):
    """Under 5 W a still accumulator may just be idle (the old check refused it): kept, no warning."""
    fake_amd([FakeAmdGpu(idle_w=1.0, demand_w=0.0, counter_mode="frozen")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with gpus(counter_check_s=0.3) as dev:
            assert dev.energy_sources == {"gpu0": "counter"}


def test_polling_when_asked_and_the_counter_when_it_is_sane(fake_amd):
    fake_amd([FakeAmdGpu(demand_w=200.0)])
    with gpus(energy="polling", poll_interval_s=0.01) as dev:
        assert dev.energy_sources == {"gpu0": "polling"}
        got, elapsed = window(dev, 0.3)
    assert got["gpu0"] == elapsed.drawn(200.0, rel=0.05)


def test_the_odd_die_of_an_mi250x_is_left_out_or_refused(fake_amd):
    mi250 = dict(market_name="AMD Instinct MI250X", reports_instant=False, min_cap_w=100.0, max_cap_w=500.0, default_cap_w=500.0)
    fake_amd([FakeAmdGpu(**mi250), FakeAmdGpu(reports_power=False, **mi250)])
    with pytest.warns(UserWarning, match=r"gpu1 \(AMD Instinct MI250X.*reports no power.*dual-die.*left out"):
        dev = gpus()
    with dev:
        assert dev.names == ["gpu0"] and dev.max_power_w == 500.0
    with pytest.raises(DeviceError, match="the die before it reports the power and energy of both.*leave it out of gpus"):
        gpus(gpus=[1])


def test_power_domains_power_temperatures_and_identity(fake_amd):
    fake_amd(
        [
            FakeAmdGpu(demand_w=300.0),
            FakeAmdGpu(market_name="AMD Instinct MI210", demand_w=200.0, reports_instant=False, temperatures_c={"edge": 48.0}),
        ]
    )
    with gpus() as dev:
        for cap in (PowerReadings, PowerDomainReadings, TemperatureReadings, PowerLimitControl, GpuSync, HasIdentity):
            assert isinstance(dev, cap), cap
        # amdsmi reports whole watts; the MI210 has no instant (current_socket_power) reading.
        assert dev.read_power_domains() == {"gpu0": {"instant": 300.0, "average": 300.0}, "gpu1": {"average": 200.0}}
        assert dev.read_power() == {"gpu0": 300.0, "gpu1": 200.0}
        # degrees Celsius as amdsmi returns them (not millidegrees): hotspot, else edge
        assert dev.read_temperatures() == {"gpu0": 62.0, "gpu1": 48.0}
        assert dev.identity() == {"gpu_models": ["AMD Instinct MI300X", "AMD Instinct MI210"]}
        assert dev.sync_indices == [0, 1] and dev.max_power_w == 1500.0


def test_a_gpu_without_temperature_sensors_is_absent_not_zero(fake_amd):
    fake_amd([FakeAmdGpu(temperatures_c={}), FakeAmdGpu(temperatures_c={"edge": 51.0, "vram": 70.0})])
    with gpus() as dev:
        assert dev.read_temperatures() == {"gpu1": 51.0}


def test_polling_a_gpu_that_reports_no_power_is_refused(fake_amd):
    fake_amd([FakeAmdGpu(reports_instant=False, reports_average=False)])
    with pytest.raises(DeviceError, match=r"reports no power to poll .*energy = \"auto\""):
        gpus(energy="polling")


def test_no_driver_and_no_package_are_clear_errors(tmp_path, monkeypatch):
    monkeypatch.setenv(fake_amdsmi.ENV, str(tmp_path / "missing.json"))
    with pytest.raises(DeviceError, match=r"simulated AMD driver .* cannot start .*python -m zeus_plugins_amdsmi.fake_amdsmi"):
        gpus()
    monkeypatch.delenv(fake_amdsmi.ENV)
    monkeypatch.setitem(__import__("sys").modules, "amdsmi", None)  # not installed
    with pytest.raises(DeviceError, match=r"amdsmi Python package is not installed.*/opt/rocm/share/amd_smi"):
        gpus()


def test_the_fake_follows_amdsmis_api(fake_amd):
    """Types, status codes and the one-flag initialisation of the real library."""
    smi = fake_amd(1)
    with pytest.raises(smi.AmdSmiLibraryException) as e:
        smi.amdsmi_get_processor_handles()
    assert e.value.get_error_code() == 32 and "NOT_INIT" in e.value.get_error_info()
    with pytest.raises(smi.AmdSmiParameterException):
        smi.amdsmi_init(2)  # an int, not AmdSmiInitFlags
    smi.amdsmi_init(smi.AmdSmiInitFlags.INIT_AMD_GPUS)
    smi.amdsmi_init(smi.AmdSmiInitFlags.INIT_AMD_GPUS)  # not counted
    h = smi.amdsmi_get_processor_handles()[0]
    got = smi.amdsmi_get_energy_count(h)
    assert set(got) == {"energy_accumulator", "counter_resolution", "timestamp"}
    assert got["counter_resolution"] == pytest.approx(15.3) and got["counter_resolution"] != 15.3  # a C float
    with pytest.raises(smi.AmdSmiParameterException):
        smi.amdsmi_set_power_cap(h, 0, 300.0e6)  # a float cap
    with pytest.raises(smi.AmdSmiLibraryException) as e:
        smi.amdsmi_set_power_cap(h, 0, 300_000_000)
    assert e.value.get_error_code() == 10  # AMDSMI_STATUS_NO_PERM: not privileged
    with pytest.raises(smi.AmdSmiLibraryException) as e:
        smi.amdsmi_get_temp_metric(h, smi.AmdSmiTemperatureType.EDGE, smi.AmdSmiTemperatureMetric.CURRENT)
    assert e.value.get_error_code() == 2  # an MI300X has no edge sensor
    assert smi.amdsmi_get_power_cap_info(h)["max_power_cap"] == 750_000_000  # microwatts
    smi.amdsmi_shut_down()  # once ends it for everyone in the process
    with pytest.raises(smi.AmdSmiLibraryException):
        smi.amdsmi_get_power_info(h)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="does not simulate amdsmi_get_gpu_fan_speed"):
            getattr(smi, "amdsmi_get_gpu_fan_speed")  # noqa: B009 - the attribute access is what is tested

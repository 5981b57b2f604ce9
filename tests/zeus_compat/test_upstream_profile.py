"""``zeus.profile`` (upstream's thermally stable measurement) on the simulated NVIDIA driver: the trial's
sequence (cooldown, warm-up, a window filled to the measurement duration), the sweeps and their reports."""

from __future__ import annotations

import dataclasses
import math
import time
import types

import pytest
from zeus import profile
from zeus.monitor import ZeusMonitor
from zeus.profile import SweepReport, SweepResult, TrialResult, measure, profile_parameters

ITER_S = 0.002


class Workload:
    """A target function that takes ``ITER_S`` and counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        time.sleep(ITER_S)


@pytest.fixture
def monitor(driver):
    driver(gpus=1, demand_w=200.0, temperature_c=52)
    m = ZeusMonitor(gpu_indices=[0], cpu_indices=[], sync_execution_with=lambda: None)
    yield m
    m.close()


@pytest.fixture
def sleeps(monkeypatch):
    """The cooldowns ``zeus.profile`` sleeps (recorded, and slept)."""
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        time.sleep(s)

    monkeypatch.setattr(profile, "time", types.SimpleNamespace(monotonic=time.monotonic, sleep=sleep))
    return slept


def test_public_names_and_result_fields():
    assert set(profile.__all__) == {
        "SweepReport",
        "SweepResult",
        "TrialResult",
        "measure",
        "profile_cooldown_duration",
        "profile_measurement_duration",
        "profile_parameters",
    }
    assert [f.name for f in dataclasses.fields(TrialResult)] == [
        "energy_per_iter",
        "time_per_iter",
        "total_energy",
        "total_time",
        "iterations",
        "temperature_before",
        "temperature_after",
    ]
    assert [f.name for f in dataclasses.fields(SweepResult)] == [
        "measurement_duration",
        "cooldown_duration",
        "trials",
        "energy_mean",
        "energy_std",
        "avg_temperature_before",
        "avg_temperature_after",
        "avg_total_time",
        "avg_total_energy",
        "is_valid",
    ]
    assert [f.name for f in dataclasses.fields(SweepReport)] == ["sweep_param", "fixed_param", "entries"]


def test_measure_runs_one_trial_filling_the_window(monitor, sleeps):
    work = Workload()
    result = measure(
        work, monitor, measurement_duration=0.1, cooldown_duration=0.05, num_warmup_iterations=3, num_calibration_iterations=10
    )
    assert isinstance(result, TrialResult)
    assert sleeps == [0.05]  # the cooldown, once
    assert result.iterations >= 1
    # calibration: 3 warm-up + 10 timed calls; the trial: 3 warm-up + the measured iterations
    assert work.calls == 3 + 10 + 3 + result.iterations
    assert result.total_time >= result.iterations * ITER_S
    assert result.time_per_iter == pytest.approx(result.total_time / result.iterations)
    assert result.total_energy == pytest.approx(200.0 * result.total_time, rel=0.1)  # the driver's 200 W, in joules
    assert result.energy_per_iter == pytest.approx(result.total_energy / result.iterations)
    assert result.temperature_before == 52.0 and result.temperature_after == 52.0
    assert monitor.measurement_states == {}  # the trial's window is closed


def test_measure_window_length_follows_the_calibration(monitor, sleeps, monkeypatch):
    monkeypatch.setattr(profile, "_calibrate_iteration_duration", lambda *a: 0.004)
    result = measure(Workload(), monitor, measurement_duration=0.1, cooldown_duration=0.0)
    assert result.iterations == math.ceil(0.1 / 0.004)
    assert sleeps == []  # no cooldown asked: no sleep


def test_measure_warmup_settle_duration(monitor, sleeps, monkeypatch):
    monkeypatch.setattr(profile, "_calibrate_iteration_duration", lambda *a: 0.002)
    work = Workload()
    result = measure(work, monitor, measurement_duration=0.01, cooldown_duration=0.0, warmup_settle_duration=0.02)
    assert work.calls == math.ceil(0.02 / 0.002) + result.iterations  # the settle time replaces the warm-up count
    with pytest.raises(ValueError, match="warmup_settle_duration must be non-negative"):
        measure(work, monitor, measurement_duration=0.01, cooldown_duration=0.0, warmup_settle_duration=-1.0)


def test_profile_parameters_sweeps_both_durations(monitor, sleeps):
    work = Workload()
    m_report, c_report = profile_parameters(
        work,
        monitor,
        measurement_duration_search_range=[0.02, 0.04],
        cooldown_duration_search_range=[0.0, 0.01],
        num_trials=2,
        num_warmup_trials=1,
        trial_stddev_threshold=1e9,
        num_warmup_iterations=1,
        num_calibration_iterations=5,
    )
    assert m_report.sweep_param == ("measurement_duration", [0.02, 0.04])
    assert m_report.fixed_param == ("cooldown_duration", 0.01)  # the longest cooldown of its range
    assert c_report.sweep_param == ("cooldown_duration", [0.0, 0.01])
    assert c_report.fixed_param == ("measurement_duration", 0.04)  # the longest measurement of its range
    assert [e.measurement_duration for e in m_report.entries] == [0.02, 0.04]
    assert [e.cooldown_duration for e in m_report.entries] == [0.01, 0.01]
    assert [e.cooldown_duration for e in c_report.entries] == [0.0, 0.01]
    for entry in m_report.entries + c_report.entries:
        assert len(entry.trials) == 2 and entry.is_valid
        energies = [t.energy_per_iter for t in entry.trials]
        assert entry.energy_mean == pytest.approx(sum(energies) / 2)
        assert entry.energy_std == pytest.approx(abs(energies[0] - energies[1]) / math.sqrt(2))
        assert entry.avg_temperature_before == 52.0
    # the warm-up trial (no cooldown) runs before the first sweep only; every measured trial cools down first
    assert sleeps == [0.01] * 4 + [0.01] * 2
    assert "[VALID]" in str(m_report.entries[0]) and str(m_report).startswith("Sweep measurement_duration (fixed cooldown_duration=0.0 s):")
    assert len(str(c_report).splitlines()) == 3


def test_a_sweep_is_invalid_above_the_threshold(monitor, sleeps):
    report = profile.profile_measurement_duration(
        Workload(),
        monitor,
        measurement_duration_search_range=[0.02],
        cooldown_duration=0.0,
        num_trials=2,
        num_warmup_trials=0,
        trial_stddev_threshold=0.0,
        iteration_duration=0.002,
    )
    [entry] = report.entries
    assert not entry.is_valid and "[INVALID]" in str(entry)
    one = profile.profile_cooldown_duration(
        Workload(),
        monitor,
        cooldown_duration_search_range=[0.0],
        measurement_duration=0.02,
        num_trials=1,
        num_warmup_trials=0,
        iteration_duration=0.002,
    )
    assert one.entries[0].energy_std == 0.0 and one.entries[0].is_valid  # one trial: no spread


def test_default_search_range_is_one_to_ten_seconds():
    assert profile.DEFAULT_SEARCH_RANGE == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]


def test_each_trial_cools_down_warms_up_then_measures_one_window_between_two_temperature_reads(monitor, monkeypatch):
    # upstream's trial, step by step (zeus_core.profiling's trial loop with upstream's settings)
    events: list[str] = []
    monkeypatch.setattr(profile, "time", types.SimpleNamespace(monotonic=time.monotonic, sleep=lambda s: events.append(f"sleep {s}")))
    for name in ("begin_window", "end_window"):
        real = getattr(monitor, name)
        monkeypatch.setattr(monitor, name, lambda *a, _real=real, _name=name, **k: (events.append(_name), _real(*a, **k))[1])
    real_temp = monitor.gpus.get_gpu_temperature
    monkeypatch.setattr(monitor.gpus, "get_gpu_temperature", lambda i: (events.append("temperature"), real_temp(i))[1])
    durations = {"cooldown_duration_search_range": [0.5, 0.25], "measurement_duration": 0.01, "iteration_duration": 0.004}
    report = profile.profile_cooldown_duration(
        lambda: events.append("call"), monitor, num_trials=2, num_warmup_trials=1, num_warmup_iterations=2, **durations
    )
    window = ["temperature", "begin_window"] + ["call"] * 3 + ["end_window", "temperature"]  # ceil(0.01 / 0.004) iterations
    warmup_trial = window  # no cooldown, no warm-up iterations
    trial = [["sleep 0.5"], ["sleep 0.25"]]
    expected = warmup_trial + 2 * (trial[0] + ["call"] * 2 + window) + 2 * (trial[1] + ["call"] * 2 + window)
    assert events == expected
    assert [[t.iterations for t in e.trials] for e in report.entries] == [[3, 3], [3, 3]]

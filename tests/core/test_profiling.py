"""zeus_core.profiling: settling, the cooldown band, the t interval, a balanced trial order, and the
profiler's steps against a simulated thermal device on an injected clock."""

from __future__ import annotations

import math
import statistics
from collections import Counter

import pytest
from scipy import stats

from zeus_core.profiling import (
    Cooldown,
    Reading,
    Sample,
    Settler,
    Settling,
    ThermalProfiler,
    calibrate,
    confidence_interval,
    cool_down,
    runs_to_fill,
    trial_order,
    warm_up,
)


class Clock:
    """A virtual clock: ``sleep`` advances it, nothing else does."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


class ThermalGpu:
    """A first-order thermal model on a virtual clock: the die relaxes towards ambient + r x draw with
    time constant tau; draw = load + leakage x (T - ambient). Readings are whole degrees, as NVML's."""

    def __init__(self, clock: Clock, tau: float = 10.0, ambient: float = 40.0, r: float = 0.15, leak: float = 0.5) -> None:
        self.clock, self.tau, self.ambient, self.r, self.leak = clock, tau, ambient, r, leak
        self.temp, self.load, self.t = ambient, 0.0, clock()

    def _advance(self) -> None:
        dt = self.clock() - self.t
        target = self.ambient + self.r * self.load
        self.temp = target + (self.temp - target) * math.exp(-dt / self.tau)
        self.t = self.clock()

    def draw(self) -> float:
        self._advance()
        return self.load + self.leak * (self.temp - self.ambient)

    def probe(self) -> Reading:
        return Reading(self.draw(), float(int(self.temp)))

    def run(self, load: float, seconds: float) -> Sample:
        """Work at ``load`` for ``seconds`` (integrated in small steps)."""
        self._advance()
        self.load = load
        energy, step = 0.0, seconds / 50
        for _ in range(50):
            energy += self.draw() * step
            self.clock.sleep(step)
        self.load = 0.0
        self._advance()
        return Sample(seconds, energy)


def test_constant_readings_settle_at_the_first_comparison():
    s = Settler(Settling(readings=5))
    assert s.add(Reading(250.0, 45.0)) is False  # one reading compares nothing
    assert s.add(Reading(250.0, 45.0)) is True


def test_changing_temperature_or_power_is_not_settled_until_it_stops():
    s = Settler(Settling(readings=3, temperature_c=1.0, power_rel=0.05))
    for t in (40, 41, 42, 43):  # heating by a degree a reading
        assert not s.add(Reading(250.0, t))
    s.add(Reading(250.0, 43.0))
    assert s.add(Reading(250.0, 43.0))  # the last three within less than a degree
    p = Settler(Settling(readings=3, power_rel=0.05))
    p.add(Reading(200.0, None))
    assert not p.add(Reading(230.0, None))  # power still rising, no temperature read
    assert not p.add(Reading(231.0, None))  # 230 and 231 within 5 %, but 200 is still among the last three
    assert p.add(Reading(232.0, None))


def test_warm_up_on_a_heating_gpu_runs_until_its_steady_state():
    clock = Clock()
    gpu = ThermalGpu(clock, tau=10.0)
    settled, runs = warm_up(lambda: gpu.run(250.0, 1.0), gpu.probe, Settling(readings=5, timeout_s=1000), clock, clock.sleep)
    steady = gpu.ambient + gpu.r * 250.0
    assert settled and runs > 10
    gpu.load = 250.0
    assert abs(gpu.probe().temperature_c - steady) < 3  # within a few degrees of 77.5 (not still at 40)
    clock2 = Clock()
    cold = ThermalGpu(clock2, tau=10.0, leak=0.0, r=0.0)  # a device whose readings never change
    assert warm_up(lambda: cold.run(250.0, 1.0), cold.probe, Settling(), clock2, clock2.sleep) == (True, 1)


def test_warm_up_that_never_settles_ends_at_its_timeout():
    clock = Clock()
    readings = iter(range(10_000))
    settled, runs = warm_up(
        lambda: clock.sleep(1.0), lambda: Reading(None, float(next(readings))), Settling(timeout_s=5), clock, clock.sleep
    )
    assert not settled and runs == 5


def test_cooldown_waits_for_the_band_and_gives_up_at_its_timeout():
    clock = Clock()
    gpu = ThermalGpu(clock, tau=10.0)
    gpu.temp = 80.0
    reached, waited = cool_down(gpu.probe, 40.0, Cooldown(band_c=2.0, timeout_s=600, interval_s=0.5), clock, clock.sleep)
    assert reached and gpu.probe().temperature_c <= 42.0
    assert 10 * math.log(40 / 3) - 1 < waited < 10 * math.log(40 / 2) + 1  # 80 -> <= 42 with tau 10 s: about 26-30 s
    clock2 = Clock()
    hot = ThermalGpu(clock2, tau=1e9)
    hot.temp = 80.0
    reached, waited = cool_down(hot.probe, 40.0, Cooldown(band_c=2.0, timeout_s=7, interval_s=0.5), clock2, clock2.sleep)
    assert not reached and waited == pytest.approx(7)
    assert cool_down(hot.probe, None, Cooldown(), clock2, clock2.sleep) == (True, 0.0)  # no baseline: nothing to wait for


def test_the_t_interval_is_scipys_and_covers_the_mean_as_often_as_it_says():
    xs = [10.0, 12.0, 11.0, 13.0]
    got = confidence_interval(xs, 0.95)
    low, high = stats.t.interval(0.95, len(xs) - 1, loc=statistics.fmean(xs), scale=stats.sem(xs))
    assert got.mean == 11.5 and got.low == pytest.approx(low) and got.high == pytest.approx(high) and got.n == 4
    assert confidence_interval([5.0]).low == -math.inf  # one trial: no interval
    import random

    rng = random.Random(1)
    covered = sum(1 for _ in range(2000) if (ci := confidence_interval([rng.gauss(3.0, 2.0) for _ in range(5)], 0.9)).low <= 3.0 <= ci.high)
    assert 0.87 < covered / 2000 < 0.93  # coverage 90 % (binomial sd 0.7 %): a z interval would cover about 80 %
    with pytest.raises(ValueError, match="confidence"):
        confidence_interval(xs, 1.5)
    with pytest.raises(ValueError, match="no values"):
        confidence_interval([])


def test_trial_order_is_balanced_and_seeded():
    configs = [100, 200, 300, 400, 500]
    order = trial_order(configs, 4, seed=7)
    assert Counter(c for c, _ in order) == {c: 4 for c in configs}
    positions: dict[int, list[int]] = {c: [] for c in configs}
    for i, (c, r) in enumerate(order):
        positions[c].append(i - r * len(configs))
    assert all(statistics.fmean(p) == 2.0 for p in positions.values())  # every configuration's mean position is the middle
    assert trial_order(configs, 4, seed=7) == order and trial_order(configs, 4, seed=8) != order
    firsts = Counter(trial_order(configs, 1, seed=s)[0][0] for s in range(200))
    assert set(firsts) == set(configs)  # which one goes first changes with the seed
    assert [c for c, _ in trial_order(configs, 1, seed=None)] == configs
    with pytest.raises(ValueError, match="trials"):
        trial_order(configs, 0)
    with pytest.raises(ValueError, match="distinct"):
        trial_order([1, 1], 1)


def _profile(stable: bool, seed: int) -> dict[float, float]:
    """Energy per second (W) of three loads on one heating GPU, measured back to back from cold."""
    clock = Clock()
    gpu = ThermalGpu(clock, tau=20.0)
    profiler = ThermalProfiler(
        trials=2 if stable else 1,
        settling=Settling(readings=5, timeout_s=600) if stable else None,
        cooldown=Cooldown(band_c=1.0, timeout_s=600) if stable else None,
        seed=seed if stable else None,
    )
    load: dict[str, float] = {}
    results = profiler.run(
        [300.0, 200.0, 100.0],
        prepare=lambda c: load.__setitem__("w", c),
        measure=lambda c: gpu.run(c, 2.0),
        probe=gpu.probe,
        clock=clock,
        sleep=clock.sleep,
    )
    return {r.config: r.power_w for r in results}


def test_measured_back_to_back_the_later_configurations_look_costlier_and_stable_profiling_removes_it():
    # True steady draw at load L: L + leak x r x L / (1 - leak x r) ... the model's fixed point is L / (1 - 0.075).
    truth = {c: c + 0.5 * 0.15 * c / (1 - 0.075) for c in (300.0, 200.0, 100.0)}
    naive = _profile(False, 0)
    assert naive[300.0] < 0.95 * truth[300.0]  # measured first, from cold: 7 % low
    for seed in (0, 1):
        stable = _profile(True, seed)
        # warmed up to its steady state (and cooled back between trials): within 1.5 % of each truth
        assert all(abs(stable[c] - truth[c]) < 0.015 * truth[c] for c in truth), stable


def test_a_window_repeats_its_work_until_it_lasts_min_window_s():
    clock = Clock()
    calls = []

    def measure(c: int) -> Sample:
        calls.append(c)
        clock.sleep(0.3)
        return Sample(0.3, 30.0)

    res = ThermalProfiler(trials=2, min_window_s=1.0, settling=None, cooldown=None).run(
        [1], lambda c: None, measure, clock=clock, sleep=clock.sleep
    )
    assert len(calls) == 8 and [s.runs for s in res[0].trials] == [4, 4]  # 4 x 0.3 s >= 1 s, per trial
    assert res[0].energy_j.mean == 30.0 and res[0].time_s.mean == pytest.approx(0.3)


def test_a_run_that_takes_no_time_ends_its_window_instead_of_repeating_forever():
    # a device on a virtual clock the work does not advance (the trace replay): one run per window
    res = ThermalProfiler(trials=1, min_window_s=5.0, settling=None, cooldown=None).run([1], lambda c: None, lambda c: Sample(0.0, 0.0))
    assert res[0].trials[0].runs == 1


def test_a_fixed_cooldown_sleeps_its_duration_once_and_reads_nothing():
    slept: list[float] = []

    def probe() -> Reading:
        raise AssertionError("a fixed cooldown reads no temperature")

    def clock() -> float:
        raise AssertionError("a fixed cooldown reads no clock")

    assert cool_down(probe, 40.0, Cooldown(duration_s=0.25), clock, slept.append) == (True, 0.25)
    assert cool_down(probe, None, Cooldown(duration_s=0.0), clock, slept.append) == (True, 0.0)
    assert slept == [0.25]  # 0 s: no sleep at all
    with pytest.raises(ValueError, match="duration_s"):
        Cooldown(duration_s=-1.0)


def test_a_fixed_warm_up_count_is_the_least_a_settling_warm_up_runs_or_the_whole_of_it():
    runs: list[int] = []
    reads: list[int] = []

    def probe() -> Reading:
        reads.append(len(runs))
        return Reading(100.0, 50.0)

    assert warm_up(lambda: runs.append(1), probe, None, min_runs=4) == (True, 4)
    assert len(runs) == 4 and reads == []  # no settling: nothing read
    runs.clear()
    # readings before the first run and after each: constant ones have settled by the end of the fixed runs
    assert warm_up(lambda: runs.append(1), probe, Settling(), min_runs=3) == (True, 3)
    assert reads == [0, 1, 2, 3]
    heating = iter(range(100))
    settled, n = warm_up(lambda: None, lambda: Reading(None, float(min(next(heating), 6))), Settling(readings=2), min_runs=2)
    assert settled and n == 7  # past the fixed runs until two readings agree (6 and 6: after the 7th run)
    with pytest.raises(ValueError, match="needs the work"):
        warm_up(None, probe, None, min_runs=1)


def test_a_window_sized_beforehand_is_measured_as_one():
    clock = Clock()
    events: list[object] = []

    def window(c: str, n: int) -> Sample:
        events.append(("window", c, n))
        clock.sleep(0.02 * n)
        return Sample(0.02 * n, 3.0 * n)

    profiler = ThermalProfiler(
        trials=2, min_window_s=0.1, settling=None, cooldown=Cooldown(duration_s=1.0), seed=None, confidence=None, warmup_runs=2, run_s=0.03
    )
    a, b = profiler.run(
        ["a", "b"],
        prepare=lambda c: events.append(("prepare", c)),
        measure=lambda c: pytest.fail("the window is measure_runs'"),
        work=lambda c: events.append(("work", c)),
        clock=clock,
        sleep=lambda s: events.append(("sleep", s)),
        measure_runs=window,
    )
    one = [("sleep", 1.0), ("prepare", "a"), ("work", "a"), ("work", "a"), ("window", "a", 4)]  # ceil(0.1 / 0.03) runs
    assert events[:5] == one and len(events) == 20
    assert [e[1] for e in events if e[0] == "window"] == ["a", "b", "b", "a"]  # seed None: given order, then reversed
    got = a.trials + b.trials
    assert all(t.runs == 4 and t.time_s == pytest.approx(0.02) and t.energy_j == 3.0 and t.warmup_runs == 2 for t in got)
    assert a.energy_j.mean == 3.0 and math.isnan(a.energy_j.low) and a.energy_j.n == 2  # confidence None: the mean, no interval
    with pytest.raises(ValueError, match="window_need"):
        profiler.run(["a"], lambda c: None, lambda c: Sample(1.0, 1.0), window_need=lambda s: 1.0)


def test_runs_to_fill_and_calibrate_are_upstreams_arithmetic():
    assert runs_to_fill(0.1, 0.004) == math.ceil(0.1 / 0.004) == 25
    assert runs_to_fill(0.0, 0.5) == runs_to_fill(-1.0, 0.5) == runs_to_fill(1.0, -0.5) == 1  # at least one
    assert runs_to_fill(1.0, 0.0) == 1  # a run that takes no time fills nothing: one
    clock = Clock()
    calls: list[str] = []
    seconds = calibrate(lambda: (calls.append("run"), clock.sleep(0.5)), 4, warmup_runs=2, clock=clock, sync=lambda: calls.append("sync"))
    assert seconds == 0.5 and calls == ["run"] * 2 + ["sync"] + ["run"] * 4 + ["sync"]
    with pytest.raises(ValueError, match="at least one run"):
        calibrate(lambda: None, 0)

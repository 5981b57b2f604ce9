"""Thermally stable profiling: one implementation for every profiler (issue 37, item 3).

A GPU's power depends on its temperature (leakage grows as the die heats), and the die
heats and cools with a time constant of tens of seconds. A profiler that measures
configurations back to back therefore measures the later ones hotter than the earlier
ones, and a hotter predecessor can steer its choice. ML.ENERGY's *thermally stable
profiling* (upstream Zeus's ``zeus.profile``) answers with a window long enough for
stable counter readings and a cooldown between trials. This module is that method,
once, for the JIT power profiler (``[power] thermally_stable``), the Perseus stage
profiler, ``zeus profile``, ``zeus.profile`` in zeus-compat, and any profiler plugin:

* **Warm-up until settled** (:class:`Settling`, :class:`Settler`): readings of power
  and temperature are taken while a configuration warms up; it has settled when the
  last ``readings`` of them (taken since the configuration began) differ by less than
  ``temperature_c`` degrees and less than ``power_rel`` of their mean power. Fewer
  readings cannot tell a slow drift from none, so before there are ``readings`` of them
  only readings that have not moved at all count as settled. Where temperature and
  power are constant (a simulated driver without its temperature quirk) that holds at
  the second reading, so a profiler adds nothing: no extra iteration, no extra window. A warm-up that has not settled by
  ``timeout_s`` ends anyway, and says so (:attr:`TrialSample.settled`).
* **Windows long enough for the bound asked**: a trial repeats its work until its
  window lasts ``min_window_s`` (the counter's update period makes shorter windows
  coarse), and reports the totals divided by the repetitions.
* **Cooldown to a band** (:class:`Cooldown`): before each trial, wait (``interval_s``
  between readings) until the temperature is at most ``band_c`` above the one read
  before the first trial, or ``timeout_s`` passed (recorded, never fatal).
* **Repeated trials with a confidence interval** (:func:`confidence_interval`:
  Student's t interval of the mean, ``scipy.stats.t``).
* **An order that favours no configuration** (:func:`trial_order`): trials run in
  rounds; each round holds every configuration once, in a random order (seeded),
  and every other round reverses the previous round's order before shuffling is
  applied again, so over the rounds each configuration is as often early as late
  and no configuration always follows another (balanced, randomized blocks).

Everything here is plain logic over injected callables (``clock``, ``sleep``, a
``probe`` that reads power and temperature, the work of a trial), so it is tested
without a device and reused on any.
"""

from __future__ import annotations

import functools
import math
import random
import statistics
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, NamedTuple, TypeVar

import attrs

from zeus_core.device import EnergyPrecision, PowerReadings, TemperatureReadings

C = TypeVar("C", bound=Hashable)


class Reading(NamedTuple):
    """What a probe reads: the devices' power (W, summed) and temperature (°C, the hottest); None: not read."""

    power_w: float | None
    temperature_c: float | None


#: A probe that reads nothing (a device without power or temperature readings): settles at once.
def no_probe() -> Reading:
    return Reading(None, None)


def device_probe(devices: object) -> Callable[[], Reading]:
    """A probe over a device group: its power (summed, :class:`~zeus_core.device.PowerReadings`) and its
    hottest temperature (:class:`~zeus_core.device.TemperatureReadings`), each None where the group has no
    such reading (a group with neither settles at once)."""
    power = devices.read_power if isinstance(devices, PowerReadings) else None
    temps = devices.read_temperatures if isinstance(devices, TemperatureReadings) else None

    def probe() -> Reading:
        p = power() if power is not None else {}
        t = temps() if temps is not None else {}
        return Reading(sum(p.values()) if p else None, max(t.values()) if t else None)

    return probe


def bound_window(devices: object, target_error: float) -> Callable[[Sample], float]:
    """The shortest window whose energy is known to ``target_error`` (a fraction) on ``devices``, at the
    draw a first run measured: the longest of the devices' own (:meth:`~zeus_core.device.Precision.min_window_s`,
    each device taken to draw an equal share); 0 for a group that says nothing of its precision, inf where
    no window length meets it."""
    if not target_error > 0:
        raise ValueError(f"target_error must be a positive fraction (0.01 for 1 %), got {target_error!r}")
    precision = list(devices.energy_precision.values()) if isinstance(devices, EnergyPrecision) else []

    def need(first: Sample) -> float:
        if not precision or not first.time_s > 0:
            return 0.0
        share = first.energy_j / first.time_s / len(precision)
        return max(p.min_window_s(target_error, share) for p in precision)

    return need


def _positive(_: object, attribute: attrs.Attribute, value: float) -> None:
    if not value > 0 or math.isinf(value):
        raise ValueError(f"{attribute.name} must be a positive number, got {value!r}")


def _non_negative(_: object, attribute: attrs.Attribute, value: float) -> None:
    if not value >= 0 or math.isnan(value):
        raise ValueError(f"{attribute.name} must be zero or more, got {value!r}")


@attrs.frozen
class Settling:
    """When a configuration has warmed up: the last ``readings`` readings (since the configuration
    began) differ by less than ``temperature_c`` °C and by less than ``power_rel`` of their mean
    power; before there are that many, readings that have not moved at all. ``timeout_s``: the
    longest warm-up (it then ends unsettled). ``interval_s``:
    the time between readings where the caller waits rather than works (``zeus profile``)."""

    readings: int = attrs.field(default=5, validator=attrs.validators.ge(2))
    temperature_c: float = attrs.field(default=1.0, validator=_positive)
    power_rel: float = attrs.field(default=0.05, validator=_positive)
    timeout_s: float = attrs.field(default=120.0, validator=_positive)
    interval_s: float = attrs.field(default=0.5, validator=_positive)


class Settler:
    """The readings of one configuration's warm-up, and whether they have settled (:class:`Settling`)."""

    def __init__(self, settling: Settling | None = None) -> None:
        self.settling = settling or Settling()
        self._power: deque[float] = deque(maxlen=self.settling.readings)
        self._temperature: deque[float] = deque(maxlen=self.settling.readings)
        self.count = 0

    @staticmethod
    def _still(values: deque[float]) -> bool:
        return not values or max(values) == min(values)

    def add(self, reading: Reading) -> bool:
        """One more reading; returns :attr:`settled`."""
        self.count += 1
        if reading.power_w is not None:
            self._power.append(float(reading.power_w))
        if reading.temperature_c is not None:
            self._temperature.append(float(reading.temperature_c))
        return self.settled

    @property
    def settled(self) -> bool:
        """Readings that have not changed at all since the first: settled at the second. Otherwise the last
        ``readings`` of them within both tolerances (what is not read does not hold it back)."""
        if self.count < 2:
            return False
        s = self.settling
        t, p = self._temperature, self._power
        if self.count < s.readings:  # too few to see a slow drift: only readings that stand still will do
            return self._still(t) and self._still(p)
        if len(t) >= 2 and not max(t) - min(t) < s.temperature_c:
            return False
        if len(p) >= 2:
            mean = statistics.fmean(p)
            if not max(p) - min(p) < s.power_rel * max(abs(mean), 1e-9):
                return False
        return True


@attrs.frozen
class Cooldown:
    """Before each trial, wait until the temperature is at most ``band_c`` above the one read before
    the first trial (checked every ``interval_s``), for at most ``timeout_s``."""

    band_c: float = attrs.field(default=2.0, validator=_non_negative)
    timeout_s: float = attrs.field(default=60.0, validator=_non_negative)
    interval_s: float = attrs.field(default=0.5, validator=_positive)


def cool_down(
    probe: Callable[[], Reading],
    baseline_c: float | None,
    cooldown: Cooldown,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> tuple[bool, float]:
    """Wait until the temperature is back in the band over ``baseline_c``: (reached, seconds waited).

    Without a baseline or a temperature reading there is nothing to wait for (reached at once)."""
    start = clock()
    while True:
        t = probe().temperature_c
        if baseline_c is None or t is None or t <= baseline_c + cooldown.band_c:
            return True, clock() - start
        waited = clock() - start
        if waited >= cooldown.timeout_s:
            return False, waited
        sleep(min(cooldown.interval_s, cooldown.timeout_s - waited))


def warm_up(
    work: Callable[[], object] | None,
    probe: Callable[[], Reading],
    settling: Settling,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> tuple[bool, int]:
    """Run ``work`` (or wait ``interval_s``, without work) until the readings settle: (settled, runs of ``work``).

    A reading is taken before the first run and after each, so a device whose readings do not change
    settles after one run (the least a warm-up does)."""
    settler = Settler(settling)
    start, runs = clock(), 0
    settler.add(probe())
    while True:
        if work is not None:
            work()
            runs += 1
        else:
            sleep(settling.interval_s)
        if settler.add(probe()):
            return True, runs
        if clock() - start >= settling.timeout_s:
            return False, runs


def trial_order(configs: Sequence[C], trials: int, seed: int | None = 0) -> list[tuple[C, int]]:
    """``trials`` rounds of every configuration, as ``(configuration, trial index)`` in the order to run.

    Round 0 is a random permutation (``random.Random(seed)``); each odd round is the round before it
    reversed, and each even round a fresh permutation. So in every pair of rounds each configuration
    is once at position k and once at position n-1-k (its mean position is the middle: none is
    always measured first, cold, or always after the hottest), and which one follows which changes
    with the seed. ``seed=None``: the configurations' own order in round 0 (upstream's sweep)."""
    if trials < 1:
        raise ValueError(f"trials must be 1 or more, got {trials!r}")
    if len(set(configs)) != len(configs):
        raise ValueError("configurations must be distinct")
    rng = random.Random(seed)
    out: list[tuple[C, int]] = []
    order = list(configs)
    for r in range(trials):
        if r % 2 == 1:
            order = order[::-1]
        elif r > 0 or seed is not None:
            order = list(configs)
            rng.shuffle(order)
        out += [(c, r) for c in order]
    return out


class Interval(NamedTuple):
    """A mean with its two-sided confidence interval (``low``, ``high``); ``n`` values."""

    mean: float
    low: float
    high: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def confidence_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """Student's t interval of the mean of ``values`` (``scipy.stats.t``); one value: an unbounded interval.

    The values are the trials' results, independent by design (cooldown, balanced order), so the
    t interval with n - 1 degrees of freedom is the textbook interval for their mean."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("no values to take an interval of")
    mean = statistics.fmean(xs)
    if len(xs) == 1:
        return Interval(mean, -math.inf, math.inf, 1)
    try:
        from scipy import stats  # only where intervals are taken: importing scipy takes a while
    except ImportError:
        raise ModuleNotFoundError(
            "confidence intervals need scipy: pip install 'zeus-core[profile]' (or scipy), or run one trial"
        ) from None

    sem = statistics.stdev(xs) / math.sqrt(len(xs))
    half = float(stats.t.ppf((1 + confidence) / 2, len(xs) - 1)) * sem
    return Interval(mean, mean - half, mean + half, len(xs))


class Sample(NamedTuple):
    """What one run of a trial's work measured: its time (s) and energy (J)."""

    time_s: float
    energy_j: float


@attrs.frozen
class TrialSample:
    """One trial of one configuration: per run of its work (``runs`` repetitions in its window)."""

    config: Hashable
    trial: int
    time_s: float
    energy_j: float
    runs: int
    settled: bool
    cooled: bool
    warmup_runs: int
    temperature_c: float | None

    @property
    def power_w(self) -> float:
        return self.energy_j / self.time_s if self.time_s > 0 else 0.0


@attrs.frozen
class ConfigResult(Generic[C]):
    """A configuration's trials, with the intervals of its time and energy per run of its work."""

    config: C
    trials: tuple[TrialSample, ...]
    time_s: Interval
    energy_j: Interval

    @property
    def power_w(self) -> float:
        return self.energy_j.mean / self.time_s.mean if self.time_s.mean > 0 else 0.0


@attrs.frozen
class ThermalProfiler:
    """Profile configurations thermally stably (module docstring). ``trials``: per configuration;
    ``min_window_s``: the shortest measurement window (a trial repeats its work to fill it);
    ``settling`` / ``cooldown``: None turns that step off; ``seed``: the trial order's
    (:func:`trial_order`); ``confidence``: the intervals'."""

    trials: int = attrs.field(default=3, validator=attrs.validators.ge(1))
    min_window_s: float = attrs.field(default=0.0, validator=_non_negative)
    settling: Settling | None = attrs.field(factory=Settling)
    cooldown: Cooldown | None = attrs.field(factory=Cooldown)
    seed: int | None = 0
    confidence: float = attrs.field(default=0.95, validator=attrs.validators.and_(attrs.validators.gt(0), attrs.validators.lt(1)))
    max_runs: int = attrs.field(default=1_000_000, validator=attrs.validators.ge(1))

    def run(
        self,
        configs: Sequence[C],
        prepare: Callable[[C], object],
        measure: Callable[[C], Sample],
        work: Callable[[C], object] | None = None,
        probe: Callable[[], Reading] = no_probe,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
        on_trial: Callable[[TrialSample], object] | None = None,
        window_need: Callable[[Sample], float] | None = None,
    ) -> list[ConfigResult[C]]:
        """Every trial of ``configs``: ``prepare(c)`` applies a configuration (sets a limit), ``work(c)``
        runs its work unmeasured (the warm-up; None: ``measure`` is run and its result dropped),
        ``measure(c)`` runs it once in a measured window. ``window_need``: the window a bound asks
        for, from the first run's time and energy (:func:`bound_window`); a window is the longer of
        it and ``min_window_s`` (capped by ``max_runs``). Results in the order of ``configs``."""
        configs = list(configs)
        baseline = probe().temperature_c if self.cooldown is not None else None
        samples: dict[C, list[TrialSample]] = {c: [] for c in configs}
        for config, k in trial_order(configs, self.trials, self.seed):
            cooled = True
            if self.cooldown is not None:
                cooled, _ = cool_down(probe, baseline, self.cooldown, clock, sleep)
            prepare(config)
            settled, warm = True, 0
            if self.settling is not None:
                settled, warm = warm_up(functools.partial(work or measure, config), probe, self.settling, clock, sleep)
            sample = self._window(config, measure, window_need)
            got = TrialSample(config, k, sample[0].time_s, sample[0].energy_j, sample[1], settled, cooled, warm, probe().temperature_c)
            samples[config].append(got)
            if on_trial is not None:
                on_trial(got)
        return [
            ConfigResult(
                c,
                tuple(samples[c]),
                confidence_interval([s.time_s for s in samples[c]], self.confidence),
                confidence_interval([s.energy_j for s in samples[c]], self.confidence),
            )
            for c in configs
        ]

    def _window(self, config: C, measure: Callable[[C], Sample], need: Callable[[Sample], float] | None) -> tuple[Sample, int]:
        """Runs of ``measure`` until their times add up to the window asked: the mean per run, and how many."""
        t = e = 0.0
        runs = 0
        length = self.min_window_s
        while True:
            got = measure(config)
            t, e, runs = t + got.time_s, e + got.energy_j, runs + 1
            if runs == 1 and need is not None:
                length = max(length, need(got))
            if t >= length or runs >= self.max_runs or not got.time_s > 0:  # a run that takes no time cannot fill a window
                return Sample(t / runs, e / runs), runs


__all__ = [
    "ConfigResult",
    "Cooldown",
    "Interval",
    "Reading",
    "Sample",
    "Settler",
    "Settling",
    "ThermalProfiler",
    "TrialSample",
    "bound_window",
    "confidence_interval",
    "cool_down",
    "device_probe",
    "no_probe",
    "trial_order",
    "warm_up",
]

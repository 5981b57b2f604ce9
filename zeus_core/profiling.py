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
  coarse), and reports the totals divided by the repetitions. With a run's time
  known beforehand (:func:`calibrate`, ``ThermalProfiler.run_s``) the window is sized
  before it opens (:func:`runs_to_fill`) and measured as one (upstream's window).
  A fixed number of unmeasured runs (``ThermalProfiler.warmup_runs``, upstream's
  ``num_warmup_iterations``) is the least a warm-up runs (their readings count toward
  settling), or, without settling, the whole warm-up.
* **Cooldown to a band** (:class:`Cooldown`): before each trial, wait (``interval_s``
  between readings) until the temperature is at most ``band_c`` above the one read
  before the first trial, or ``timeout_s`` passed (recorded, never fatal). Or, as
  upstream's ``zeus.profile`` does, a fixed idle time (``Cooldown(duration_s=...)``).
* **Repeated trials with a confidence interval** (:func:`confidence_interval`:
  Student's t interval of the mean, ``scipy.stats.t``).
* **An order that favours no configuration** (:func:`trial_order`): trials run in
  rounds; each round holds every configuration once, in a random order (seeded),
  and every other round reverses the previous round's order before shuffling is
  applied again, so over the rounds each configuration is as often early as late
  and no configuration always follows another (balanced, randomized blocks).

Everything here is plain logic over injected callables (``clock``, ``sleep``, a
``probe`` that reads power and temperature, the work of a trial), so it is tested
without a device and reused on any. Upstream's semantics (zeus-compat's ``zeus.profile``:
a fixed cooldown, a fixed warm-up count, a calibrated window, each value's trials back to
back) are this profiler with those settings (:meth:`ThermalProfiler.run`).
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


def _fraction(_: object, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and not 0 < value < 1:
        raise ValueError(f"{attribute.name} must be between 0 and 1 (0.95 for 95 %), got {value!r}")


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
    the first trial (checked every ``interval_s``), for at most ``timeout_s``. ``duration_s``: idle that
    long instead, reading nothing (upstream ``zeus.profile``'s ``cooldown_duration``: on a device
    without a temperature reading, or to reproduce upstream's trials); 0 waits not at all."""

    band_c: float = attrs.field(default=2.0, validator=_non_negative)
    timeout_s: float = attrs.field(default=60.0, validator=_non_negative)
    interval_s: float = attrs.field(default=0.5, validator=_positive)
    duration_s: float | None = attrs.field(default=None, validator=attrs.validators.optional(_non_negative))


def cool_down(
    probe: Callable[[], Reading],
    baseline_c: float | None,
    cooldown: Cooldown,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> tuple[bool, float]:
    """Wait until the temperature is back in the band over ``baseline_c``: (reached, seconds waited).

    Without a baseline or a temperature reading there is nothing to wait for (reached at once). A fixed
    cooldown (``duration_s``) sleeps that long once (not at all for 0), reading neither probe nor clock."""
    if cooldown.duration_s is not None:
        if cooldown.duration_s > 0:
            sleep(cooldown.duration_s)
        return True, cooldown.duration_s
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
    settling: Settling | None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    min_runs: int = 0,
) -> tuple[bool, int]:
    """Run ``work`` (or wait ``interval_s``, without work) until the readings settle: (settled, runs of ``work``).

    At least ``min_runs`` runs (a fixed warm-up: upstream's ``num_warmup_iterations``, as the JIT's
    ``warmup_iters``). With ``settling`` a reading is taken before the first run and after each
    (the fixed ones too), and the warm-up goes on past ``min_runs`` until they have settled, so a
    device whose readings do not change settles at the first run the warm-up has anyway (one
    run at least). ``settling`` None: the ``min_runs`` runs alone, nothing read."""
    if min_runs < 0:
        raise ValueError(f"min_runs must be zero or more, got {min_runs!r}")
    if min_runs and work is None:
        raise ValueError("a fixed number of warm-up runs needs the work to run")
    if settling is None:
        if work is not None:  # always, where min_runs > 0 (checked above)
            for _ in range(min_runs):
                work()
        return True, min_runs
    settler = Settler(settling)
    start, runs = clock(), 0
    settler.add(probe())
    while True:
        if work is not None:
            work()
            runs += 1
        else:
            sleep(settling.interval_s)
        settled = settler.add(probe())
        if runs >= min_runs and settled:
            return True, runs
        if runs >= min_runs and clock() - start >= settling.timeout_s:
            return False, runs


def runs_to_fill(duration_s: float, run_s: float) -> int:
    """How many runs of ``run_s`` seconds fill ``duration_s``: at least one (upstream ``zeus.profile``'s
    ``max(1, ceil(duration / iteration))``). A run that takes no time cannot fill anything: one."""
    if run_s == 0:
        return 1
    return max(1, math.ceil(duration_s / run_s))


def calibrate(
    work: Callable[[], object],
    runs: int,
    warmup_runs: int = 0,
    clock: Callable[[], float] = time.monotonic,
    sync: Callable[[], object] | None = None,
) -> float:
    """Seconds one run of ``work`` takes: ``warmup_runs`` runs untimed, then ``runs`` timed on ``clock``
    (``sync`` before and after the timed runs: asynchronous work is waited for, upstream's
    ``sync_execution``). For sizing a window before it opens (``ThermalProfiler.run_s``)."""
    if runs < 1:
        raise ValueError(f"calibration needs at least one run, got {runs!r}")
    for _ in range(warmup_runs):
        work()
    if sync is not None:
        sync()
    start = clock()
    for _ in range(runs):
        work()
    if sync is not None:
        sync()
    return (clock() - start) / runs


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
        from zeus_core import catalog

        raise ModuleNotFoundError(
            f"confidence intervals need scipy: {catalog.install_command('zeus-core[profile]')} (or scipy), or run one trial"
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
    (:func:`trial_order`); ``confidence``: the intervals' (None: none taken, ``low`` and ``high`` are
    nan; for callers that judge their trials otherwise, as upstream's sweeps do). ``warmup_runs``: the fewest runs of the work
    a warm-up makes (the whole warm-up where ``settling`` is None). ``run_s``: a run's time
    known beforehand (:func:`calibrate`): each window is then :func:`runs_to_fill` of ``min_window_s``
    runs, sized before it opens and measured as one window (``measure_runs``), not capped by
    ``max_runs`` (which caps the window that repeats until it is long enough)."""

    trials: int = attrs.field(default=3, validator=attrs.validators.ge(1))
    min_window_s: float = attrs.field(default=0.0, validator=_non_negative)
    settling: Settling | None = attrs.field(factory=Settling)
    cooldown: Cooldown | None = attrs.field(factory=Cooldown)
    seed: int | None = 0
    confidence: float | None = attrs.field(default=0.95, validator=_fraction)
    max_runs: int = attrs.field(default=1_000_000, validator=attrs.validators.ge(1))
    warmup_runs: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    run_s: float | None = None

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
        measure_runs: Callable[[C, int], Sample] | None = None,
    ) -> list[ConfigResult[C]]:
        """Every trial of ``configs``, in the order of :func:`trial_order`. Each trial: the cooldown,
        ``prepare(c)`` (applies a configuration: sets a limit), the warm-up (runs of ``work(c)``,
        ``warmup_runs`` at least, until settled; ``work`` None: ``measure`` is run and its result dropped), then
        the window: ``measure(c)`` runs the work once, measured, and is repeated until the window is the
        longer of ``min_window_s`` and ``window_need`` (the window a bound asks for, from the first run's
        time and energy: :func:`bound_window`), capped by ``max_runs``. With ``run_s`` the window's runs
        are decided before it opens, and ``measure_runs(c, n)`` measures ``n`` runs as one window (None:
        ``n`` calls of ``measure`` added up). Results in the order of ``configs``, each with its trials in
        the order run and the intervals of their time and energy per run (``confidence``)."""
        if self.run_s is not None and window_need is not None:
            raise ValueError("a window sized before it opens (run_s) cannot also follow a bound (window_need)")
        configs = list(configs)
        fixed = self.cooldown is None or self.cooldown.duration_s is not None
        baseline = None if fixed else probe().temperature_c
        samples: dict[C, list[TrialSample]] = {c: [] for c in configs}
        for config, k in trial_order(configs, self.trials, self.seed):
            cooled = True
            if self.cooldown is not None:
                cooled, _ = cool_down(probe, baseline, self.cooldown, clock, sleep)
            prepare(config)
            settled, warm = True, 0
            if self.settling is not None or self.warmup_runs:
                once = functools.partial(work or measure, config)
                settled, warm = warm_up(once, probe, self.settling, clock, sleep, min_runs=self.warmup_runs)
            sample, runs = self._window(config, measure, window_need, measure_runs)
            got = TrialSample(config, k, sample.time_s, sample.energy_j, runs, settled, cooled, warm, probe().temperature_c)
            samples[config].append(got)
            if on_trial is not None:
                on_trial(got)
        return [
            ConfigResult(
                c, tuple(samples[c]), self._interval([s.time_s for s in samples[c]]), self._interval([s.energy_j for s in samples[c]])
            )
            for c in configs
        ]

    def _interval(self, values: list[float]) -> Interval:
        if self.confidence is None:  # no interval asked: the mean alone (and no scipy)
            return Interval(statistics.fmean(values), math.nan, math.nan, len(values))
        return confidence_interval(values, self.confidence)

    def _window(
        self,
        config: C,
        measure: Callable[[C], Sample],
        need: Callable[[Sample], float] | None,
        measure_runs: Callable[[C, int], Sample] | None,
    ) -> tuple[Sample, int]:
        """The window's runs of the work: the mean per run, and how many."""
        if self.run_s is not None:  # sized beforehand: one window of n runs
            n = runs_to_fill(self.min_window_s, self.run_s)
            if measure_runs is not None:
                got = measure_runs(config, n)
            else:
                parts = [measure(config) for _ in range(n)]
                got = Sample(sum(p.time_s for p in parts), sum(p.energy_j for p in parts))
            return Sample(got.time_s / n, got.energy_j / n), n
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
    "calibrate",
    "confidence_interval",
    "cool_down",
    "device_probe",
    "no_probe",
    "runs_to_fill",
    "trial_order",
    "warm_up",
]

"""Upstream's thermally stable energy profiling of a workload (``measure``, ``profile_parameters``, ...).

A GPU's energy per iteration depends on how warm it is and on how long the window is
(its counter moves in steps). Upstream's workflow makes the number repeatable: each
**trial** idles for ``cooldown_duration`` seconds, runs the workload ``num_warmup_iterations``
times unmeasured, then measures as many iterations as fill ``measurement_duration`` seconds
(the iteration time is calibrated first) in one :class:`~zeus.monitor.ZeusMonitor` window,
and reads the GPUs' temperatures before and after. The **sweeps** repeat trials
(``num_trials`` per value, after ``num_warmup_trials`` unrecorded ones) over a range of
measurement durations (cooldown fixed) or cooldown durations (measurement fixed), and call
a value *valid* where the sample standard deviation of the energy per iteration is below
``trial_stddev_threshold`` joules. :func:`profile_parameters` runs both sweeps;
:func:`measure` runs one trial with durations already chosen.

The trial loop is :mod:`zeus_core.profiling`'s, the one every profiler here uses, set to
upstream's semantics: the calibration is :func:`~zeus_core.profiling.calibrate`, the cooldown a
fixed :class:`~zeus_core.profiling.Cooldown` (``duration_s``), the warm-up a fixed count
(``ThermalProfiler.warmup_runs``, no settling), the window sized before it opens from the
calibrated iteration time (``ThermalProfiler.run_s``, :func:`~zeus_core.profiling.runs_to_fill`)
and measured as one, and each value's trials run back to back
(:meth:`~zeus_core.profiling.ThermalProfiler.run`, one value at a time). The windows,
temperatures and execution sync are the engine's (the monitor's GPUs come from the device
plugins). In a distributed job every rank runs the workload on its own monitor
(``gpu_indices=[local_rank]``); the results are reduced over ranks (energy summed, time the
maximum, temperatures averaged) and rank 0 alone logs.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from zeus.monitor.energy import ZeusMonitor
from zeus.utils.framework import all_reduce, get_rank, get_world_size, sync_execution
from zeus_core.profiling import Cooldown, Sample, ThermalProfiler, TrialSample, calibrate, runs_to_fill

logger = logging.getLogger(__name__)

#: the durations (s) a sweep tries where no range is given: 1, 2, ..., 10
DEFAULT_SEARCH_RANGE = [float(s) for s in range(1, 11)]
#: the name of the window a trial measures
TRIAL_WINDOW = "__zeus_profile_run_trial"

SweepType = Literal["cooldown_duration", "measurement_duration"]


def _log(message: str, *args: Any) -> None:
    """Log on rank 0 only (every rank runs the same sweep)."""
    if get_rank() == 0:
        logger.info(message, *args)


@dataclass
class TrialResult:
    """One measured trial: joules and seconds per iteration, the window's totals, the iterations it
    ran, and the mean GPU temperature (°C) just before and just after the window."""

    energy_per_iter: float
    time_per_iter: float
    total_energy: float
    total_time: float
    iterations: int
    temperature_before: float
    temperature_after: float


@dataclass
class SweepResult:
    """The trials of one swept value: their mean and sample standard deviation of ``energy_per_iter``
    (J), mean temperatures, time and energy, and ``is_valid`` (``energy_std`` below the threshold)."""

    measurement_duration: float
    cooldown_duration: float
    trials: list[TrialResult]
    energy_mean: float
    energy_std: float
    avg_temperature_before: float
    avg_temperature_after: float
    avg_total_time: float
    avg_total_energy: float
    is_valid: bool

    def _figures(self) -> str:
        return (
            f"mean={self.energy_mean:.4f} J  std={self.energy_std:.4f} J  "
            f"temp_before={self.avg_temperature_before:.1f} \u00b0C  temp_after={self.avg_temperature_after:.1f} \u00b0C  "
            f"[{'VALID' if self.is_valid else 'INVALID'}]"
        )

    def __str__(self) -> str:
        """One line: both durations and the figures, without the trials."""
        return f"measurement={self.measurement_duration:.1f} s  cooldown={self.cooldown_duration:.1f} s  {self._figures()}"


@dataclass
class SweepReport:
    """A sweep: ``sweep_param`` (name, values tried), ``fixed_param`` (name, value) and one entry per value."""

    sweep_param: tuple[str, list[float]]
    fixed_param: tuple[str, float]
    entries: list[SweepResult]

    def __str__(self) -> str:
        """A heading, then one line per value tried."""
        swept, _ = self.sweep_param
        fixed, value = self.fixed_param
        heads = [f"{swept}={getattr(e, swept):.1f} s" for e in self.entries]
        width = max((len(h) for h in heads), default=0)
        lines = [f"Sweep {swept} (fixed {fixed}={value:.1f} s):"]
        lines += [f"  {h:<{width}}  {e._figures()}" for h, e in zip(heads, self.entries)]
        return "\n".join(lines)


def _sync(monitor: ZeusMonitor) -> None:
    sync_execution(monitor.gpu_indices, sync_with=monitor.sync_with)


def _calibrate_iteration_duration(
    target_function: Callable[[], Any], zeus_monitor: ZeusMonitor, num_warmup_iterations: int, num_calibration_iterations: int
) -> float:
    """Seconds one call of ``target_function`` takes (after ``num_warmup_iterations`` calls), the
    slowest rank's, timed over ``num_calibration_iterations`` calls."""
    mine = calibrate(
        target_function,
        num_calibration_iterations,
        warmup_runs=num_warmup_iterations,
        clock=lambda: time.monotonic(),  # looked up at each call: the module's clock
        sync=lambda: _sync(zeus_monitor),
    )
    [seconds] = all_reduce([mine], "max")
    logger.info("Calibrated iteration duration: %.3f ms", seconds * 1000)
    return float(seconds)


def _mean_temperature(zeus_monitor: ZeusMonitor) -> float:
    """The monitored GPUs' mean temperature (°C)."""
    readings = [zeus_monitor.gpus.get_gpu_temperature(i) for i in zeus_monitor.gpu_indices]
    if not readings:
        raise ValueError("the ZeusMonitor given to zeus.profile monitors no GPU")
    return sum(readings) / len(readings)


def _run_trials(
    target_function: Callable[[], Any],
    zeus_monitor: ZeusMonitor,
    cooldown_duration: float,
    measurement_duration: float,
    num_warmup_iterations: int,
    iteration_duration: float,
    count: int,
    done: Callable[[int], object] = lambda i: None,
) -> list[TrialResult]:
    """``count`` trials, each: cool down, warm up, then measure enough iterations to fill
    ``measurement_duration`` in one window (``done(i)`` after trial ``i``, from 0).

    zeus_core.profiling's profiler runs them; this function supplies the window (the monitor's, its
    temperatures before and after, reduced over ranks) and turns each into a :class:`TrialResult`."""
    if count < 1:
        return []  # upstream runs no trial (and its summary then finds no value to average)
    windows: list[tuple[float, float, float, float]] = []  # per trial: total energy, total time, temperatures

    def window(_: float, iterations: int) -> Sample:
        _sync(zeus_monitor)  # the warm-up's work is done before the temperature and the window
        before = _mean_temperature(zeus_monitor)
        zeus_monitor.begin_window(TRIAL_WINDOW, sync_execution=False)  # synced just above
        for _ in range(iterations):
            target_function()
        measured = zeus_monitor.end_window(TRIAL_WINDOW)
        after = _mean_temperature(zeus_monitor)
        [energy] = all_reduce([measured.total_energy], "sum")
        [elapsed] = all_reduce([measured.time], "max")
        [before_sum, after_sum] = all_reduce([before, after], "sum")
        windows.append((energy, elapsed, before_sum, after_sum))
        return Sample(elapsed, energy)

    profiler = ThermalProfiler(
        trials=count,
        # upstream's durations and counts as it takes them: a cooldown that is not positive waits not at
        # all, a negative measurement duration measures one iteration, a negative count warms up not at all
        min_window_s=0.0 if measurement_duration < 0 else measurement_duration,
        settling=None,
        cooldown=Cooldown(duration_s=cooldown_duration if cooldown_duration > 0 else 0.0),
        seed=None,
        confidence=None,  # upstream judges a sweep by its standard deviation, not an interval
        warmup_runs=max(0, num_warmup_iterations),
        run_s=iteration_duration,
    )
    ranks = get_world_size()

    def result(t: TrialSample) -> TrialResult:
        energy, elapsed, before_sum, after_sum = windows[t.trial]
        return TrialResult(
            energy_per_iter=t.energy_j,  # the profiler's window divided by its runs: energy / iterations
            time_per_iter=t.time_s,
            total_energy=energy,
            total_time=elapsed,
            iterations=t.runs,
            temperature_before=before_sum / ranks,
            temperature_after=after_sum / ranks,
        )

    [trials] = profiler.run(
        [measurement_duration],
        prepare=lambda _: None,
        measure=lambda _: Sample(0.0, 0.0),  # every window is measure_runs': one per trial
        work=lambda _: target_function(),
        clock=lambda: time.monotonic(),  # looked up at each call: the module's clock and sleep
        sleep=lambda s: time.sleep(s),
        on_trial=lambda t: done(t.trial),
        measure_runs=window,
    )
    return [result(t) for t in trials.trials]


def _summarize(
    measurement_duration: float, cooldown_duration: float, trials: list[TrialResult], trial_stddev_threshold: float
) -> SweepResult:
    per_iter = [t.energy_per_iter for t in trials]
    n = len(trials)
    spread = statistics.stdev(per_iter) if n >= 2 else 0.0
    return SweepResult(
        measurement_duration=measurement_duration,
        cooldown_duration=cooldown_duration,
        trials=trials,
        energy_mean=statistics.mean(per_iter),
        energy_std=spread,
        avg_temperature_before=sum(t.temperature_before for t in trials) / n,
        avg_temperature_after=sum(t.temperature_after for t in trials) / n,
        avg_total_time=sum(t.total_time for t in trials) / n,
        avg_total_energy=sum(t.total_energy for t in trials) / n,
        is_valid=spread < trial_stddev_threshold,
    )


def _sweep(
    target_function: Callable[[], Any],
    zeus_monitor: ZeusMonitor,
    sweep_values: list[float],
    fixed_value: float,
    sweep_type: SweepType,
    num_trials: int,
    num_warmup_trials: int,
    trial_stddev_threshold: float,
    num_warmup_iterations: int,
    iteration_duration: float,
) -> SweepReport:
    """Warm-up trials (no cooldown, no warm-up iterations, the longest measurement), then ``num_trials``
    trials per swept value."""
    cooldowns = sweep_type == "cooldown_duration"
    if num_warmup_trials > 0:
        _log("Running %d warmup trial(s)", num_warmup_trials)
        _run_trials(
            target_function,
            zeus_monitor,
            0.0,
            fixed_value if cooldowns else max(sweep_values),
            0,
            iteration_duration,
            num_warmup_trials,
            lambda i: _log("Warmup trial %d/%d done", i + 1, num_warmup_trials),
        )
    entries = []
    for value in sweep_values:
        cooldown, measurement = (value, fixed_value) if cooldowns else (fixed_value, value)
        _log("Starting %s=%.1f s  [%d trials]", sweep_type, value, num_trials)
        trials = _run_trials(
            target_function,
            zeus_monitor,
            cooldown,
            measurement,
            num_warmup_iterations,
            iteration_duration,
            num_trials,
            lambda i: _log("Trial %d/%d done", i + 1, num_trials),
        )
        entries.append(_summarize(measurement, cooldown, trials, trial_stddev_threshold))
    fixed = "measurement_duration" if cooldowns else "cooldown_duration"
    return SweepReport(sweep_param=(sweep_type, list(sweep_values)), fixed_param=(fixed, fixed_value), entries=entries)


def profile_measurement_duration(
    target_function: Callable[[], Any],
    zeus_monitor: ZeusMonitor,
    measurement_duration_search_range: list[float] | None = None,
    cooldown_duration: float = 10.0,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    iteration_duration: float | None = None,
) -> SweepReport:
    """Sweep the measurement duration (s; default 1 to 10) with ``cooldown_duration`` fixed.
    ``iteration_duration`` (s): skip the calibration."""
    return _profile_one(
        target_function,
        zeus_monitor,
        "measurement_duration",
        measurement_duration_search_range or DEFAULT_SEARCH_RANGE,
        cooldown_duration,
        num_trials,
        num_warmup_trials,
        trial_stddev_threshold,
        num_warmup_iterations,
        num_calibration_iterations,
        iteration_duration,
    )


def profile_cooldown_duration(
    target_function: Callable[[], Any],
    zeus_monitor: ZeusMonitor,
    cooldown_duration_search_range: list[float] | None = None,
    measurement_duration: float = 10.0,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    iteration_duration: float | None = None,
) -> SweepReport:
    """Sweep the cooldown duration (s; default 1 to 10) with ``measurement_duration`` fixed.
    ``iteration_duration`` (s): skip the calibration."""
    return _profile_one(
        target_function,
        zeus_monitor,
        "cooldown_duration",
        cooldown_duration_search_range or DEFAULT_SEARCH_RANGE,
        measurement_duration,
        num_trials,
        num_warmup_trials,
        trial_stddev_threshold,
        num_warmup_iterations,
        num_calibration_iterations,
        iteration_duration,
    )


def _profile_one(
    target_function: Callable[[], Any],
    zeus_monitor: ZeusMonitor,
    sweep_type: SweepType,
    values: list[float],
    fixed_value: float,
    num_trials: int,
    num_warmup_trials: int,
    trial_stddev_threshold: float,
    num_warmup_iterations: int,
    num_calibration_iterations: int,
    iteration_duration: float | None,
) -> SweepReport:
    """One of the two sweeps (``sweep_type``), the other duration held at ``fixed_value``; calibrated here
    unless ``iteration_duration`` is given."""
    if iteration_duration is None:
        iteration_duration = _calibrate_iteration_duration(target_function, zeus_monitor, num_warmup_iterations, num_calibration_iterations)
    other = "cooldown" if sweep_type == "measurement_duration" else "measurement"
    _log("Sweeping %s (%s fixed at %.1f s)", sweep_type, other, fixed_value)
    report = _sweep(
        target_function,
        zeus_monitor,
        values,
        fixed_value,
        sweep_type,
        num_trials,
        num_warmup_trials,
        trial_stddev_threshold,
        num_warmup_iterations,
        iteration_duration,
    )
    _log("%s", report)
    return report


def profile_parameters(
    target_function: Callable[[], Any],
    zeus_monitor: ZeusMonitor,
    measurement_duration_search_range: list[float] | None = None,
    cooldown_duration_search_range: list[float] | None = None,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
) -> tuple[SweepReport, SweepReport]:
    """Both sweeps, one calibration: the measurement durations with the longest cooldown of its range,
    then the cooldowns with the longest measurement duration (the warm-up trials run before the first
    sweep only). Returns ``(measurement_report, cooldown_report)``."""
    measurements = measurement_duration_search_range or DEFAULT_SEARCH_RANGE
    cooldowns = cooldown_duration_search_range or DEFAULT_SEARCH_RANGE
    iteration = _calibrate_iteration_duration(target_function, zeus_monitor, num_warmup_iterations, num_calibration_iterations)
    first = profile_measurement_duration(
        target_function,
        zeus_monitor,
        measurements,
        cooldown_duration=max(cooldowns),
        num_trials=num_trials,
        num_warmup_trials=num_warmup_trials,
        trial_stddev_threshold=trial_stddev_threshold,
        num_warmup_iterations=num_warmup_iterations,
        iteration_duration=iteration,
    )
    second = profile_cooldown_duration(
        target_function,
        zeus_monitor,
        cooldowns,
        measurement_duration=max(measurements),
        num_trials=num_trials,
        num_warmup_trials=0,
        trial_stddev_threshold=trial_stddev_threshold,
        num_warmup_iterations=num_warmup_iterations,
        iteration_duration=iteration,
    )
    return first, second


def measure(
    target_function: Callable[[], Any],
    zeus_monitor: ZeusMonitor,
    measurement_duration: float,
    cooldown_duration: float,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    warmup_settle_duration: float | None = None,
) -> TrialResult:
    """One trial with durations already chosen (s). ``warmup_settle_duration`` (s): warm up for about
    that long instead of ``num_warmup_iterations`` calls (the calibration still uses those);
    a negative one is a ``ValueError``."""
    if warmup_settle_duration is not None and warmup_settle_duration < 0:
        raise ValueError("warmup_settle_duration must be non-negative")
    iteration = _calibrate_iteration_duration(target_function, zeus_monitor, num_warmup_iterations, num_calibration_iterations)
    if warmup_settle_duration is not None:
        num_warmup_iterations = runs_to_fill(warmup_settle_duration, iteration)
    [trial] = _run_trials(target_function, zeus_monitor, cooldown_duration, measurement_duration, num_warmup_iterations, iteration, 1)
    return trial


__all__ = [
    "SweepReport",
    "SweepResult",
    "TrialResult",
    "measure",
    "profile_cooldown_duration",
    "profile_measurement_duration",
    "profile_parameters",
]

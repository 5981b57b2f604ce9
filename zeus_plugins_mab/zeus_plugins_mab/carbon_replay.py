"""A fast replay of one training run on a grid signal: period by period instead of iteration by iteration.

``zeus run`` with the ``trace`` device replays a run iteration by iteration through the
core's session; a year of start times on two grids (``benchmarks/carbon_replay.py``) needs
something quicker. This replays a run of ``epochs`` epochs of a power profile (time and
energy of one epoch at each limit), starting at Unix time ``start`` on ``signal``:

* ``hold(limit)``: one limit throughout (maximum power; the carbon-blind JIT's choice);
* ``carbon_aware(...)``: the ``carbon-aware`` policy's decisions
  (:func:`zeus_plugins_mab.carbon_plan.decide`, the function the policy calls), at every
  period's start;

and charges the energy against the signal exactly (power is constant between decisions) by the
core's integration rule (:func:`zeus_core.grid.split`).
The run begins with its profile known (a recurring job's later runs: the JIT's profiling
epoch is the same for every policy and is left out). A test checks that it agrees with
``zeus run`` of the same job on the trace device.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import attrs
import numpy as np

from zeus_core.grid import JOULES_PER_KWH, GridSignal, split
from zeus_plugins_mab.carbon_plan import Hull, Steering, decide

#: A decision rule: Unix time now -> (limit, the end of the period it holds for, the intensity forecast).
Rule = Callable[[float], tuple[float, float, float]]


@attrs.frozen
class RunResult:
    """What one replayed run emitted, used and took, and the limit it held in each stretch."""

    carbon_g: float
    energy_j: float
    time_s: float
    #: (Unix time, limit) of every change of limit, and the intensity forecast there.
    trace: tuple[tuple[float, float, float], ...] = ()


def replay(
    signal: GridSignal, start: float, profile: Mapping[float, tuple[float, float]], epochs: float, rule: Rule, keep_trace: bool = False
) -> RunResult:
    """Run ``epochs`` epochs from ``start``: ``rule(now)`` gives the limit and until when it holds."""
    now, work = float(start), 0.0
    elapsed = 0.0  # kept apart from ``now``: at 1.6e9 s, a Unix time cannot add a few microseconds
    trace: list[tuple[float, float, float]] = []
    stretches: list[tuple[float, float, float]] = []  # (start, end, joules) at one limit each
    while work < epochs:
        limit, until, forecast = rule(now)
        if not until > now:  # a rule that names no later time holds its limit to the end
            until = math.inf
        t_epoch, e_epoch = profile[limit]
        if keep_trace:
            trace.append((now, limit, forecast))
        rest = (epochs - work) * t_epoch
        finish = not until - now < rest
        seconds = rest if finish else until - now
        end = now + seconds
        stretches.append((now, end, e_epoch / t_epoch * seconds))
        elapsed += seconds
        work = epochs if finish else work + seconds / t_epoch
        now = end
    # charged as zeus run charges (the core's integration rule): each stretch at constant power, step by step
    starts, ends, joules = [np.array(x, dtype=float) for x in zip(*stretches)] if stretches else [np.array([], dtype=float)] * 3
    pieces = split(signal, starts, ends, joules)
    energy = float(np.sum(joules))
    carbon = float(np.dot(pieces.joules, pieces.value)) / JOULES_PER_KWH
    return RunResult(carbon, energy, elapsed, tuple(trace))


def hold(limit: float) -> Rule:
    """One limit for the whole run."""
    return lambda now: (limit, math.inf, math.nan)


def carbon_aware(
    signal: GridSignal, profile: Mapping[float, tuple[float, float]], budget: float, window_s: float, horizon_s: float
) -> Rule:
    """The carbon-aware policy's rule over ``profile`` with time ``budget`` per epoch (its state is the rule's)."""
    hull = Hull.of(profile)
    steering = Steering(hull, budget, horizon_s=horizon_s)
    last: list[tuple[float, float]] = []

    def rule(now: float) -> tuple[float, float, float]:
        if last:
            t0, t_epoch = last[-1]
            steering.account(now - t0, t_epoch)
        k, forecast, end = decide(steering, signal, now, window_s)
        limit = hull.limits[k]
        last[:] = [(now, profile[limit][0])]
        return limit, end, forecast

    return rule

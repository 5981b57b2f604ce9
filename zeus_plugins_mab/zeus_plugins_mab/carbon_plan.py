"""The arithmetic of the ``carbon-aware`` power policy: which limit to hold in each period of the grid.

Given a power profile (time and energy per iteration at each limit, the JIT's), the
policy spends a time budget where the grid is dirtiest. Over a stretch of periods with
intensities ``I_j`` it minimises the emissions ``sum_j I_j E(p_j)`` subject to the time
``sum_j T(p_j)`` staying within the budget; by Lagrange, each period holds

    p_j = argmin_p  I_j E(p) + lambda T(p)

which is always a vertex of the lower convex hull of the profile's (time, energy)
points: faster limits while the grid is clean, slower ones while it is dirty. The
multiplier ``lambda`` (grams per second) is set so that the periods of the recent past
(``window_s`` of the signal) would have kept the budget (:func:`calibrate`), and the
period's own intensity is the signal's forecast of it (what is known at its start).
A limit slower than the budget runs only on time saved earlier, for as long as that
time lasts (the run is never behind its budget when the policy decides), and time saved is spent over the next ``horizon_s``
(it raises the budget the multiplier is set by), so the run as a whole keeps the budget.

With the JIT's own time as the budget this is never a different trade-off than the
JIT's, only a better schedule of the same time: where no schedule beats holding the
JIT's limit (the profile's hull is too sharply bent there for the grid's swings), the
policy holds it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import attrs
import numpy as np

from zeus_core.grid import Forecasts, GridSignal, TimeSeries

#: The least a schedule must save over holding the budget's own limit, in carbon per unit of work on the recent
#: periods (with perfect foresight of them), for the policy to leave that limit.
MIN_GAIN = 0.02
#: The shortest stretch a limit slower than the budget is chosen for (on the time saved before).
MIN_STRETCH_S = 300.0


@attrs.frozen
class Hull:
    """The lower convex hull of a profile: limits from the fastest to the slowest, their time and
    energy per unit of work, and ``gains[k]``: joules saved per second slower from vertex k to k+1."""

    limits: tuple[float, ...]
    time: np.ndarray
    energy: np.ndarray
    gains: np.ndarray

    @classmethod
    def of(cls, profile: Mapping[float, tuple[float, float]]) -> Hull:
        """From ``{limit: (time, energy)}`` per unit of work (a limit that is slower and no thriftier
        than another never runs)."""
        pts = sorted((float(t), float(e), float(p)) for p, (t, e) in profile.items() if t > 0 and math.isfinite(e))
        if not pts:
            raise ValueError("an empty power profile")
        hull: list[tuple[float, float, float]] = []
        for t, e, p in pts:
            if hull and e >= hull[-1][1]:  # slower (or as fast) and no less energy: dominated
                continue
            if hull and t == hull[-1][0]:
                hull.pop()
            while len(hull) >= 2:
                (t1, e1, _), (t2, e2, _) = hull[-2], hull[-1]
                # drop the middle point when it lies on or above the line from hull[-2] to this one
                if (e2 - e1) * (t - t1) >= (e - e1) * (t2 - t1):
                    hull.pop()
                else:
                    break
            hull.append((t, e, p))
        time = np.array([h[0] for h in hull])
        energy = np.array([h[1] for h in hull])
        gains = (energy[:-1] - energy[1:]) / (time[1:] - time[:-1])
        return cls(tuple(h[2] for h in hull), time, energy, gains)

    def index_of(self, limit: float) -> int | None:
        return self.limits.index(limit) if limit in self.limits else None

    def choose(self, lam: float, intensity: float) -> int:
        """The vertex minimising ``intensity x energy + lam x time``."""
        if not intensity > 0:
            return 0
        return int(np.count_nonzero(self.gains * intensity > lam))


def calibrate(hull: Hull, intensities: Sequence[float] | np.ndarray, weights: Sequence[float] | np.ndarray, budget: float) -> float:
    """The multiplier with which periods of ``intensities`` (lasting ``weights``) keep their mean time
    per unit of work within ``budget``, emitting the least.

    Greedy over the moves one vertex slower in one period, best grams saved per second first
    (Lagrange's order); the multiplier lies between the last move that fits and the first that
    does not (their geometric mean, so that small changes of intensity do not flip choices).
    """
    x = np.asarray(intensities, dtype=float)
    w = np.asarray(weights, dtype=float)
    keep = np.isfinite(x) & (x > 0) & (w > 0)
    x, w = x[keep], w[keep]
    if len(hull.gains) == 0 or len(x) == 0:
        return math.inf
    slack = float(w.sum()) * (budget - hull.time[0])
    if slack <= 0:
        return math.inf
    ratio = (x[:, None] * hull.gains[None, :]).ravel()
    cost = (w[:, None] * np.diff(hull.time)[None, :]).ravel()
    order = np.argsort(-ratio, kind="stable")
    used = np.cumsum(cost[order])
    n = int(np.searchsorted(used, slack * (1 + 1e-12), side="right"))
    if n == 0:
        return float(ratio[order[0]]) * 2.0
    if n == len(order):
        return float(ratio[order[-1]]) / 2.0
    return math.sqrt(float(ratio[order[n - 1]]) * float(ratio[order[n]]))


@attrs.define
class Steering:
    """The policy's state over one run: the hull, the time budget per unit of work, and the debt."""

    hull: Hull
    budget: float
    horizon_s: float = 86400.0
    #: Seconds run beyond the budget so far (negative: ahead of it).
    debt: float = 0.0
    lam: float = math.nan
    #: How long the last choice may hold before the time saved for it runs out (inf: as long as its period).
    lasts_s: float = math.inf

    def account(self, seconds: float, time_per_unit: float) -> None:
        """``seconds`` ran at a limit taking ``time_per_unit``: the work done should have taken ``budget`` each."""
        if seconds > 0 and time_per_unit > 0:
            self.debt += seconds - seconds / time_per_unit * self.budget

    def target(self) -> float:
        """The budget for the next stretch: lower while in debt, repaid over ``horizon_s``."""
        t = self.budget * (1.0 - self.debt / self.horizon_s)
        return float(min(max(t, self.hull.time[0]), self.hull.time[-1]))

    def choose(self, intensities: Sequence[float], weights: Sequence[float], forecast: float, period_s: float = math.inf) -> int:
        """The hull vertex for the coming period (lasting ``period_s``), whose intensity is forecast as
        ``forecast``; recent ``intensities`` (lasting ``weights``) set the multiplier. A vertex slower
        than the budget runs only on time saved before, and :attr:`lasts_s` says for how long (the run
        is never behind its budget when it decides, so it never takes longer than the budget by more
        than its last stretch)."""
        self.lam = calibrate(self.hull, intensities, weights, self.target())
        hold = self.holds(intensities, weights)
        if hold is not None:
            k = hold
        elif not (math.isfinite(forecast) and forecast > 0):
            k = self.fallback()
        elif not math.isfinite(self.lam):
            k = 0
        else:
            k = self.hull.choose(self.lam, forecast)
        # A vertex slower than the budget runs on time saved before, for as long as that time lasts (at least
        # MIN_STRETCH_S, or the period); then the policy decides again.
        self.lasts_s = math.inf
        while k > 0:
            rate = 1.0 - self.budget / self.hull.time[k]  # seconds of debt per second at vertex k
            if rate <= 0:
                break
            lasts = -self.debt / rate
            if lasts >= min(period_s, MIN_STRETCH_S):
                self.lasts_s = lasts
                break
            k -= 1
        return k

    def holds(self, intensities: Sequence[float], weights: Sequence[float] | None = None) -> int | None:
        """The budget's own vertex when the grid's recent swings are too small to pay for leaving it, else
        None: when the schedule the multiplier gives over the recent periods (``intensities``, lasting
        ``weights``) would have emitted less than :data:`MIN_GAIN` below holding the vertex per unit of
        work, in no more time (with forecasts, a smaller edge is lost to their error). Never while the run
        is off its budget by more than a thousandth of ``horizon_s``: time owed is repaid, time saved is spent."""
        k = np.flatnonzero(np.isclose(self.hull.time, self.budget, rtol=1e-9, atol=0.0))
        x = np.asarray(intensities, dtype=float)
        w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=float)
        keep = np.isfinite(x) & (x > 0) & (w > 0)
        x, w = x[keep], w[keep]
        if not len(k) or not len(x) or abs(self.debt) > 1e-3 * self.horizon_s:  # time owed, or saved: steer it back
            return None
        first = int(k[0])
        return first if self.gain(x, w, first) < MIN_GAIN else None

    def gain(self, x: np.ndarray, w: np.ndarray, k: int) -> float:
        """How much less carbon per unit of work the multiplier's schedule over periods ``x`` (lasting ``w``)
        emits than holding vertex ``k`` throughout (0 when its schedule is not within the budget)."""
        hull = self.hull
        lam = calibrate(hull, x, w, self.budget)
        if not math.isfinite(lam):
            return 0.0
        ks = np.array([hull.choose(lam, v) for v in x])
        work = w / hull.time[ks]
        if w.sum() / work.sum() > self.budget * (1 + 1e-9):
            return 0.0
        mixed = float(np.sum(x * hull.energy[ks] * work) / work.sum())
        held = float(np.sum(x * w) / w.sum() * hull.energy[k])
        return 1.0 - mixed / held if held > 0 else 0.0

    def fallback(self) -> int:
        """Without a forecast: the vertex whose time is nearest the budget from below (fastest if none)."""
        fits = np.flatnonzero(self.hull.time <= self.target() * (1 + 1e-12))
        return int(fits[-1]) if len(fits) else 0


def budget_of(profile: Mapping[float, tuple[float, float]], chosen: float, select: str, max_slowdown: float) -> float:
    """The time per unit of work the carbon-aware policy may take: the carbon-blind choice's, or with
    ``select = "max-slowdown"`` ``max_slowdown`` times the highest limit's."""
    if select == "max-slowdown":
        return max_slowdown * float(profile[max(profile)][0])
    return float(profile[chosen][0])


def decide(steering: Steering, signal: GridSignal, now: float, window_s: float) -> tuple[int, float, float]:
    """The hull vertex to hold from ``now`` (Unix seconds), the intensity forecast for the period that
    contains it, and the period's end: the policy's decision, the same in a run and in a replay."""
    since = now - window_s
    if isinstance(signal, TimeSeries):  # no look before a series begins (nothing there to learn from)
        since = min(max(since, signal.span()[0]), now)
    past = signal.steps(since, now)  # the last step is the current one (steps are clipped to the span)
    if isinstance(signal, Forecasts):
        step = signal.forecast(now)
        forecast, end = float(step.value), float(step.end)
    else:  # the same as the period before; the current period ends where the signal's next step begins
        forecast = float(past[-2].value if len(past) > 1 else past[-1].value)
        end = float(signal.steps(now, now + window_s)[0].end)
    recent = [s for s in past if not math.isnan(s.value)]
    k = steering.choose([s.value for s in recent], [s.end - s.start for s in recent], forecast, end - now)
    return k, forecast, min(end, now + steering.lasts_s)

"""The ``carbon-aware`` power policy: the JIT's profile, spent where the grid is dirtiest (Chase-like).

It is the ``jit`` policy (:mod:`zeus_plugins_mab.jit`) for everything the JIT does: the
first epoch at a batch size profiles every limit, and the profile and the carbon-blind
choice are remembered per batch size in the job's store (so a later run, or a later
recurrence, never profiles again). From then on, instead of holding one limit, it acts
at every period of the job's ``[grid] carbon_intensity``
(:class:`zeus_core.parts.TimedControl`): at the period's start it takes the signal's
forecast of that period (:class:`zeus_core.grid.Forecasts`; the same as the last period
where the signal has none) and holds the limit :mod:`zeus_plugins_mab.carbon_plan`
chooses: slower while the grid is dirty, faster while it is clean, keeping the time the
carbon-blind choice would take (or ``max_slowdown`` x the highest limit's, with
``select = "max-slowdown"``). With a constant intensity it holds the JIT's choice.

Differences from Chase (Yang et al., 2023): the same idea (lower the limit while the
grid is dirty, raise it while it is clean, with a forecast of the next period), but the
limit of each period comes from the Lagrangian of the JIT profile's convex hull with a
time budget kept over the run, rather than from Chase's per-period optimisation of a
carbon-weighted cost; and the profile is the JIT's, not a separate one.
"""

from __future__ import annotations

import math
from typing import Any

from zeus_core import JobSummary, Session
from zeus_core.grid import Grid
from zeus_plugins_mab.carbon_plan import Hull, Steering, budget_of, decide
from zeus_plugins_mab.jit import JitPowerPolicy, power_control
from zeus_plugins_mab.options import CarbonAwareOptions

HOUR = 3600.0
#: The most decisions kept for the summary and the figure (a year of 15-minute periods).
MAX_LOG = 40000


def profile_of(choice: dict[str, Any]) -> dict[float, tuple[float, float]] | None:
    """``{limit: (time, energy)}`` per iteration of a JIT choice (None when it kept no profile)."""
    got = choice.get("profile")
    if not isinstance(got, dict) or not got:
        return None
    return {float(p): (float(v[0]), float(v[1])) for p, v in got.items()}


class CarbonAwarePolicy(JitPowerPolicy):
    """Zeus's JIT profile, then a limit per grid period chosen by the period's forecast intensity."""

    def __init__(self, options: CarbonAwareOptions, job_eta: float, grid: Grid | None) -> None:
        super().__init__(options, job_eta)
        if grid is None or grid.carbon is None:
            raise ValueError(
                "the carbon-aware policy follows the grid's carbon intensity: add [grid] carbon_intensity "
                '= a number, a CSV file or a live source such as "electricitymaps:DE" (or, in a script, '
                'grid={"carbon_intensity": ...})'
            )
        if grid.clock is None:
            raise ValueError("the job's grid is not placed on the device's clock (build the device first)")
        self.options: CarbonAwareOptions = options
        self.grid = grid
        self.signal = grid.carbon
        self.steering: Steering | None = None
        self._profile: dict[float, tuple[float, float]] | None = None
        self._last: tuple[float, float] | None = None  # (device clock, time per iteration) of the limit held since
        self._next: float | None = None
        #: (Unix time, forecast intensity, limit) of every decision of this process, oldest first.
        self.decisions: list[tuple[float, float, float]] = []

    # -- the JIT's profile becomes a plan --

    def _start(self, session: Session) -> None:
        choice = self.choices.get(str(session.batch_size))
        profile = profile_of(choice) if choice else None
        self.steering = None
        if profile is None or choice is None:  # a choice remembered without its profile: hold it (the JIT already set it)
            return
        o = self.options
        hull = Hull.of(profile)
        budget = budget_of(profile, float(choice["power_limit"]), o.select, o.max_slowdown)
        self._profile = profile
        self.steering = Steering(hull, budget, horizon_s=o.horizon_h * HOUR)
        self._last = None
        self._next = float(session.devices.clock())  # act now

    def begin_run(self, session: Session) -> None:
        super().begin_run(session)
        self.steering = None
        self._next = None
        if self._run is None:  # profiled before: steer from the first iteration
            self._start(session)

    def _decide(self, session: Session) -> None:
        super()._decide(session)
        self._start(session)

    def end_run(self, session: Session) -> None:
        super().end_run(session)
        self.steering = None
        self._next = None

    # -- TimedControl --

    def next_action(self, session: Session) -> float | None:
        return None if self.steering is None else self._next

    def on_time(self, session: Session) -> None:
        steering, clock = self.steering, self.grid.clock
        assert steering is not None and clock is not None and self._profile is not None
        devices = session.devices
        now_clock = float(devices.clock())
        if self._last is not None:
            steering.account(now_clock - self._last[0], self._last[1])
        now = clock.time_of(now_clock)
        k, forecast, end = decide(steering, self.signal, now, self.options.window_h * HOUR)
        limit = steering.hull.limits[k]
        power_control(session).set_power_limit(limit)
        self._last = (now_clock, float(self._profile[limit][0]))
        if len(self.decisions) < MAX_LOG:
            self.decisions.append((now, forecast, limit))
        # next: the end of this period (a period with no end: the next epoch starts decide again)
        self._next = clock.clock_of(end) if math.isfinite(end) and end > now else None

    # -- results --

    def summary(self, job: JobSummary) -> dict[str, Any]:
        out = super().summary(job)
        if self.decisions:
            held: dict[str, int] = {}
            for _, _, limit in self.decisions:
                held[f"{limit:g}"] = held.get(f"{limit:g}", 0) + 1
            out["carbon_aware"] = {"decisions": len(self.decisions), "periods_by_limit": held}
        return out

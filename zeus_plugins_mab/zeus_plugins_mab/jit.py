"""The ``jit`` power policy: profile each power limit during the first epoch at a batch size.

For a batch size it has not seen, the policy sets each limit in turn (highest
first), lets ``warmup_iters`` iterations settle, measures ``measure_iters``
iterations in a window, and then holds the limit with the lowest cost per
iteration (``eta x power + (1 - eta) x MAXPOWER``, times the time per
iteration: the paper's Eq. 7). Ties go to the higher limit. The choice is
remembered per batch size in the policy state, which the runner keeps in the
store, so later runs (and later processes) skip profiling.

Windows must fit in what is left of an epoch; one that does not waits for the
next epoch, and one an epoch end interrupts is measured again in the next
epoch. When a window is longer than a whole epoch it is scaled down to fit.
With ``spread_over_epoch`` the first epoch is instead split evenly among all
limits, which is how the paper's trace-driven simulator charges that epoch
(the mean over limits).

It works with any device that can set power limits
(:class:`zeus_core.PowerLimitControl`); a device that knows its own settable
limits (:class:`zeus_core.SupportedPowerLimits`, e.g. the trace device) is
profiled on those, otherwise on ``step_w`` steps down from the maximum of
``power_limit_range()``. The runner turns :meth:`steady_epoch_cost` into each
profiling try's ``steady_cost``.

Which limit wins is ``select``: the lowest cost (default), the lowest energy or
time per iteration, or the lowest limit within ``max_slowdown`` x the time of
the highest (upstream Zeus's optimum selectors); a Python callable in
:attr:`JitPowerPolicy.selector` overrides it (upstream's custom
``OptimumSelector``, through ``GlobalPowerLimitOptimizer``). In a loop zeus
does not drive (``zeus_core.PowerLimitOptimizer``) the epoch's length may be
unknown: windows then follow each other from ``wait_iters`` on, and one the
epoch end cuts is measured again in the next epoch.

With ``thermally_stable`` (the default) the warm-up of each limit lasts until the
devices' power and temperature have settled (:mod:`zeus_core.profiling`, read once per
iteration), so a limit measured after a hotter one is not charged for its heat
and the first is not measured cold; the windows after it move later by as many
iterations (one the epoch end then cuts is measured next epoch, as above).
Where readings do not change, the warm-up is ``warmup_iters`` as without it. A
window planned with no warm-up at all (``warmup_iters = 0``, or a short epoch
spread over many limits) is measured as planned: settling compares two readings at
least, and one taken as the limit is set is all such a slot has.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs

from zeus_core import JobSummary, Measurement, PowerLimitControl, Session, SupportedPowerLimits, zeus_cost
from zeus_core.profiling import Reading, Settler, Settling, device_probe
from zeus_plugins_mab.options import JitOptions

WINDOW = "jit-power-limit"

#: Costs closer than this (relative) are a tie, and ties go to the higher limit:
#: limits that all meet the GPU's demand cost the same, and the last bits of a
#: measured window must not pick among them.
TIE = 1e-9


def power_control(session: Session) -> PowerLimitControl:
    """The session's devices, as the power-limit control ``needs_device`` has the engine check for."""
    devices = session.devices
    assert isinstance(devices, PowerLimitControl), "needs_device: the engine builds this policy only on such devices"
    return devices


@attrs.define
class _Slot:
    """One limit's place in an epoch: set at ``start``, measure from ``start + warmup`` for ``measure`` iterations."""

    limit: float
    start: int
    warmup: int
    measure: int

    @property
    def begin(self) -> int:
        return self.start + self.warmup

    @property
    def end(self) -> int:
        return self.begin + self.measure


@attrs.define
class _Profile:
    """A profiling run in progress."""

    limits: list[float]
    costs: dict[float, float] = attrs.field(factory=dict)  # limit -> cost per iteration
    measured: dict[float, tuple[float, float]] = attrs.field(factory=dict)  # limit -> (time, energy) per iteration
    slots: list[_Slot] = attrs.field(factory=list)
    open: _Slot | None = None
    profiled_epochs: int = 0
    settler: Settler | None = None  # with thermally_stable: the warm-up in progress
    probe: Callable[[], Reading] | None = None

    @property
    def remaining(self) -> list[float]:
        return [p for p in self.limits if p not in self.costs]


class JitPowerPolicy:
    """Zeus's just-in-time power-limit optimizer."""

    needs_device = (PowerLimitControl,)

    def __init__(self, options: JitOptions, job_eta: float) -> None:
        self.options = options
        self.eta = job_eta if options.eta_knob is None else options.eta_knob
        #: str(batch size) -> {"power_limit", "cost_per_iteration", "iterations_per_epoch"}
        self.choices: dict[str, dict[str, Any]] = {}
        #: str(batch size) -> {str(limit): cost per iteration} of an unfinished profile
        self.partial: dict[str, dict[str, float]] = {}
        #: str(batch size) -> {str(limit): [time, energy] per iteration} of an unfinished profile
        self.measured: dict[str, dict[str, list[float]]] = {}
        #: Chooses the limit from ``[(limit, time per iteration, energy per iteration)]``
        #: instead of ``options.select`` (a Python callable: not part of the job's options).
        self.selector: Callable[[list[tuple[float, float, float]]], float] | None = None
        self._run: _Profile | None = None

    # -- which limits --

    def limits(self, devices: PowerLimitControl) -> list[float]:
        if isinstance(devices, SupportedPowerLimits):
            return sorted({float(p) for p in devices.supported_power_limits()}, reverse=True)
        lo, hi = (float(x) for x in devices.power_limit_range())
        out, p = [], hi
        while p >= lo - 1e-9:
            out.append(p)
            p -= self.options.step_w
        return out

    # -- the PowerPolicy protocol --

    def begin_run(self, session: Session) -> None:
        key = str(session.batch_size)
        devices = power_control(session)
        if key in self.choices:
            self._run = None
            devices.set_power_limit(self.choices[key]["power_limit"])
            return
        limits = self.limits(devices)
        if not limits:
            raise ValueError("the device offers no power limit to profile")
        measured = {float(p): (float(t), float(e)) for p, (t, e) in self.measured.get(key, {}).items() if float(p) in limits}
        costs = {float(p): c for p, c in self.partial.get(key, {}).items() if float(p) in limits}
        if self.options.select != "cost" or self.selector is not None:  # a limit measured before needs its time and energy
            costs = {p: c for p, c in costs.items() if p in measured}
        self._run = _Profile(limits, costs, measured)
        devices.set_power_limit(limits[0])

    def wants_iterations(self, session: Session) -> bool:
        return self._run is not None and bool(self._run.remaining)

    def _plan(self, n: int | None) -> list[_Slot]:
        """The windows that fit in an epoch of ``n`` iterations (None: not known, so back to back)."""
        o, run = self.options, self._run
        assert run is not None
        todo = run.remaining
        wait = o.wait_iters
        if n is not None:
            n -= wait
        if (n is not None and n <= 0) or not todo:
            return []
        length = o.warmup_iters + o.measure_iters
        if o.spread_over_epoch and n is not None:
            length = n // len(todo) if n >= len(todo) else 1
        if n is not None:
            length = min(length, n)
        warmup = min(o.warmup_iters * length // (o.warmup_iters + o.measure_iters), length - 1)
        slots = []
        for k, limit in enumerate(todo):
            if n is not None and (k + 1) * length > n:
                break
            slots.append(_Slot(limit, wait + k * length, warmup, length - warmup))
        return slots

    def on_iteration(self, session: Session, iteration: int) -> None:
        run = self._run
        if run is None:
            return
        if iteration == 0:
            n = session.epoch_iterations
            run.slots = self._plan(None if n is None else int(n))
            run.profiled_epochs += 1
        if run.open is not None and iteration == run.open.end:
            self._close(session)
        for slot in run.slots:
            if iteration == slot.start:
                power_control(session).set_power_limit(slot.limit)
                if self.options.thermally_stable:
                    run.settler = self._settler()
            # a slot planned without warm-up keeps none (settling needs two readings): as if off
            warms = self.options.thermally_stable and slot.warmup > 0
            if warms and slot.start <= iteration <= slot.begin and not self._settled(session, run, slot, iteration):
                break  # the warm-up goes on: this slot and those after it move one iteration later
            if iteration == slot.begin:
                session.monitor.begin_window(WINDOW)
                run.open = slot
        if run.open is None and not run.remaining:
            self._decide(session)

    def _settler(self) -> Settler:
        o = self.options
        return Settler(Settling(readings=o.settle_readings, temperature_c=o.settle_temperature_c, power_rel=o.settle_power_rel))

    def _settled(self, session: Session, run: _Profile, slot: _Slot, iteration: int) -> bool:
        """A reading of the warm-up of ``slot``; at its last iteration, whether it may end (else it grows by one)."""
        if run.settler is None:
            run.settler = self._settler()
        if run.probe is None:
            run.probe = device_probe(session.devices)
        settled = run.settler.add(run.probe())
        if iteration < slot.begin or settled or slot.warmup >= self.options.max_warmup_iters:
            return True
        slot.warmup += 1
        for later in run.slots[run.slots.index(slot) + 1 :]:
            later.start += 1
        return False

    def _close(self, session: Session) -> None:
        run = self._run
        assert run is not None and run.open is not None
        m = session.monitor.end_window(WINDOW)
        energy, n = m.total_system_energy, run.open.measure
        cost = zeus_cost(energy, m.time, self.eta, session.max_power_w)
        limit = run.open.limit
        run.costs[limit] = float(cost) / n
        run.measured[limit] = (m.time / n, energy / n)
        key = str(session.batch_size)
        self.partial.setdefault(key, {})[str(limit)] = run.costs[limit]
        self.measured.setdefault(key, {})[str(limit)] = [m.time / n, energy / n]
        run.open = None

    def _decide(self, session: Session) -> None:
        run = self._run
        assert run is not None
        best = self._select(run)
        key = str(session.batch_size)
        self.choices[key] = {
            "power_limit": best,
            "cost_per_iteration": run.costs[best],
            "iterations_per_epoch": session.epoch_iterations,
        }
        if run.measured:
            self.choices[key]["profile"] = {str(p): list(v) for p, v in run.measured.items()}
        self.partial.pop(key, None)
        self.measured.pop(key, None)
        power_control(session).set_power_limit(best)
        self._run = None

    def _select(self, run: _Profile) -> float:
        """The limit to hold, by ``selector`` or ``options.select``; ties go to the higher limit."""
        if self.selector is not None:
            rows = [(p, *run.measured[p]) for p in run.limits]
            chosen = float(self.selector(rows))
            if chosen not in run.costs:
                raise ValueError(f"the power-limit selector chose {chosen:g} W, which was not profiled ({run.limits})")
            return chosen
        select = self.options.select
        if select == "max-slowdown":
            fastest = run.measured[run.limits[0]][0]  # the highest limit's time per iteration
            return min(p for p in run.limits if run.measured[p][0] <= self.options.max_slowdown * fastest)
        value = {
            "cost": lambda p: run.costs[p],
            "energy": lambda p: run.measured[p][1],
            "time": lambda p: run.measured[p][0],
        }[select]
        best, best_value = None, math.inf
        for limit in run.limits:  # high to low; only a clearly lower value wins
            if value(limit) < best_value * (1 - TIE):
                best, best_value = limit, value(limit)
        assert best is not None
        return best

    def on_epoch_end(self, session: Session, epoch: int, measurement: Measurement) -> None:
        run = self._run
        if run is None:
            return
        if run.open is not None:
            if run.open.end == session.epoch_iterations:
                self._close(session)
            else:  # cut by the epoch end: measure it again next epoch
                session.monitor.end_window(WINDOW, cancel=True)
                run.open = None
        run.slots = []
        if not run.remaining:
            self._decide(session)
        else:
            power_control(session).set_power_limit(run.limits[0])

    def end_run(self, session: Session) -> None:
        run = self._run
        if run is not None:
            if run.open is not None:
                session.monitor.end_window(WINDOW, cancel=True)
            self._run = None

    def steady_epoch_cost(self, session: Session) -> float | None:
        """Cost of one epoch at the chosen limit, from the profiled cost per iteration."""
        c = self.choices.get(str(session.batch_size))
        if c is None:
            return None
        n = session.epoch_iterations or c.get("iterations_per_epoch")
        return None if not n else c["cost_per_iteration"] * n

    # -- state --

    def get_state(self) -> dict[str, Any]:
        out: dict[str, Any] = {"choices": self.choices, "partial": self.partial}
        if self.measured:
            out["measured"] = self.measured
        return out

    def set_state(self, state: dict[str, Any]) -> None:
        self.choices = {str(k): dict(v) for k, v in state.get("choices", {}).items()}
        self.partial = {str(k): dict(v) for k, v in state.get("partial", {}).items()}
        self.measured = {str(k): dict(v) for k, v in state.get("measured", {}).items()}

    def summary(self, job: JobSummary) -> dict[str, Any]:
        return {"power_limit_by_batch_size": {k: v["power_limit"] for k, v in sorted(self.choices.items(), key=lambda kv: int(kv[0]))}}

"""Hardware energy counters that wrap around, extended past every wrap.

A RAPL ``energy_uj`` file wraps at its ``max_energy_range_uj``; an AMD GPU whose
firmware accumulates in 32 bits wraps at 2**32 counts. :class:`WrappingCounter`
turns such a counter into one that only grows: a reading below the last one
adds one range. A device reads each counter from a background thread
(:class:`~zeus_core.devicekit.polling.Sampler`) every :func:`watch_period`, so
that no two wraps fall between two readings however long a window is.

A counter may also go back because it was reset (a driver reload, a GPU reset).
With ``resets=True`` a decrease counts as a wrap only when the last reading was
below the range and the wrapped step is physically possible (at most
``max_w`` over the time since the last reading); any other decrease counts
nothing for that step, with a warning.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs

from zeus_core.devicekit.polling import PowerIntegral, Sampler


class WrappingCounter:
    """One energy counter, extended past its wraparounds; thread-safe.

    ``read()`` returns the raw count; ``range_counts`` is the count at which it wraps;
    ``joules_per_count`` its resolution; ``max_w`` the most power the device can draw
    (what :meth:`seconds_to_wrap` and, with ``resets``, the reset check assume).
    """

    def __init__(
        self,
        name: str,
        read: Callable[[], int],
        range_counts: int,
        joules_per_count: float,
        max_w: float,
        *,
        resets: bool = False,
    ) -> None:
        if range_counts <= 0:
            raise ValueError(f"{name}: a counter's range must be positive, got {range_counts}")
        self.name = name
        self._read = read
        self.range_counts = int(range_counts)
        self.joules_per_count = float(joules_per_count)
        self.max_w = float(max_w)
        self.resets_checked = resets
        self._lock = threading.Lock()
        self.first = self._last = int(read())
        self._last_t = time.monotonic()
        self._total = self.first
        #: wraps counted so far; counter resets seen (``resets`` only)
        self.wraps = 0
        self.resets = 0

    def _advance(self, raw: int, now: float) -> None:
        if raw >= self._last:
            self._total += raw - self._last
        else:
            wrapped = raw + self.range_counts - self._last
            possible = not self.resets_checked or (
                self._last < self.range_counts and wrapped * self.joules_per_count <= self.max_w * max(now - self._last_t, 1e-3)
            )
            if possible:
                self._total += wrapped
                self.wraps += 1
            else:
                self.resets += 1
                warnings.warn(
                    f"{self.name}: the energy counter went back from {self._last} to {raw} counts (a driver "
                    "reload or a device reset?); the energy of that step is not counted",
                    stacklevel=3,
                )
        self._last, self._last_t = raw, now

    def read(self) -> int:
        """The count now: the first reading plus every step since, wraps included."""
        with self._lock:
            self._advance(int(self._read()), time.monotonic())
            return self._total

    def joules(self) -> float:
        """Energy (J) counted since this object was made."""
        return (self.read() - self.first) * self.joules_per_count

    def seconds_to_wrap(self) -> float:
        """The shortest time the counter could take to wrap (at ``max_w``)."""
        return self.range_counts * self.joules_per_count / self.max_w


def watch_period(counters: Iterable[WrappingCounter], longest_s: float = 60.0, shortest_s: float = 0.05) -> float:
    """How often to read ``counters`` so that none can wrap twice between two readings: a
    quarter of the fastest one's :meth:`~WrappingCounter.seconds_to_wrap`, within
    [``shortest_s``, ``longest_s``] (``longest_s`` without counters)."""
    fastest = min((c.seconds_to_wrap() for c in counters), default=4 * longest_s)
    return min(longest_s, max(shortest_s, fastest / 4))


@attrs.frozen
class CounterProbe:
    """One device's hardware energy counter and power reading, as :func:`check_counters` watches them.

    ``read_j()`` is the counter in joules as the driver gives it (not extended past wraps);
    ``read_w()`` the power (W) the device reports, None where it reports none; ``max_w`` the
    most the board can draw (0: unknown, no jump check); ``period_s`` the longest update period
    counters of this kind have (NVIDIA: about 100 ms; AMD, RAPL: about 1 ms), below which a
    flat counter says nothing; ``range_j`` where the counter wraps (None: never);
    ``resolution_j`` its step.
    """

    read_j: Callable[[], float]
    read_w: Callable[[], float | None]
    max_w: float
    period_s: float = 0.1
    range_j: float | None = None
    resolution_j: float = 0.0


#: a device drawing at least this much (W) at every sample is "under load" for the frozen test
BUSY_W = 5.0
#: a counter may lag the power by this long (s) and catch up in one step without counting as a jump
CATCH_UP_S = 1.0


class _Watch:
    """What :func:`check_counters` has seen of one counter."""

    def __init__(self, probe: CounterProbe, t: float) -> None:
        self.probe = probe
        self.t0 = self.t_ref = t
        self.first = self.last = float(probe.read_j())
        self.offset = 0.0
        self.changes: list[tuple[float, float]] = []  # (time, counter J) at each move seen
        self.powers: list[tuple[float, float | None]] = []
        self.bad: str | None = None
        self.flat = False  # stood still under load (the verdict the caller may want confirmed)

    def observe(self, t: float, raw: float, watts: float | None, kind: str) -> None:
        p = self.probe
        self.powers.append((t, watts))
        bound = p.max_w * (t - self.t_ref + max(CATCH_UP_S, 2 * p.period_s)) * 1.5 + p.resolution_j
        if raw < self.last - p.resolution_j:
            step = raw + (p.range_j or 0.0) - self.last  # a wrap, where the counter has a range and the step is possible
            if p.range_j is None or self.last >= p.range_j or (p.max_w > 0 and step > bound):
                self.bad = f"ran backwards, from {self.last:.6g} J to {raw:.6g} J"
                return
            self.offset += p.range_j
        else:
            step = raw - self.last
        if p.max_w > 0 and step > bound:
            self.bad = (
                f"jumped by {step:.6g} J in {t - self.t_ref:.3f} s, more than the {kind}'s maximum power "
                f"({p.max_w:g} W) allows ({bound:.3g} J)"
            )
            return
        total = raw + self.offset - self.first
        most = p.max_w * (t - self.t0 + max(CATCH_UP_S, 2 * p.period_s)) * 1.5 + p.resolution_j
        if p.max_w > 0 and total > most:
            self.bad = (
                f"jumped by {total:.6g} J in {t - self.t0:.3f} s, more than the {kind}'s maximum power "
                f"({p.max_w:g} W) allows ({most:.3g} J)"
            )
            return
        if raw != self.last:
            self.changes.append((t, raw + self.offset))
            self.t_ref = t
        self.last = raw

    def settled(self) -> bool:
        """Decided before the time is up: found bad, or seen moving twice at a rate to compare."""
        return self.bad is not None or (len(self.changes) >= 3 and all(w is not None for _, w in self.powers))

    def verdict(self, t: float, kind: str) -> str | None:
        if self.bad is not None:
            return self.bad
        p = self.probe
        watts = [w for _, w in self.powers if w is not None]
        busy = len(watts) == len(self.powers) > 0 and min(watts) >= BUSY_W
        elapsed = t - self.t0
        if not self.changes:
            if busy and elapsed >= 3 * p.period_s:
                self.flat = True
                return f"did not move in {elapsed:.2f} s while the {kind} reported {sum(watts) / len(watts):.0f} W"
            return None  # idle, or too short a check for its update period: kept
        if len(self.changes) < 2 or not busy:
            return None
        (ta, ja), (tb, jb) = self.changes[0], self.changes[-1]
        inside = [w for s, w in self.powers if ta <= s <= tb and w is not None] or watts
        mean_w = sum(inside) / len(inside)
        counted, drawn = jb - ja, mean_w * (tb - ta)
        if drawn > 0 and not 0.25 <= counted / drawn <= 4.0:
            return f"counted {counted:.3g} J in {tb - ta:.2f} s while the {kind} reported {mean_w:.0f} W ({drawn:.3g} J)"
        return None


def check_counters(
    probes: Mapping[str, CounterProbe],
    seconds: float,
    kind: str = "device",
    step_s: float = 0.01,
    confirm: set[str] | None = None,
    periods: dict[str, float] | None = None,
) -> dict[str, str]:
    """Which counters cannot be trusted, with what was seen, after watching all of them at once
    for at most ``seconds`` (less once each is decided): one that runs backwards (a reset, a
    firmware fault), jumps by more than its board's maximum power allows over the time since its
    last step, does not move while the device reports load (at least :data:`BUSY_W` at every
    sample) for three of its update periods, or counts at a rate a factor of 4 away from the
    power reported. A check that cannot decide keeps the counter: an idle device, or a check
    shorter than three update periods, says nothing against it. ``kind`` names the device in
    the reasons ("GPU"). With a ``confirm`` set, a counter that only stood still under load is
    not refused but named there: the caller watches it longer (:class:`ConfirmedCounter`), since
    a counter that updates less often than the check lasts looks the same. With a ``periods``
    dict, each trusted counter seen moving at least three times gets there its update period as
    the check saw it (:func:`update_period`), as upstream's ``infer_counter_update_period``
    infers it, at no extra cost since the check reads the counter anyway.
    """
    now = time.monotonic
    watches = {name: _Watch(p, now()) for name, p in probes.items()}
    deadline = now() + seconds
    while True:
        for w in watches.values():
            if w.bad is None:
                raw = float(w.probe.read_j())
                w.observe(now(), raw, w.probe.read_w(), kind)
        t = now()
        if t >= deadline or all(w.settled() for w in watches.values()):
            break
        time.sleep(min(step_s, max(0.0, deadline - t)))
    t = now()
    verdicts = {name: w.verdict(t, kind) for name, w in watches.items()}
    if periods is not None:
        for name, w in watches.items():
            seen = update_period([c for c, _ in w.changes], step_s)
            if verdicts[name] is None and seen is not None:
                periods[name] = seen
    if confirm is not None:
        confirm.update(name for name, w in watches.items() if w.flat)
        return {name: why for name, why in verdicts.items() if why is not None and name not in confirm}
    return {name: why for name, why in verdicts.items() if why is not None}


def update_period(changes: Sequence[float], step_s: float = 0.0, *, shortest: bool = False) -> float | None:
    """A counter's update period from the times it was seen to change (read every ``step_s``):
    the longest interval between two changes plus one step, an upper bound on the period (a
    change is seen up to a step late, and a counter that moves in coarse steps looks as slow as
    its steps); None from fewer than three changes (two intervals). With ``shortest``, the
    shortest interval instead, from two changes on: what upstream's ``infer_counter_update_period``
    takes, to poll each update at least once (zeus-compat's uses this)."""
    intervals = [b - a for a, b in zip(changes, changes[1:])]
    if shortest:
        return min(intervals) if intervals else None
    return max(intervals) + step_s if len(intervals) >= 2 else None


#: Update periods inferred so far in this process, per device model (:func:`model_update_period`).
_PERIODS: dict[str, float] = {}


def model_update_period(model: str, seen: float | None = None) -> float | None:
    """The update period kept for counters of ``model`` (None: none inferred yet), after keeping
    ``seen`` (a period just inferred, :func:`check_counters`): the longest seen for the model, so
    that every device of a model shares one bound, and a device whose check saw too few changes
    (an idle one) uses what another of its model showed."""
    if seen is not None:
        _PERIODS[model] = max(seen, _PERIODS.get(model, 0.0))
    return _PERIODS.get(model)


class ConfirmedCounter:
    """A counter the check at open saw stand still under load, watched further before it is trusted.

    Until it is decided, energy is the device's power polled every ``poll_s`` and integrated (a
    :class:`~zeus_core.devicekit.polling.Sampler` thread), so no window reads a frozen counter. The
    first move of the counter that the board's maximum power allows keeps it: from then on energy
    is what was integrated until that move plus what the counter counted since (one figure that
    never steps). ``confirm_s`` of load (at least :data:`BUSY_W`) with no move refuses it, with one
    warning naming the device (``label``); the polling then goes on for good. ``source`` is
    ``"counter"`` until refused, then ``"polling"``.
    """

    def __init__(self, label: str, probe: CounterProbe, confirm_s: float = 3.0, poll_s: float = 0.05) -> None:
        self.label = label
        self.probe = probe
        self.confirm_s = float(confirm_s)
        self.source = "counter"
        #: "pending", "kept" or "refused"
        self.state = "pending"
        self._lock = threading.Lock()
        self._integral = PowerIntegral()
        self._t = time.monotonic()
        self._flat_j = float(probe.read_j())
        self._busy_s = 0.0
        self._base_j = self._counter0_j = 0.0
        self._integral.add("e", self._t, probe.read_w() or 0.0)
        self._sampler = Sampler(poll_s, self._tick, f"zeus-counter-confirm-{label.split()[0]}")

    def _tick(self) -> None:
        t, raw, watts = time.monotonic(), float(self.probe.read_j()), self.probe.read_w()
        with self._lock:
            self._integral.add("e", t, watts or 0.0)
            if self.state != "pending":
                return
            dt, self._t = t - self._t, t
            step = raw - self._flat_j
            p = self.probe
            if step > p.resolution_j and (p.max_w <= 0 or step <= p.max_w * (self.confirm_s + CATCH_UP_S) * 1.5):
                self.state, self._base_j, self._counter0_j = "kept", self._integral.joules("e", t), raw
                self._sampler.stop()
                return
            if (watts or 0.0) >= BUSY_W:
                self._busy_s += dt
            if abs(step) > p.resolution_j:
                why = f"went from {self._flat_j:.6g} J to {raw:.6g} J after standing still under load"
            elif self._busy_s >= self.confirm_s:
                why = f"did not move in {self._busy_s:.1f} s while the device reported {watts or 0.0:.0f} W"
            else:
                return
            self.state, self.source = "refused", "polling"
        warnings.warn(f"{self.label}: its energy counter {why}; refused, its energy is polled power instead", stacklevel=2)

    def joules(self) -> float:
        """Energy (J) since this object was made: integrated power, or after the counter was kept,
        that until the first move plus what the counter counted since."""
        with self._lock:
            if self.state == "kept":
                return self._base_j + float(self.probe.read_j()) - self._counter0_j
            return self._integral.joules("e", time.monotonic())

    def stop(self) -> None:
        self._sampler.stop()

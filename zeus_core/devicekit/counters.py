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
from collections.abc import Callable, Iterable


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

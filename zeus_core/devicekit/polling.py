"""Energy from polled power, and the background thread that polls.

A device that reports power but no energy (a GPU before Volta, an AMD GPU whose
accumulator cannot be trusted, a Jetson rail) is measured by reading its power
every period and integrating by the trapezoid rule (:class:`PowerIntegral`);
between the last sample and "now" the last power is held. A device whose energy
counter wraps is read by the same kind of thread often enough that no wrap goes
unseen (:mod:`zeus_core.devicekit.counters`). :class:`Sampler` is that thread.

A thread rather than a process: a driver call (NVML, amdsmi) or a sysfs read
runs without the GIL. (The ``nvml`` device polls in a child process all the
same, for training loops that hold the GIL for long; its samples are
integrated here too.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping


class Sampler:
    """A daemon thread that calls ``tick()`` every ``period_s`` seconds until :meth:`stop`.

    The first call comes one period after the start (the caller samples once itself
    where it needs a first sample at once). A ``tick`` that raises is kept in
    :attr:`error` (cleared by the next one that does not) for the caller to report at
    its next read; the thread goes on. :meth:`stop` returns once the thread has ended,
    so no ``tick`` runs after it (except when called from ``tick`` itself).
    """

    def __init__(self, period_s: float, tick: Callable[[], None], name: str) -> None:
        if not period_s > 0:
            raise ValueError(f"a sampling period must be positive, got {period_s!r}")
        self.period_s = float(period_s)
        self._tick = tick
        #: the exception the last ``tick`` raised; None after one that did not
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self._tick()
                self.error = None
            except Exception as e:  # noqa: BLE001 - reported at the caller's next read
                self.error = e

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the thread and wait (at most ``timeout_s``) for its ``tick`` in progress to end."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout_s)


class PowerIntegral:
    """Energy per device name from power samples: the trapezoid rule between samples, the last
    power held from the last sample to "now"; thread-safe.

    Samples are not deduplicated (dropping a repeat would make the trapezoid rule
    interpolate across a step change). A later sample can revise the held power
    down, so :meth:`joules` never answers less than it answered before.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at: dict[str, tuple[float, float, float]] = {}  # name -> (J at its last sample, that time, that W)
        self._given: dict[str, float] = {}
        #: samples added so far, over every name
        self.samples = 0

    def add(self, name: str, t: float, watts: float) -> None:
        """One power sample of ``name`` at time ``t`` (seconds of the caller's clock)."""
        with self._lock:
            prev = self._at.get(name)
            joules = 0.0 if prev is None else prev[0] + (prev[2] + watts) * 0.5 * (t - prev[1])
            self._at[name] = (joules, t, watts)
            self.samples += 1

    def add_all(self, t: float, watts: Mapping[str, float]) -> None:
        """One sample of several names, all at time ``t``."""
        for name, w in watts.items():
            self.add(name, t, w)

    def joules(self, name: str, now: float) -> float:
        """Energy (J) of ``name`` from its first sample until ``now``; 0 before its first sample."""
        with self._lock:
            got = self._at.get(name)
            if got is None:
                return 0.0
            e, t, p = got
            value = max(e + p * max(0.0, now - t), self._given.get(name, 0.0))
            self._given[name] = value
            return value

    def watts(self, name: str) -> float | None:
        """The last power sample (W) of ``name``; None before its first."""
        with self._lock:
            got = self._at.get(name)
            return None if got is None else got[2]

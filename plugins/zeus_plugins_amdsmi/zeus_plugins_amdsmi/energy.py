"""AMD GPU energy: the accumulator (with its resolution and wraparound), or polled power integrated.

``amdsmi_get_energy_count`` returns a count of ``counter_resolution``
microjoules (15.3 µJ on Instinct GPUs). The C type is 64 bits, but boards whose
firmware accumulates in 32 bits wrap at 2**32 counts (65.7 kJ at 15.3 µJ: a few
minutes at full power). :class:`Accumulator` extends the raw count: a reading
below the last one is a 32-bit wrap when the last one fitted in 32 bits and
the wrapped step is physically possible (at most ``bound_w`` over the time
since the last reading); otherwise the counter was reset (a driver reload, a
GPU reset), which counts nothing for that step and is warned about. A 64-bit
accumulator never wraps in practice. The sampler thread reads every
accumulator often enough that no 32-bit wrap goes unseen between two window
edges, however long the window.

Where the accumulator cannot be trusted (see :func:`check_counter`), energy is
power sampled by that thread and integrated by the trapezoid rule, the last
power held until "now". A thread rather than a process: each sample is one
amdsmi call, which runs in C without the GIL.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable

WRAP_COUNTS = 1 << 32


class Accumulator:
    """One GPU's energy accumulator, extended past wraparounds; thread-safe.

    ``read()`` returns amdsmi's ``{"energy_accumulator": counts, "counter_resolution": µJ, ...}``.
    """

    def __init__(self, name: str, read: Callable[[], dict], bound_w: float) -> None:
        self.name = name
        self._read = read
        self.bound_w = bound_w
        self._lock = threading.Lock()
        first = read()
        self.resolution_uj = float(first["counter_resolution"])
        self._last = int(first["energy_accumulator"])
        self._last_t = time.monotonic()
        self._counts = 0
        self.wraps = 0
        self.resets = 0

    def _advance(self, raw: int, now: float) -> None:
        if raw >= self._last:
            self._counts += raw - self._last
        else:
            wrapped = raw + WRAP_COUNTS - self._last
            joules = wrapped * self.resolution_uj / 1e6
            if self._last < WRAP_COUNTS and joules <= self.bound_w * max(now - self._last_t, 1e-3):
                self._counts += wrapped
                self.wraps += 1
            else:
                self.resets += 1
                warnings.warn(
                    f"{self.name}: the energy accumulator went back from {self._last} to {raw} counts (a driver "
                    "reload or GPU reset?); the energy of that step is not counted",
                    stacklevel=2,
                )
        self._last, self._last_t = raw, now

    def joules(self) -> float:
        """Energy (J) since this object was made, wraparounds included."""
        with self._lock:
            raw = int(self._read()["energy_accumulator"])
            self._advance(raw, time.monotonic())
            return self._counts * self.resolution_uj / 1e6

    def seconds_to_wrap(self) -> float:
        """The shortest time a 32-bit accumulator could take to wrap (at ``bound_w``)."""
        return WRAP_COUNTS * self.resolution_uj / 1e6 / self.bound_w


class PolledEnergy:
    """Power samples per GPU integrated by the trapezoid rule; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at: dict[str, tuple[float, float, float]] = {}  # name -> (J at last sample, its time, its W)
        self._given: dict[str, float] = {}

    def add(self, name: str, t: float, watts: float) -> None:
        with self._lock:
            prev = self._at.get(name)
            joules = 0.0 if prev is None else prev[0] + (prev[2] + watts) * 0.5 * (t - prev[1])
            self._at[name] = (joules, t, watts)

    def joules(self, name: str, now: float) -> float:
        """Energy (J) from the first sample to ``now``; never less than an earlier answer (a new
        sample may revise the held power down)."""
        with self._lock:
            e, t, p = self._at[name]
            value = max(e + p * max(0.0, now - t), self._given.get(name, 0.0))
            self._given[name] = value
            return value

    def watts(self, name: str) -> float:
        with self._lock:
            return self._at[name][2]


class Sampler:
    """A daemon thread that calls ``tick()`` every ``period_s`` until stopped; the last error
    ``tick`` raised is kept for the caller to report."""

    def __init__(self, period_s: float, tick: Callable[[], None], name: str) -> None:
        self.period_s = period_s
        self._tick = tick
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self._tick()
                self.error = None
            except Exception as e:  # noqa: BLE001 - reported at the next read
                self.error = e

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(5)


Probe = tuple[Callable[[], tuple[int, float]], Callable[[], "float | None"]]


def check_counters(probes: dict[str, Probe], seconds: float) -> dict[str, str]:
    """Which accumulators cannot be trusted, with why: one that does not move, or that over
    ``seconds`` disagrees by more than a factor of 4 with the power the GPU reports (upstream Zeus
    found MI100/MI250/MI300X accumulators that stand still or count at the wrong rate). Each probe
    is (read (counts, µJ per count), read power in W or None); all GPUs are watched at once."""
    start = {name: (counts(), power()) for name, (counts, power) in probes.items()}
    t0 = time.monotonic()
    time.sleep(seconds)
    bad: dict[str, str] = {}
    for name, (counts, power) in probes.items():
        (c0, res), p0 = start[name]
        c1, _ = counts()
        elapsed = time.monotonic() - t0
        powers = [p for p in (p0, power()) if p is not None]
        delta = c1 - c0 if c1 >= c0 else c1 + WRAP_COUNTS - c0
        measured = delta * res / 1e6
        if measured <= 0:
            bad[name] = f"its energy accumulator did not move in {elapsed:.2f} s"
            continue
        if not powers or max(powers) < 1.0:
            continue  # nothing to compare with: a moving accumulator is trusted
        watts = sum(powers) / len(powers)
        if not 0.25 <= measured / (watts * elapsed) <= 4.0:
            bad[name] = (f"its energy accumulator counted {measured:.3g} J in {elapsed:.2f} s while the GPU reported "
                         f"{watts:.0f} W ({watts * elapsed:.3g} J)")
    return bad

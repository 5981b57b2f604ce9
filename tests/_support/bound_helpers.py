"""What the error-bound tests of the simulated drivers share (issue 37): one window over a device
whose edges fall where a condition holds, the interval the simulated device's true energy over it
lies in, and how far the window's figure lies outside that interval."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from zeus_core.windows import Monitor


def wait_until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Poll ``condition()`` every half millisecond until it holds (a late wake-up only waits for the next chance)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.0005)


def phase_in(period: float, lo: float, hi: float) -> Callable[[], bool]:
    """True while ``time.monotonic()`` lies between ``lo`` and ``hi`` seconds into a period (the simulated
    drivers renew their counters at multiples of the period)."""
    return lambda: lo <= time.monotonic() % period <= hi


def measure(
    dev: Any,
    truth_j: Callable[[], float],
    body: Callable[[], None],
    begin: Callable[[], bool] | None = None,
    end: Callable[[], bool] | None = None,
) -> tuple[Any, tuple[float, float]]:
    """One window over ``dev`` around ``body()`` (edges when ``begin()`` / ``end()`` hold): the measurement,
    and the interval the true energy (``truth_j()``, read just before and after each edge) lies in.

    An edge's reading must fall where its condition holds: it still holds after the edge (a loaded
    machine can pause the process between the condition and the reading, past the phase), else the
    window is measured again."""
    mon = Monitor(dev, sync="none", target_error=None)
    for _ in range(ATTEMPTS):
        if begin is not None:
            wait_until(begin)
        before_lo = truth_j()
        mon.begin_window("w")
        before_hi = truth_j()
        began = begin is None or begin()
        body()
        if end is not None:
            wait_until(end)
        after_lo = truth_j()
        m = mon.end_window("w")
        after_hi = truth_j()
        if began and (end is None or end()):
            return m, (after_lo - before_hi, after_hi - before_lo)
    raise AssertionError(f"no window's edges fell where their conditions hold in {ATTEMPTS} attempts")


#: windows :func:`measure` tries before it gives up placing the edges
ATTEMPTS = 20


def off_by(m: Any, name: str, truth: tuple[float, float]) -> float:
    """How far the window's figure for device ``name`` lies from the interval holding the true energy (0 inside it)."""
    got = m.energy[name]
    return max(0.0, truth[0] - got, got - truth[1])

"""The core's counter check (:func:`zeus_core.devicekit.check_counters`) on counters that are
functions of the clock: bounded in time, and it keeps a counter it cannot judge."""

from __future__ import annotations

import time

from zeus_core.devicekit import CounterProbe, check_counters


def counter(watts: float, period_s: float = 0.0, rate: float = 1.0):
    """A counter (J) of a device drawing ``watts``, moving every ``period_s`` at ``rate`` times the truth."""
    t0 = time.monotonic()

    def read() -> float:
        t = time.monotonic() - t0
        if period_s:
            t -= t % period_s
        return 1000.0 + rate * watts * t

    return read


def test_the_check_ends_once_decided_and_never_runs_past_its_bound():
    probes = {f"gpu{i}": CounterProbe(counter(250.0), lambda: 250.0, 400.0, period_s=0.001) for i in range(8)}
    t0 = time.monotonic()
    assert check_counters(probes, 0.3) == {}
    assert time.monotonic() - t0 < 0.3 + 0.2  # eight devices at once, ending early once each moved
    frozen = {"gpu0": CounterProbe(lambda: 5.0, lambda: 250.0, 400.0, period_s=0.1)}
    t0 = time.monotonic()
    assert "did not move" in check_counters(frozen, 0.3, kind="GPU")["gpu0"]
    assert time.monotonic() - t0 < 0.3 + 0.2


def test_what_cannot_be_decided_is_kept():
    flat = lambda: 5.0  # noqa: E731
    # idle (1 W), no power reading at all, or a check shorter than three 1-s update periods
    assert check_counters({"a": CounterProbe(flat, lambda: 1.0, 400.0)}, 0.3) == {}
    assert check_counters({"a": CounterProbe(flat, lambda: None, 400.0)}, 0.3) == {}
    assert check_counters({"a": CounterProbe(counter(250.0, period_s=1.0), lambda: 250.0, 400.0, period_s=1.0)}, 0.3) == {}


def test_a_wrap_is_not_a_backward_step_but_a_reset_is():
    state = {"n": 0}

    def wrapping() -> float:  # 990, 995, then wraps at 1000 J back to 0, 5, ...
        state["n"] += 1
        return (985.0 + 5.0 * state["n"]) % 1000.0

    assert check_counters({"a": CounterProbe(wrapping, lambda: None, 1000.0, range_j=1000.0)}, 0.1) == {}
    falling = counter(250.0, rate=-1.0)
    assert "ran backwards" in check_counters({"a": CounterProbe(falling, lambda: 250.0, 400.0)}, 0.1)["a"]

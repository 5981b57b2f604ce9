"""The core's counter check (:func:`zeus_core.devicekit.check_counters`) on counters that are
functions of the clock: bounded in time, and it keeps a counter it cannot judge."""

from __future__ import annotations

import time
import warnings

import pytest

from zeus_core.devicekit import ConfirmedCounter, CounterProbe, check_counters


def counter(watts: float, period_s: float = 0.0, rate: float = 1.0, clock=time.monotonic):
    """A counter (J) of a device drawing ``watts``, moving every ``period_s`` at ``rate`` times the truth,
    on ``clock`` (seconds)."""
    t0 = clock()

    def read() -> float:
        t = clock() - t0
        if period_s:
            t -= t % period_s
        return 1000.0 + rate * watts * t

    return read


class VirtualTime:
    """Stands in for the ``time`` module of :mod:`zeus_core.devicekit.counters`: only the check's own
    sleeps advance it, so how long the check ran is its own doing, not the load of the machine
    running the tests (a process descheduled for 0.2 s would otherwise look like a check that ran long).
    Each reading costs a microsecond, so that time moves on between two readings, as it really does."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        self.now += 1e-6
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_check_ends_once_decided_and_never_runs_past_its_bound(monkeypatch):
    from zeus_core.devicekit import counters

    clock = VirtualTime()
    monkeypatch.setattr(counters, "time", clock)
    probes = {f"gpu{i}": CounterProbe(counter(250.0, clock=clock.monotonic), lambda: 250.0, 400.0, period_s=0.001) for i in range(8)}
    t0 = clock.now
    assert check_counters(probes, 0.3) == {}
    # eight devices at once, ending early once each moved three times (10 ms steps), long before the bound
    assert clock.now - t0 <= 0.05
    frozen = {"gpu0": CounterProbe(lambda: 5.0, lambda: 250.0, 400.0, period_s=0.1)}
    t0 = clock.now
    assert "did not move" in check_counters(frozen, 0.3, kind="GPU")["gpu0"]
    assert clock.now - t0 == pytest.approx(0.3, abs=1e-3)  # undecided until the bound, and not a step past it


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


def test_a_counter_confirmed_later_is_kept_at_its_first_move_and_its_energy_never_steps():
    """A counter that stands still for 0.4 s (an update period longer than the check) then counts
    250 W: polled power until it moves, then the counter on top of what was polled."""
    start = time.monotonic()

    def late() -> float:
        t = time.monotonic() - start
        return 1000.0 if t < 0.4 else 1000.0 + 250.0 * t

    watched = ConfirmedCounter("gpu0 (test)", CounterProbe(late, lambda: 250.0, 400.0), confirm_s=2.0, poll_s=0.01)
    made = time.monotonic()
    try:
        until(lambda: watched.state != "pending")  # its sampler sees the move at 0.4 s (later on a loaded machine)
        assert watched.state == "kept" and watched.source == "counter"
        least = time.monotonic() - made
        got = watched.joules()
        most = time.monotonic() - start
    finally:
        watched.stop()
    # 250 W polled from its making until the move, then the counter's 250 W: 250 W all along, no step
    assert 250.0 * least - 1e-6 <= got <= 250.0 * most + 1e-6


def test_a_counter_that_never_moves_under_load_is_refused_once_and_polled():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.monotonic()
        watched = ConfirmedCounter("gpu0 (test)", CounterProbe(lambda: 5.0, lambda: 250.0, 400.0), confirm_s=0.3, poll_s=0.01)
        made = time.monotonic()
        try:
            until(lambda: watched.state != "pending")  # 0.3 s of load without a move (more on a loaded machine)
            time.sleep(0.3)  # polled on past the refusal
            least = time.monotonic() - made
            got = watched.joules()
            most = time.monotonic() - start
        finally:
            watched.stop()
    ours = [str(w.message) for w in caught if "energy counter" in str(w.message)]
    assert len(ours) == 1 and ours[0].startswith("gpu0 (test): its energy counter did not move in ")
    assert float(ours[0].split(" did not move in ")[1].split(" s ")[0]) >= 0.3  # its 0.3 s, or a late poll's more
    assert watched.state == "refused" and watched.source == "polling"
    assert 250.0 * least - 1e-6 <= got <= 250.0 * most + 1e-6  # the polled 250 W, from its making on


def until(condition, timeout_s: float = 30.0) -> None:
    """Wait for ``condition()`` to hold (a thread's decision), failing after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)

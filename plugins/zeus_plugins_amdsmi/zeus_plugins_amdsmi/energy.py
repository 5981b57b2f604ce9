"""AMD GPU energy: the accumulator (with its resolution and wraparound), or polled power integrated.

``amdsmi_get_energy_count`` returns a count of ``counter_resolution``
microjoules (15.3 µJ on Instinct GPUs). The C type is 64 bits, but boards whose
firmware accumulates in 32 bits wrap at 2**32 counts (65.7 kJ at 15.3 µJ: a few
minutes at full power). Each accumulator is a core
:class:`~zeus_core.devicekit.WrappingCounter` of range :data:`WRAP_COUNTS` that
tells resets apart: a reading below the last one is a 32-bit wrap when the last
one fitted in 32 bits and the wrapped step is physically possible; otherwise
the counter was reset (a driver reload, a GPU reset), which counts nothing for
that step and is warned about. A 64-bit accumulator never wraps in practice.
The device's sampler thread reads every accumulator often enough that no
32-bit wrap goes unseen between two window edges, however long the window.

Where the accumulator cannot be trusted (:func:`check_counters`), energy is
power sampled by that thread and integrated
(:class:`~zeus_core.devicekit.PowerIntegral`). A thread rather than a process:
each sample is one amdsmi call, which runs in C without the GIL.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: a 32-bit accumulator wraps at this count
WRAP_COUNTS = 1 << 32


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
            bad[name] = (
                f"its energy accumulator counted {measured:.3g} J in {elapsed:.2f} s while the GPU reported "
                f"{watts:.0f} W ({watts * elapsed:.3g} J)"
            )
    return bad

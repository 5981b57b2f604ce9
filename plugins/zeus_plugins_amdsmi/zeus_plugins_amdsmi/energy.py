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

Where the accumulator cannot be trusted (the core's
:func:`~zeus_core.devicekit.check_counters`, run when the device opens: an
accumulator that does not move under load, runs backwards, jumps beyond the
board's maximum power or counts at the wrong rate, as upstream Zeus found on
MI100/MI250/MI300X boards), energy is
power sampled by that thread and integrated
(:class:`~zeus_core.devicekit.PowerIntegral`). A thread rather than a process:
each sample is one amdsmi call, which runs in C without the GIL.
"""

from __future__ import annotations

#: a 32-bit accumulator wraps at this count
WRAP_COUNTS = 1 << 32

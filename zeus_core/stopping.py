"""When a try stops early, and the steady-state cost it is judged by (Zeus, NSDI'23).

A try stops before the epoch that would push its cost past its bound (``beta_knob x``
the cheapest recurrence so far, or less when the batch-size policy says so). The
runner applies the rule epoch by epoch, and the trace plugin's fast simulator applies
it in one step; both call :func:`epochs_within`, so the two can never disagree about
how many epochs a try gets.

Epochs are judged at their *steady-state* cost: what an epoch costs once the power
policy has settled on a limit. A try whose first epoch profiled power limits costs more
than later tries at its batch size will; :func:`steady_state_cost` says what it would
have cost with every epoch at the settled limit, which is what a batch-size policy
should learn from (``TryRecord.steady_cost``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: Relative slack of the bound: an epoch that lands on the bound up to rounding still runs.
SLACK = 1e-12


def fits(epochs: int, epoch_cost: float, bound: float) -> bool:
    """Whether ``epochs`` epochs of ``epoch_cost`` each stay within ``bound``."""
    return epochs * epoch_cost <= bound * (1 + SLACK)


def epochs_within(bound: float, epoch_cost: float, max_epochs: int) -> int:
    """The early-stop horizon: the most epochs, up to ``max_epochs``, that stay within ``bound``.

    An infinite bound (no recurrence has finished yet, or ``beta_knob = inf``) and a
    free epoch allow ``max_epochs``; zero means the try may not start ("never ran").
    """
    if not math.isfinite(bound) or not epoch_cost > 0:
        return max_epochs
    n = max(0, min(int(bound // epoch_cost), max_epochs))
    # Floor division can land one epoch short (or over) when the ratio is whole up to rounding.
    while n < max_epochs and fits(n + 1, epoch_cost, bound):
        n += 1
    while n > 0 and not fits(n, epoch_cost, bound):
        n -= 1
    return n


def steady_state_cost(epoch_costs: Sequence[float], profiled: Sequence[bool], steady_epoch_cost: float | None) -> float | None:
    """What a try would have cost had its profiling epochs run at the settled limit.

    ``epoch_costs`` and ``profiled`` are per epoch; ``steady_epoch_cost`` is the
    cost of one epoch at the limit the power policy settled on. None when no epoch
    profiled (the try's own cost is its steady-state cost) or the policy cannot say.
    """
    n = sum(1 for p in profiled if p)
    if n == 0 or steady_epoch_cost is None:
        return None
    return sum(c for c, p in zip(epoch_costs, profiled) if not p) + steady_epoch_cost * n


__all__ = ["SLACK", "fits", "epochs_within", "steady_state_cost"]

"""The Zeus cost metric under upstream's keyword names (``energy``, ``time``, ``eta_knob``, ``max_power``)."""

from __future__ import annotations

from zeus_core import zeus_cost as _core_cost


def zeus_cost(energy: float, time: float, eta_knob: float, max_power: int | float) -> float:
    """``eta_knob * energy + (1 - eta_knob) * max_power * time`` (joules, seconds, watts): the core's metric."""
    return float(_core_cost(energy, time, eta_knob, max_power))

"""Choosing the power limit to hold from profiled ones: upstream Zeus's optimum selectors.

A profile is one :class:`PowerLimitMeasurement` per limit (its window's energy and time); a
selector returns the limit (W) to hold. Shared by every power policy that takes upstream's
``optimum_selector`` (the ``jit`` policy's upstream front end, the ``zeus`` compatibility
package); a user's own rule subclasses :class:`OptimumSelector`::

    class Coolest(OptimumSelector):
        def select(self, measurements):
            return min(m.power_limit for m in measurements)

The messages of the errors are upstream's, which scripts written for it may match.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import attrs

from zeus_core.cost import zeus_cost


@attrs.frozen
class PowerLimitMeasurement:
    """One profiled limit: ``power_limit`` (W), and the ``energy`` (J) and ``time`` (s) of its window."""

    power_limit: int
    energy: float
    time: float


class OptimumSelector(ABC):
    """Chooses the limit to hold from the profiled ones (upstream's extension point)."""

    @abstractmethod
    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        """The optimal power limit (W) among ``measurements``."""


class Energy(OptimumSelector):
    """The limit whose window spent the least energy."""

    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        return min(measurements, key=lambda m: m.energy).power_limit


class Time(OptimumSelector):
    """The limit whose window was the shortest."""

    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        return min(measurements, key=lambda m: m.time).power_limit


class ZeusCost(OptimumSelector):
    """The limit of the least Zeus cost ``eta x energy + (1 - eta) x MAXPOWER x time``.

    MAXPOWER is the highest profiled limit times ``world_size``: the GPUs whose time the cost
    weighs (upstream's default 1: the one GPU of a rank under data parallelism).
    """

    def __init__(self, eta_knob: float = 0.5, world_size: int = 1) -> None:
        if not 0.0 <= eta_knob <= 1.0:
            raise ValueError("eta_knob must be between 0 and 1, inclusive both sides.")
        if world_size < 1:
            raise ValueError("world_size must be greater than or equal to 1.")
        self.eta_knob = float(eta_knob)
        self.world_size = int(world_size)

    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        top = max(m.power_limit for m in measurements) * self.world_size
        return min(measurements, key=lambda m: float(zeus_cost(m.energy, m.time, self.eta_knob, top))).power_limit


class MaxSlowdownConstraint(OptimumSelector):
    """The lowest limit whose window took at most ``factor`` x the time at the highest limit."""

    def __init__(self, factor: float) -> None:
        if not (isinstance(factor, (int, float)) and factor >= 1.0):
            raise ValueError(f"max_slowdown_factor must be greater than or equal to 1.0. Got {factor}.")
        self.factor = float(factor)

    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        fastest = max(measurements, key=lambda m: m.power_limit).time
        return min(m.power_limit for m in measurements if m.time <= self.factor * fastest)


__all__ = ["Energy", "MaxSlowdownConstraint", "OptimumSelector", "PowerLimitMeasurement", "Time", "ZeusCost"]

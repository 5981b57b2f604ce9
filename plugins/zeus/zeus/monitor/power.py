"""Upstream's ``PowerMonitor`` (and its ``PowerDomain`` names): the core's sampler of GPU power timelines."""

from __future__ import annotations

import enum

from zeus_core.inloop.timeline import PowerMonitor


class PowerDomain(enum.Enum):
    """The power readings a GPU can give: instant and average board power, average memory power."""

    DEVICE_INSTANT = "device_instant"
    DEVICE_AVERAGE = "device_average"
    MEMORY_AVERAGE = "memory_average"


__all__ = ["PowerDomain", "PowerMonitor"]

"""Upstream's ``TemperatureMonitor``: the core's sampler of GPU temperatures."""

from zeus_core.inloop.timeline import TemperatureMonitor

__all__ = ["TemperatureMonitor"]

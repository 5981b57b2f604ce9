"""Time and energy measurement: ``ZeusMonitor`` (windows), ``PowerMonitor`` and ``TemperatureMonitor`` (timelines)."""

from zeus.monitor.energy import Measurement, ZeusMonitor
from zeus.monitor.power import PowerDomain, PowerMonitor
from zeus.monitor.temperature import TemperatureMonitor

__all__ = ["Measurement", "PowerDomain", "PowerMonitor", "TemperatureMonitor", "ZeusMonitor"]

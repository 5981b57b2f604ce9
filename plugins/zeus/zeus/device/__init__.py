"""Devices: ``get_gpus()``, ``get_cpus()`` and ``get_soc()`` (upstream's entry points), opened through zeus's device plugins."""

from zeus.device.cpu import get_cpus
from zeus.device.gpu import get_gpus
from zeus.device.soc import get_soc

__all__ = ["get_cpus", "get_gpus", "get_soc"]

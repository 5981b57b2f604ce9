"""Devices: ``get_gpus()`` and ``get_cpus()`` (upstream's entry points), opened through zeus's device plugins."""

from zeus.device.cpu import get_cpus
from zeus.device.gpu import get_gpus

__all__ = ["get_cpus", "get_gpus"]

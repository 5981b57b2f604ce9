"""Upstream's ``FrequencyController``: a process of its own that locks the GPU's SM clock.

It is ``zeus-plugins-perseus``'s frequency controller (``zeus_plugins_perseus.runtime``) over the
GPU's device plugin, the path Perseus locks clocks with: a fresh interpreter (not a
``multiprocessing`` spawn, which re-imports the training script) that builds a one-GPU group of
the plugin ``get_gpus()`` uses, locks the SM clock per request (the ``nvml`` device locks the
memory clock to its highest with the first lock) and resets the clocks when it ends: on
:meth:`end`, at exit, when the training process dies, and after a SIGKILL at the next ``zeus``
start (the plugin's journal).
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["FrequencyController"]


def _device_factory(device_id: int) -> tuple[Any, list[int]]:
    """A picklable factory of a one-GPU group of CUDA-visible GPU ``device_id`` (the device plugin
    ``get_gpus()`` opened it with), and its SM clocks (MHz, highest first) at the highest memory clock."""
    from zeus.device import get_gpus
    from zeus.device.gpu import ZeusGPUNotSupportedError
    from zeus_core import open_device
    from zeus_core.engine import get_registry

    gpus = get_gpus()
    gpu = gpus._gpu(device_id)
    option = next((r.measures.get("gpu") for r in get_registry().measuring("gpu") if r.name == gpu.plugin), None) or "gpus"
    try:
        clocks = sorted(gpus.get_supported_graphics_clocks(device_id), reverse=True)
    except ZeusGPUNotSupportedError:
        clocks = []
    return functools.partial(open_device, gpu.plugin, {option: [device_id]}), clocks


class FrequencyController:
    """Locks GPU ``device_id``'s SM clock from a process of its own (upstream's interface)."""

    def __init__(self, device_id: int = 0) -> None:
        """Start the controller; as upstream's, it begins by locking the highest SM clock.

        Args:
            device_id: CUDA-visible index of the GPU to control.
        """
        from zeus_plugins_perseus.runtime.controller import FrequencyController as PerseusController

        make_device, clocks = _device_factory(device_id)
        self.device_id = device_id
        self._controller = PerseusController(make_device)
        #: SM clocks (MHz, highest first) the GPU supports
        self.supported_frequencies: list[int] = list(self._controller.supported_clocks or clocks)
        if self.supported_frequencies:
            self._controller.set_frequency(self.supported_frequencies[0])

    def set_frequency(self, frequency: int) -> None:
        """Lock the SM clock to ``frequency`` (MHz); zero does nothing. Returns once it is locked."""
        if frequency != 0:
            self._controller.set_frequency(int(frequency))

    def reset(self) -> None:
        """Reset the clocks to the driver's defaults and keep serving."""
        self._controller.reset()

    def end(self) -> None:
        """Stop the controller process; it resets the clocks before it exits."""
        self._controller.close()

"""AMD GPUs (upstream's ``zeus.device.gpu.amd``), opened through zeus's ``amdsmi`` device plugin.

The plugin reads energy and power, sets power caps and sets clock limits through amdsmi as
upstream does (``amdsmi_set_gpu_clk_range``: a range whose minimum lies below its maximum, so
locking one frequency is an invalid argument on AMD, as upstream's); a reset puts back the range
the hardware had, read before any lock, where upstream reads back the lock's own limits.
"""

from __future__ import annotations

from typing import Any

from zeus.device.gpu.common import GPU, GPUs, ZeusGPUInitError
from zeus.device.gpu.nvidia import OnePlugin, _installed

PLUGIN = "amdsmi"


def amdsmi_is_available() -> bool:
    """True where the ``amdsmi`` device plugin is installed and amdsmi starts (the simulated driver
    where ``$ZEUS_FAKE_AMDSMI`` names one)."""
    if not _installed(PLUGIN):
        return False
    try:
        from zeus_plugins_amdsmi.control import smi_module

        smi_module().amdsmi_init()  # no shut-down: amdsmi ends the library for every user of the process
    except Exception:  # noqa: BLE001 - no amdsmi, no driver: not available, as upstream answers
        return False
    return True


class AMDGPU(GPU):
    """One AMD GPU: a one-GPU group of the ``amdsmi`` plugin."""


class AMDGPUs(GPUs):
    """The visible AMD GPUs (``$HIP_VISIBLE_DEVICES`` / ``$CUDA_VISIBLE_DEVICES`` respected, as the plugin reads them)."""

    _gpu_class = AMDGPU

    def __init__(self, ensure_homogeneous: bool = False, registry: Any = None) -> None:
        from zeus_core.engine import get_registry

        if not _installed(PLUGIN):
            raise ZeusGPUInitError("AMDSMI is unavailable: pip install zeus-plugins-amdsmi")
        super().__init__(ensure_homogeneous, OnePlugin(registry if registry is not None else get_registry(), PLUGIN))


__all__ = ["AMDGPU", "AMDGPUs", "amdsmi_is_available"]

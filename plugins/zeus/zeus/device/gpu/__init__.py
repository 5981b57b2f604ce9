"""``get_gpus()``: the CUDA-visible GPUs behind upstream's index-based API (see :mod:`zeus.device.gpu.common`).

As upstream, NVIDIA comes first (:class:`~zeus.device.gpu.nvidia.NVIDIAGPUs` where NVML starts),
then AMD (:class:`~zeus.device.gpu.amd.AMDGPUs`); ``$ZEUS_GPU_DEVICE`` names the device plugin
where a machine has more than one (any other GPU plugin gives the generic ``GPUs``).
"""

from __future__ import annotations

import os

from zeus.device.gpu.amd import AMDGPUs, amdsmi_is_available
from zeus.device.gpu.common import *  # noqa: F403 - upstream's names: GPU, GPUs, EmptyGPUs and the GPU errors
from zeus.device.gpu.common import GPUs, ZeusGPUInitError
from zeus.device.gpu.nvidia import NVIDIAGPUs, nvml_is_available

_gpus: GPUs | None = None


def get_gpus(ensure_homogeneous: bool = False) -> GPUs:
    """The process's GPUs, opened once; ``ZeusGPUInitError`` where no GPU device plugin can be used."""
    global _gpus
    if _gpus is not None:
        return _gpus
    named = os.environ.get("ZEUS_GPU_DEVICE") or None
    if named in (None, "nvml") and nvml_is_available():
        _gpus = NVIDIAGPUs(ensure_homogeneous)
    elif named in (None, "amdsmi") and amdsmi_is_available():
        _gpus = AMDGPUs(ensure_homogeneous)
    elif named not in (None, "nvml", "amdsmi"):
        _gpus = GPUs(ensure_homogeneous)
    else:
        raise ZeusGPUInitError("NVML and AMDSMI unavailable. Failed to initialize GPU management library.")
    return _gpus

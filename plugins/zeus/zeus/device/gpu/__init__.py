"""``get_gpus()``: the CUDA-visible GPUs behind upstream's index-based API (see :mod:`zeus.device.gpu.common`)."""

from __future__ import annotations

from zeus.device.gpu.common import *  # noqa: F403 - upstream's names: GPU, GPUs, EmptyGPUs and the GPU errors
from zeus.device.gpu.common import GPUs, ZeusGPUInitError

_gpus: GPUs | None = None


def _plugin_opens(name: str) -> bool:
    from zeus_core.engine.registry import get_registry

    return name in get_registry().names("device")


def nvml_is_available() -> bool:
    """True where the NVIDIA device plugin (``nvml``) is installed and ``pynvml`` imports."""
    if not _plugin_opens("nvml"):
        return False
    try:
        import pynvml  # noqa: F401
    except ImportError:
        return False
    return True


def amdsmi_is_available() -> bool:
    """True where the AMD device plugin (``amdsmi``) is installed and ``amdsmi`` imports."""
    if not _plugin_opens("amdsmi"):
        return False
    try:
        import amdsmi  # noqa: F401
    except ImportError:
        return False
    return True


def get_gpus(ensure_homogeneous: bool = False) -> GPUs:
    """The process's GPUs, opened once; ``ZeusGPUInitError`` where no GPU device plugin can be used."""
    global _gpus
    if _gpus is not None:
        return _gpus
    if not (nvml_is_available() or amdsmi_is_available()):
        raise ZeusGPUInitError("NVML and AMDSMI unavailable. Failed to initialize GPU management library.")
    _gpus = GPUs(ensure_homogeneous)
    return _gpus

"""NVIDIA GPUs (upstream's ``zeus.device.gpu.nvidia``), opened through zeus's ``nvml`` device plugin.

``NVIDIAGPUs`` is :class:`~zeus.device.gpu.common.GPUs` restricted to the ``nvml`` plugin: each
CUDA-visible GPU a one-GPU ``nvml`` group, changes made through the plugin (locally, or through
``zeus daemon`` where ``$ZEUS_DAEMON_SOCKET`` / upstream's ``$ZEUSD_SOCK_PATH`` names one).
"""

from __future__ import annotations

from typing import Any

from zeus.device.gpu.common import GPU, GPUs, ZeusGPUInitError

PLUGIN = "nvml"


def _installed(name: str) -> bool:
    from zeus_core.engine import get_registry

    return name in get_registry().names("device")


def nvml_is_available() -> bool:
    """True where the ``nvml`` device plugin is installed and NVML starts (the simulated driver where
    ``$ZEUS_FAKE_NVML`` names one); False where it is missing or NVML cannot start (no driver)."""
    if not _installed(PLUGIN):
        return False
    try:
        from zeus_plugins_nvml.control import nvml_module

        nvml = nvml_module()
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no pynvml, no driver, no state: not available, as upstream answers
        return False
    try:
        nvml.nvmlShutdown()  # NVML counts its users: this one leaves the library as it found it
    except Exception:  # noqa: BLE001, S110 - nothing to undo
        pass
    return True


class OnePlugin:
    """A registry that offers one GPU device plugin (``NVIDIAGPUs`` and ``AMDGPUs`` open only their own)."""

    def __init__(self, registry: Any, name: str) -> None:
        self._registry = registry
        self._name = name

    def measuring(self, kind: str) -> list[Any]:
        return [r for r in self._registry.measuring(kind) if r.name == self._name]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._registry, name)


class NVIDIAGPU(GPU):
    """One NVIDIA GPU: a one-GPU group of the ``nvml`` plugin."""


class NVIDIAGPUs(GPUs):
    """The CUDA-visible NVIDIA GPUs (``$CUDA_VISIBLE_DEVICES`` respected: index ``i`` is the i-th visible GPU)."""

    _gpu_class = NVIDIAGPU

    def __init__(self, ensure_homogeneous: bool = False, registry: Any = None) -> None:
        from zeus_core.engine import get_registry

        if not _installed(PLUGIN):
            raise ZeusGPUInitError("NVML is unavailable: pip install zeus-plugins-nvml")
        super().__init__(ensure_homogeneous, OnePlugin(registry if registry is not None else get_registry(), PLUGIN))


__all__ = ["NVIDIAGPU", "NVIDIAGPUs", "nvml_is_available"]

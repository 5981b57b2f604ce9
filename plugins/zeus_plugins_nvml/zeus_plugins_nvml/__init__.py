"""zeus-plugins-nvml: NVIDIA GPUs measured and steered through NVML (device ``nvml``).

Kept import-free so that the power poller child process starts fast; the
public names load on first use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NvmlGpu", "NvmlGpus", "NvmlOptions"]


def __getattr__(name: str) -> Any:
    if name in ("NvmlGpu", "NvmlGpus"):
        from zeus_plugins_nvml import device

        return getattr(device, name)
    if name == "NvmlOptions":
        from zeus_plugins_nvml.options import NvmlOptions

        return NvmlOptions
    raise AttributeError(name)

"""zeus-plugins-nvml: NVIDIA GPUs measured and steered through NVML (device ``nvml``).

Kept import-free so that the power poller child process starts fast: the public
names, and the core's helper that loads them, load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # loaded on first use (zeus_core.loading.lazy_exports reads this list)
    from zeus_plugins_nvml.device import NvmlGpu, NvmlGpus
    from zeus_plugins_nvml.options import NvmlOptions

__all__ = ["NvmlGpu", "NvmlGpus", "NvmlOptions"]


def __getattr__(name: str) -> Any:
    from zeus_core.loading import lazy_exports

    return lazy_exports(__name__)(name)

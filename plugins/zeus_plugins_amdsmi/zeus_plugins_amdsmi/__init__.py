"""zeus-plugins-amdsmi: AMD GPUs measured and steered through amdsmi (device ``amdsmi``).

The public names load on first use, so that loading the entry point stays fast.
"""

from __future__ import annotations

from zeus_core.loading import lazy_exports

_EXPORTS = {
    "AmdGpu": "zeus_plugins_amdsmi.device",
    "AmdGpus": "zeus_plugins_amdsmi.device",
    "AmdsmiOptions": "zeus_plugins_amdsmi.options",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)

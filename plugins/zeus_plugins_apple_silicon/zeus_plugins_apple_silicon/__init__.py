"""zeus-plugins-apple-silicon: Apple Silicon CPU, GPU, ANE and DRAM energy (device ``apple-silicon``).

The public names load on first use, so that loading the entry point stays fast.
"""

from __future__ import annotations

from zeus_core.loading import lazy_exports

_EXPORTS = {"AppleSilicon": "zeus_plugins_apple_silicon.device", "AppleSiliconOptions": "zeus_plugins_apple_silicon.options"}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)

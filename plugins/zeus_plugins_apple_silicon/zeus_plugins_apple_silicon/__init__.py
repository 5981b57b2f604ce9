"""zeus-plugins-apple-silicon: Apple Silicon CPU, GPU, ANE and DRAM energy (device ``apple-silicon``).

The public names load on first use, so that loading the entry point stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core.loading import lazy_exports

if TYPE_CHECKING:  # loaded on first use (lazy_exports reads this list), so the entry point stays light
    from zeus_plugins_apple_silicon.device import AppleSilicon
    from zeus_plugins_apple_silicon.options import AppleSiliconOptions

__all__ = ["AppleSilicon", "AppleSiliconOptions"]
__getattr__ = lazy_exports(__name__)

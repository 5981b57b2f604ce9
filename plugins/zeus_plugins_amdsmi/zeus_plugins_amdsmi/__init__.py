"""zeus-plugins-amdsmi: AMD GPUs measured and steered through amdsmi (device ``amdsmi``).

The public names load on first use, so that loading the entry point stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core.loading import lazy_exports

if TYPE_CHECKING:  # loaded on first use (lazy_exports reads this list), so the entry point stays light
    from zeus_plugins_amdsmi.device import AmdGpu, AmdGpus
    from zeus_plugins_amdsmi.options import AmdsmiOptions

__all__ = ["AmdGpu", "AmdGpus", "AmdsmiOptions"]
__getattr__ = lazy_exports(__name__)

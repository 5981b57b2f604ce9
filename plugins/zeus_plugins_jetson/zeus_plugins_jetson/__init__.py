"""zeus-plugins-jetson: an NVIDIA Jetson's INA3221 power rails (device ``jetson``).

The public names load on first use, so that loading the entry point stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core.loading import lazy_exports

if TYPE_CHECKING:  # loaded on first use (lazy_exports reads this list), so the entry point stays light
    from zeus_plugins_jetson.device import JetsonRails
    from zeus_plugins_jetson.options import JetsonOptions

__all__ = ["JetsonOptions", "JetsonRails"]
__getattr__ = lazy_exports(__name__)

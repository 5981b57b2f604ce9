"""zeus-plugins-jetson: an NVIDIA Jetson's INA3221 power rails (device ``jetson``).

The public names load on first use, so that loading the entry point stays fast.
"""

from __future__ import annotations

from zeus_core.loading import lazy_exports

_EXPORTS = {"JetsonRails": "zeus_plugins_jetson.device", "JetsonOptions": "zeus_plugins_jetson.options"}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)

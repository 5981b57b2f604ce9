"""zeus-plugins-lightning: zeus in a Lightning ``Trainer`` (``ZeusCallback``). Loads on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core.loading import lazy_exports

if TYPE_CHECKING:  # loaded on first use (lazy_exports reads this list), so the entry point stays light
    from zeus_plugins_lightning.callback import ZeusCallback

__all__ = ["ZeusCallback"]
__getattr__ = lazy_exports(__name__)

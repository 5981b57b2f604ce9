"""zeus-plugins-hf: zeus in a Hugging Face ``Trainer``.

``ZeusCallback`` (a ``transformers.TrainerCallback``) and, for code written for upstream
Zeus, ``HFGlobalPowerLimitOptimizer``. Names load on first use (transformers is heavy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core.loading import lazy_exports

if TYPE_CHECKING:  # loaded on first use (lazy_exports reads this list), so the entry point stays light
    from zeus_plugins_hf.callback import HFGlobalPowerLimitOptimizer, ZeusCallback

__all__ = ["HFGlobalPowerLimitOptimizer", "ZeusCallback"]
__getattr__ = lazy_exports(__name__)

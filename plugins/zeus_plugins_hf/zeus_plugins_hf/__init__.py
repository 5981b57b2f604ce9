"""zeus-plugins-hf: zeus in a Hugging Face ``Trainer``.

``ZeusCallback`` (a ``transformers.TrainerCallback``) and, for code written for upstream
Zeus, ``HFGlobalPowerLimitOptimizer``. Names load on first use (transformers is heavy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core.loading import lazy_exports

_EXPORTS = {"ZeusCallback": "zeus_plugins_hf.callback", "HFGlobalPowerLimitOptimizer": "zeus_plugins_hf.callback"}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # for type checkers; at run time the names load lazily
    from zeus_plugins_hf.callback import HFGlobalPowerLimitOptimizer, ZeusCallback

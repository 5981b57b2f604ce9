"""zeus-plugins-hf: zeus in a Hugging Face ``Trainer``.

``ZeusCallback`` (a ``transformers.TrainerCallback``) and, for code written for upstream
Zeus, ``HFGlobalPowerLimitOptimizer``. Names load on first use (transformers is heavy).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {"ZeusCallback": "zeus_plugins_hf.callback", "HFGlobalPowerLimitOptimizer": "zeus_plugins_hf.callback"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'zeus_plugins_hf' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # for type checkers; at run time the names load lazily
    from zeus_plugins_hf.callback import HFGlobalPowerLimitOptimizer, ZeusCallback

"""zeus-plugins-lightning: zeus in a Lightning ``Trainer`` (``ZeusCallback``). Loads on first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {"ZeusCallback": "zeus_plugins_lightning.callback"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'zeus_plugins_lightning' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # for type checkers; at run time the names load lazily
    from zeus_plugins_lightning.callback import ZeusCallback

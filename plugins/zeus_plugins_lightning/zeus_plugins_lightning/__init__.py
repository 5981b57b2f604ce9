"""zeus-plugins-lightning: zeus in a Lightning ``Trainer`` (``ZeusCallback``). Loads on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core.loading import lazy_exports

_EXPORTS = {"ZeusCallback": "zeus_plugins_lightning.callback"}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # for type checkers; at run time the names load lazily
    from zeus_plugins_lightning.callback import ZeusCallback

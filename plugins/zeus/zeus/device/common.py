"""What every device module shares: ``has_sys_admin`` and upstream's deprecated camelCase aliases.

``@deprecated_alias("getName")`` on a snake_case method, in a class whose metaclass is
:class:`DeprecatedAliasABCMeta`, gives the class the old camelCase name too: calling it emits one
``DeprecationWarning`` per alias (the first call only) and runs the snake_case method.
"""

from __future__ import annotations

import abc
import functools
import warnings
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from zeus_core.daemon import CAP_SYS_ADMIN, has_capability


@lru_cache(maxsize=1)
def has_sys_admin() -> bool:
    """Whether this process holds ``CAP_SYS_ADMIN`` (what NVML's setters check); read once."""
    return has_capability(CAP_SYS_ADMIN)


def deprecated_alias(old_name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a method as also reachable under ``old_name`` (made by :class:`DeprecatedAliasABCMeta`)."""

    def mark(func: Callable[..., Any]) -> Callable[..., Any]:
        func._deprecated_alias = old_name  # type: ignore[attr-defined]
        return func

    return mark


def _alias(new_name: str, old_name: str, target: Callable[..., Any]) -> Callable[..., Any]:
    warned = False

    @functools.wraps(target)
    def alias(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal warned
        if not warned:
            warned = True
            warnings.warn(
                f"'{old_name}' is deprecated and will be removed in a future version. Use '{new_name}' instead.",
                DeprecationWarning,
                stacklevel=2,
            )
        return getattr(self, new_name)(*args, **kwargs)

    # The alias is neither marked again nor abstract: subclasses implement only the new name.
    for attr in ("_deprecated_alias", "__isabstractmethod__"):
        alias.__dict__.pop(attr, None)
    return alias


def deprecated_aliases(cls: type) -> dict[str, str]:
    """``{old camelCase name: new snake_case name}`` of every marked method of ``cls``."""
    out = {}
    for name in dir(cls):
        if not name.startswith("_"):
            old = getattr(getattr(cls, name, None), "_deprecated_alias", None)
            if isinstance(old, str):
                out[old] = name
    return out


class DeprecatedAliasABCMeta(abc.ABCMeta):
    """An ``ABCMeta`` that adds the camelCase alias of every ``@deprecated_alias`` method."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any) -> Any:
        cls = super().__new__(mcs, name, bases, namespace, **kwargs)
        for old, new in deprecated_aliases(cls).items():
            setattr(cls, old, _alias(new, old, getattr(cls, new)))
        return cls


__all__ = ["DeprecatedAliasABCMeta", "deprecated_alias", "has_sys_admin"]

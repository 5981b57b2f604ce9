"""Typed environment variables."""

from __future__ import annotations

import os
from typing import TypeVar, cast

T = TypeVar("T")


def get_env(name: str, valtype: type[T], default: T | None = None) -> T:
    """``$name`` converted by ``valtype``; ``bool`` accepts ``true``/``false`` in any case.

    A missing variable gives ``default`` where one is given, else a ``ValueError``; so does a
    boolean that is neither ``true`` nor ``false``.
    """
    if name not in os.environ:
        if default is not None:
            return default
        raise ValueError(f"Missing environment variable '{name}'")
    raw = os.environ[name]
    if valtype is bool:
        word = raw.lower()
        if word not in ("true", "false"):
            raise ValueError(f"Strange boolean environment variable value '{word}'")
        return cast(T, word == "true")
    return cast(T, cast(type, valtype)(raw))

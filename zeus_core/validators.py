"""attrs validators shared by every plugin's options class.

Each raises ValueError with a message that names the field and the allowed
values; ``zeus validate`` shows it as ``job.toml:LINE: message @ $.path``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def positive(_inst: Any, attribute: Any, value: Any) -> None:
    """value > 0 (and not NaN)."""
    if value is None or not value > 0:
        raise ValueError(f"{attribute.name} must be positive, got {value!r}")


def positive_or_none(_inst: Any, attribute: Any, value: Any) -> None:
    """None, or value > 0."""
    if value is not None:
        positive(_inst, attribute, value)


def nonnegative(_inst: Any, attribute: Any, value: Any) -> None:
    """value >= 0 and finite."""
    if value is None or not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"{attribute.name} must be a finite number >= 0, got {value!r}")


def finite(_inst: Any, attribute: Any, value: Any) -> None:
    """A finite number."""
    if value is None or not math.isfinite(value):
        raise ValueError(f"{attribute.name} must be a finite number, got {value!r}")


def nonempty(_inst: Any, attribute: Any, value: Any) -> None:
    """A string with something in it besides whitespace."""
    if value is None or not str(value).strip():
        raise ValueError(f"{attribute.name} must not be empty")


def at_least(lo: float):
    """value >= lo."""

    def check(_inst: Any, attribute: Any, value: Any) -> None:
        if value is None or not value >= lo:
            raise ValueError(f"{attribute.name} must be at least {lo}, got {value!r}")

    return check


def between(lo: float, hi: float):
    """lo <= value <= hi."""

    def check(_inst: Any, attribute: Any, value: Any) -> None:
        if value is None or not lo <= value <= hi:
            raise ValueError(f"{attribute.name} must be between {lo} and {hi} inclusive, got {value!r}")

    return check


def one_of(*choices: Any):
    """value in choices."""

    def check(_inst: Any, attribute: Any, value: Any) -> None:
        if value not in choices:
            raise ValueError(f"{attribute.name} must be one of {', '.join(repr(c) for c in choices)}; got {value!r}")

    return check


def positive_list(_inst: Any, attribute: Any, value: Iterable[Any] | None) -> None:
    """None, or a non-empty list of positive numbers."""
    if value is None:
        return
    items = list(value)
    if not items or any(not (v > 0) for v in items):
        raise ValueError(f"{attribute.name} must be a non-empty list of positive numbers, got {items!r}")

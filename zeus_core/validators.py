"""attrs validators shared by every plugin's options class.

Each raises ValueError with a message that names the field and the allowed
values; ``zeus validate`` shows it as ``job.toml:LINE: message @ $.path``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

#: What attrs calls as a field's validator: ``check(instance, attribute, value)``, raising ValueError.
Validator = Callable[[Any, Any, Any], None]


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


def at_least(lo: float, hint: str = "") -> Validator:
    """value >= lo (NaN fails); ``hint`` adds what the bound means, e.g. "inf disables early stopping"."""
    extra = f" ({hint})" if hint else ""

    def check(_inst: Any, attribute: Any, value: Any) -> None:
        if value is None or not value >= lo:
            raise ValueError(f"{attribute.name} must be at least {lo}{extra}, got {value!r}")

    return check


def between(lo: float, hi: float, hint: str = "") -> Validator:
    """lo <= value <= hi (NaN fails); ``hint`` adds why the bounds are what they are."""
    extra = f" ({hint})" if hint else ""

    def check(_inst: Any, attribute: Any, value: Any) -> None:
        if value is None or not lo <= value <= hi:
            raise ValueError(f"{attribute.name} must be between {lo} and {hi} inclusive{extra}, got {value!r}")

    return check


def one_of(*choices: Any) -> Validator:
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


def distinct_numbers(minimum: float, *, what: str, allow_empty: bool = False) -> Validator:
    """None, or a list of distinct numbers, each at least ``minimum`` (finite); ``what``
    says what they are in the message ("batch sizes", "CUDA-visible GPU indices (0, 1, ...)").
    An empty list is refused unless ``allow_empty``."""

    def check(_inst: Any, attribute: Any, value: Iterable[Any] | None) -> None:
        if value is None:
            return
        items = list(value)
        if not items and not allow_empty:
            raise ValueError(f"{attribute.name} must list at least one of the {what}, got an empty list")
        bad = [v for v in items if isinstance(v, bool) or not (math.isfinite(v) and v >= minimum)]
        if bad:
            raise ValueError(f"{attribute.name} must list {what}, each at least {minimum:g}; got {bad[0]!r} in {items!r}")
        repeated = sorted(v for v, n in Counter(items).items() if n > 1)
        if repeated:
            raise ValueError(f"{attribute.name} lists {repeated[0]!r} twice: {items!r}")

    return check


def callable_spec(*, files: bool = True) -> Validator:
    """A user function named as ``"package.module:function"`` (or ``"file.py:function"`` when
    ``files``), as :func:`zeus_core.loading.load_callable` takes it."""
    forms = "'package.module:function' or 'file.py:function'" if files else "'package.module:function'"

    def check(_inst: Any, attribute: Any, value: Any) -> None:
        target, sep, name = str(value).partition(":")
        ok = bool(sep and target.strip() and name.strip()) and ":" not in name
        if ok and not (files and target.endswith(".py")):
            ok = all(part.isidentifier() for part in target.split("."))
        ok = ok and all(part.isidentifier() for part in name.split("."))
        if not ok:
            raise ValueError(f"{attribute.name} must look like {forms}, got {value!r}")

    return check


def absolute_path_or_none(_inst: Any, attribute: Any, value: Any) -> None:
    """None, or an absolute path (a socket or folder shared by processes with different working folders)."""
    import os.path

    if value is not None and not os.path.isabs(str(value)):
        raise ValueError(f"{attribute.name} must be an absolute path (e.g. /run/zeus/daemon.sock), got {value!r}")


__all__ = [
    "Validator",
    "positive",
    "positive_or_none",
    "nonnegative",
    "finite",
    "nonempty",
    "at_least",
    "between",
    "one_of",
    "positive_list",
    "distinct_numbers",
    "callable_spec",
    "absolute_path_or_none",
]

"""Loading a user's function named in ``job.toml`` as ``"module:function"`` or ``"file.py:function"``.

Profilers and workloads take the user's code this way. Every failure is a
ValueError that names the setting and what to fix, so ``zeus run`` reports it
as bad input (exit 2) before anything runs.
"""

from __future__ import annotations

import importlib
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any


def load_callable(spec: str, base: Path | None = None, what: str = "step") -> Callable[..., Any]:
    """Return the function ``spec`` names.

    ``module:function`` imports the module; ``file.py:function`` runs that file,
    found relative to ``base`` (the job file's folder) unless absolute. ``what``
    names the setting in error messages.
    """
    target, sep, name = spec.partition(":")
    if not sep or not target or not name:
        raise ValueError(f"{what} {spec!r}: expected \"module:function\" or \"file.py:function\"")
    if target.endswith(".py"):
        path = Path(target).expanduser()
        if not path.is_absolute() and base is not None:
            path = Path(base) / path
        if not path.is_file():
            raise ValueError(f"{what} {spec!r}: file {path} not found")
        try:
            namespace = runpy.run_path(str(path))
        except Exception as e:  # noqa: BLE001 - user code failing at import is bad input
            raise ValueError(f"{what} {spec!r}: running {path} failed: {type(e).__name__}: {e}") from e
    else:
        try:
            namespace = vars(importlib.import_module(target))
        except Exception as e:  # noqa: BLE001 - ImportError or an error inside the module
            raise ValueError(f"{what} {spec!r}: cannot import {target!r}: {type(e).__name__}: {e}") from e
    fn = namespace.get(name)
    if not callable(fn):
        raise ValueError(f"{what} {spec!r}: {target} defines no function {name!r}")
    return fn


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A package's module ``__getattr__`` that imports each public name's module on first use.

    A plugin's package is imported with its entry point by every ``zeus``
    command, so its top-level names (``from zeus_plugins_mab import
    GlobalPowerLimitOptimizer``) load only when used::

        _EXPORTS = {"ZeusCallback": "zeus_plugins_hf.callback"}
        __all__ = sorted(_EXPORTS)
        __getattr__ = lazy_exports(__name__, _EXPORTS)
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(importlib.import_module(package), name, value)  # the next access is a plain lookup
        return value

    return __getattr__

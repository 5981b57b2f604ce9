"""Loading a user's function named in ``job.toml`` as ``"module:function"`` or ``"file.py:function"``.

Profilers and workloads take the user's code this way. Every failure is a
ValueError that names the setting and what to fix, so ``zeus run`` reports it
as bad input (exit 2) before anything runs.

Code that loads only when it is used is named the same way: a package's names on
first use (:func:`lazy_exports`) and a device plugin's device code when a device
opens (:func:`deferred_factory`).
"""

from __future__ import annotations

import importlib
import importlib.util
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
        raise ValueError(f'{what} {spec!r}: expected "module:function" or "file.py:function"')
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


def imported_for_type_checking(package: str) -> dict[str, tuple[str, str]]:
    """What ``package``'s ``__init__`` imports under ``if TYPE_CHECKING:``: public name -> (module, name there)."""
    import ast
    import sys

    path = sys.modules[package].__file__
    if path is None:
        raise RuntimeError(f"package {package!r} has no source file to read its lazy names from")
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    out: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    module = stmt.module if not stmt.level else importlib.util.resolve_name("." * stmt.level + stmt.module, package)
                    for alias in stmt.names:
                        out[alias.asname or alias.name] = (module, alias.name)
    return out


def lazy_exports(package: str) -> Callable[[str], Any]:
    """A package's module ``__getattr__`` that loads, on first use, each name the package imports under
    ``if TYPE_CHECKING:``, so that type checkers and editors see every name, and importing the package
    (as every ``zeus`` command does with a plugin's entry point) costs none of them::

        from typing import TYPE_CHECKING

        from zeus_core.loading import lazy_exports

        if TYPE_CHECKING:  # loaded on first use (lazy_exports)
            from zeus_plugins_hf.callback import ZeusCallback

        __all__ = ["ZeusCallback"]
        __getattr__ = lazy_exports(__name__)

    The imports are the one list of what loads lazily: the helper reads them from the source.
    """
    table: dict[str, tuple[str, str]] | None = None

    def __getattr__(name: str) -> Any:
        nonlocal table
        if table is None:
            table = imported_for_type_checking(package)
        found = table.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(found[0]), found[1])
        setattr(importlib.import_module(package), name, value)  # the next access is a plain lookup
        return value

    return __getattr__


def deferred_factory(target: str, help: str) -> Callable[[Any, Any], Any]:
    """A device factory that imports ``target`` (``"package.module:function"``) when a job or a
    tool first opens the device, and calls it with the options and the context.

    A plugin's entry point is imported by every ``zeus`` command; registering the
    factory this way keeps the device code (and the vendor library it imports) out
    of commands that open no device. ``help`` is what ``zeus plugins`` shows::

        register("nvml", deferred_factory("zeus_plugins_nvml.device:make_nvml", "NVIDIA GPUs through NVML"),
                 options=NvmlOptions, measures={"gpu": "gpus"})
    """
    module, sep, name = target.partition(":")
    if not sep or not module or not name:
        raise ValueError(f'deferred_factory target {target!r}: expected "package.module:function"')

    def factory(options: Any, context: Any) -> Any:
        return getattr(importlib.import_module(module), name)(options, context)

    factory.__doc__ = help
    factory.__qualname__ = factory.__name__ = name
    return factory


__all__ = ["load_callable", "lazy_exports", "deferred_factory", "imported_for_type_checking"]

"""Finding the user's training function from ``workload.entry``."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Iterable
from pathlib import Path


def add_search_path(paths: Iterable[Path]) -> None:
    """Put ``paths`` at the front of ``sys.path`` (once each), so the job's own modules import."""
    for p in reversed([str(Path(p).resolve()) for p in paths]):
        if p not in sys.path:
            sys.path.insert(0, p)


def load_entry(entry: str, search_path: Iterable[Path] = ()) -> Callable:
    """Import ``package.module:function`` and check it takes ``(batch_size, zeus)``.

    Every failure is a ValueError naming the entry and what to fix, so that
    ``zeus run`` reports it as bad input before anything trains.
    """
    search_path = list(search_path)
    add_search_path(search_path)
    module_name, _, attr = entry.partition(":")
    where = ", ".join(str(p) for p in search_path) or "sys.path"
    try:
        obj = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and module_name.startswith(e.name):
            raise ValueError(
                f"entry {entry!r}: no module named {e.name!r} (searched {where}, then the installed packages); "
                "check the name, or add its folder to workload.python_path"
            ) from e
        raise ValueError(f"entry {entry!r}: importing {module_name!r} failed: {type(e).__name__}: {e}") from e
    except Exception as e:  # noqa: BLE001 - any import-time error of user code is reported, not raised
        raise ValueError(f"entry {entry!r}: importing {module_name!r} failed: {type(e).__name__}: {e}") from e
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"entry {entry!r}: {module_name!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise ValueError(f"entry {entry!r} is a {type(obj).__name__}, not a function")
    try:
        inspect.signature(obj).bind(1, None)
    except TypeError:
        raise ValueError(f"entry {entry!r} must accept two arguments: (batch_size, zeus)") from None
    except ValueError:  # no signature (a builtin): let the call decide
        pass
    return obj

"""Upstream's multiprocessing helper: a warning for monitors made while a spawned child re-imports ``__main__``."""

from __future__ import annotations

import inspect
import warnings
from typing import Any

#: what ``multiprocessing``'s spawn and forkserver children name the re-imported main script
SPAWNED_MAIN = "__mp_main__"


def _is_global_in_spawned_child() -> bool:
    """True while module-level code of the main script runs again in a spawned child (the script's module
    is then named ``__mp_main__``): some frame of the stack is that module's top level, in a real file."""
    frame = inspect.currentframe()
    frame = frame.f_back if frame is not None else None
    while frame is not None:
        code = frame.f_code
        real_file = not (code.co_filename == "<string>" or code.co_filename.startswith("<frozen"))
        if code.co_name == "<module>" and real_file and frame.f_globals.get("__name__") == SPAWNED_MAIN:
            return True
        frame = frame.f_back
    return False


def warn_if_global_in_subprocess(self: Any) -> None:
    """Warn (``UserWarning``, naming ``type(self)``) where ``self`` is being made at import time of the main
    script in a spawned child: a monitor made as a global runs again (with whatever the script loads
    at import) in every child that re-imports the script. Nothing happens anywhere else."""
    if not _is_global_in_spawned_child():
        return
    name = type(self).__name__
    warnings.warn(
        f"{name} was instantiated during module import in a spawned subprocess: the child process re-imported "
        "your main module and ran its global code again, which creates this object (and loads whatever else the "
        'module loads) once more in every child. Create it under `if __name__ == "__main__":` or inside a function.',
        stacklevel=3,
    )


__all__ = ["warn_if_global_in_subprocess"]

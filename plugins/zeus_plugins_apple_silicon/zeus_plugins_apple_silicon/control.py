"""The ``zeus_apple_silicon`` module this process uses, and the chip's name."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from typing import Any

from zeus_core.errors import DeviceAbsent

#: Set to a state file, this makes the plugin use the simulated module
#: (:mod:`zeus_plugins_apple_silicon.fake_apple_silicon`) instead of ``zeus_apple_silicon``.
FAKE_ENV = "ZEUS_FAKE_APPLE_SILICON"


def apple_module() -> Any:
    """``zeus_apple_silicon`` as this process sees it; the simulated one when ``$ZEUS_FAKE_APPLE_SILICON`` is set."""
    if os.environ.get(FAKE_ENV):
        return importlib.import_module("zeus_plugins_apple_silicon.fake_apple_silicon")
    try:
        return importlib.import_module("zeus_apple_silicon")
    except ImportError as e:
        where = "" if sys.platform == "darwin" else f" (it runs on macOS on Apple Silicon only; this is {sys.platform})"
        raise DeviceAbsent(f"zeus_apple_silicon cannot be imported ({e}): pip install zeus-apple-silicon{where}") from None


def chip_name(module: Any) -> str | None:
    """The chip (``Apple M2 Max``): sysctl's brand string on a Mac, the state's on the simulated module."""
    if module.__name__.endswith("fake_apple_silicon"):
        return module.chip()
    if sys.platform != "darwin":
        return None
    try:
        out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None

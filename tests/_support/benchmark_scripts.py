"""A script of ``benchmarks/`` as a module, for the tests that check its parts (and for one benchmark that uses
another).

``benchmarks/`` is not put on ``sys.path``: its scripts would shadow test support modules of the same name
(``serve_faults``). Each script is loaded from its file as ``bench_<name>``, once per process.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as the module ``bench_<name>`` (the one already loaded, if any)."""
    module_name = f"bench_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module

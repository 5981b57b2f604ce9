"""Perseus: per-instruction SM-clock plans on the iteration time-energy frontier of pipeline training.

The names below are imported on first use: ``zeus`` imports this package for
every command (the plugin's entry point lives in it), and the planner needs scipy.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "PlanSet": "zeus_plugins_perseus.planner",
    "plan_frontier": "zeus_plugins_perseus.planner",
    "InstructionProfile": "zeus_plugins_perseus.profile",
    "ProfileError": "zeus_plugins_perseus.profile",
    "read_profile": "zeus_plugins_perseus.profile",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'zeus_plugins_perseus' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)

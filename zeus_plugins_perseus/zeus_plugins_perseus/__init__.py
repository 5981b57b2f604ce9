"""Perseus: per-instruction SM-clock plans on the iteration time-energy frontier of pipeline training.

The names below are imported on first use: ``zeus`` imports this package for
every command (the plugin's entry point lives in it), and the planner needs scipy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core.loading import lazy_exports

if TYPE_CHECKING:  # loaded on first use (lazy_exports reads this list)
    from zeus_plugins_perseus.planner import PlanSet, plan_frontier
    from zeus_plugins_perseus.profile import InstructionProfile, ProfileError, read_profile

__all__ = ["InstructionProfile", "PlanSet", "ProfileError", "plan_frontier", "read_profile"]
__getattr__ = lazy_exports(__name__)

"""Perseus: per-instruction SM-clock plans on the iteration time-energy frontier of pipeline training."""

from zeus_plugins_perseus.planner import PlanSet, plan_frontier
from zeus_plugins_perseus.profile import InstructionProfile, ProfileError, read_profile

__all__ = ["InstructionProfile", "PlanSet", "ProfileError", "plan_frontier", "read_profile"]

"""What runs beside training: the frequency controller process and the per-rank instruction hooks."""

from zeus_plugins_perseus.runtime.controller import FrequencyController
from zeus_plugins_perseus.runtime.hooks import PerseusHooks, ScheduleError, load_stage_schedule

__all__ = ["FrequencyController", "PerseusHooks", "ScheduleError", "load_stage_schedule"]

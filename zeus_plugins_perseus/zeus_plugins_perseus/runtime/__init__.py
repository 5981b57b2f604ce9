"""What runs beside training: the frequency controller process, the per-rank instruction hooks and the online profiler."""

from zeus_plugins_perseus.runtime.controller import FrequencyController
from zeus_plugins_perseus.runtime.hooks import PerseusHooks, ScheduleError, load_stage_schedule
from zeus_plugins_perseus.runtime.profiler import OnlineProfiler

__all__ = ["FrequencyController", "OnlineProfiler", "PerseusHooks", "ScheduleError", "load_stage_schedule"]

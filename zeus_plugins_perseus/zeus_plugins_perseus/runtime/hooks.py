"""Instruction hooks that a pipeline engine calls around every forward and backward.

Wrap each training step in ``on_step_begin()`` / ``on_step_end()`` and each
forward (backward) of a microbatch in ``on_instruction_begin("forward")`` /
``on_instruction_end("forward")``. The hooks walk the rank's planned
(instruction, clock) list in order, lock each clock before its instruction,
and fail loudly when the engine runs something the plan did not expect. The
same plan repeats every step. Timings of each instruction are kept, so that a
profiler can read them (``last_step_times``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class ScheduleError(RuntimeError):
    """The engine's instructions do not follow the plan (wrong name, too many, too few)."""


def load_stage_schedule(plan: str | Path | dict, stage: int) -> list[tuple[str, int]]:
    """The (instruction, clock) list of ``stage`` from a plan JSON file (``plans/NNNNN.json``) or its dict."""
    data = plan if isinstance(plan, dict) else json.loads(Path(plan).read_text())
    stages = data.get("stages")
    if not isinstance(stages, list) or not 0 <= stage < len(stages):
        n = len(stages) if isinstance(stages, list) else 0
        raise ScheduleError(f"the plan has {n} stage(s); there is no stage {stage}")
    entry = stages[stage]
    insts, freqs = entry.get("instructions"), entry.get("frequencies")
    if not isinstance(insts, list) or not isinstance(freqs, list) or len(insts) != len(freqs):
        raise ScheduleError(f"stage {stage} of the plan needs equally long 'instructions' and 'frequencies' lists")
    return [(str(i), int(f)) for i, f in zip(insts, freqs)]


class PerseusHooks:
    """Per-rank hooks: ``set_frequency`` is a FrequencyController's (or any callable taking MHz)."""

    def __init__(
        self,
        schedule: list[tuple[str, int]],
        set_frequency: Callable[[int], Any],
        synchronize: Callable[[], Any] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        microbatches: list[int] | None = None,
    ) -> None:
        """``microbatches``: the microbatch of each planned instruction; when given, an engine that
        passes its microbatch to ``on_instruction_begin`` is held to it as well as to the name."""
        if not schedule:
            raise ScheduleError("the rank's schedule is empty")
        if microbatches is not None and len(microbatches) != len(schedule):
            raise ScheduleError(f"{len(microbatches)} microbatch indices for {len(schedule)} planned instructions")
        self.schedule = list(schedule)
        self.microbatches = None if microbatches is None else [int(m) for m in microbatches]
        self._set = set_frequency
        self._sync = synchronize
        self._clock = clock
        self._pos = 0
        self._in_step = False
        self._open: tuple[str, float] | None = None
        self.steps = 0
        self._times: list[tuple[str, int, float]] = []
        self.last_step_times: list[tuple[str, int, float]] = []

    def on_step_begin(self) -> None:
        if self._in_step:
            raise ScheduleError("on_step_begin called twice without on_step_end")
        self._in_step = True
        self._pos = 0
        self._times = []

    def on_instruction_begin(self, name: str, microbatch: int | None = None) -> None:
        if not self._in_step:
            raise ScheduleError(f"on_instruction_begin({name!r}) outside a step; call on_step_begin first")
        if self._pos >= len(self.schedule):
            raise ScheduleError(f"the plan has {len(self.schedule)} instructions per step; the engine ran one more ({name!r})")
        want, mhz = self.schedule[self._pos]
        if want != name:
            raise ScheduleError(f"instruction {self._pos} of the step is {want!r} in the plan, but the engine ran {name!r}")
        if microbatch is not None and self.microbatches is not None and self.microbatches[self._pos] != microbatch:
            raise ScheduleError(
                f"instruction {self._pos} of the step is the {want} of microbatch "
                f"{self.microbatches[self._pos]} in the plan, but the engine ran microbatch {microbatch}"
            )
        if self._sync is not None:
            self._sync()  # the previous instruction's kernels finish at their own clock
        self._set(mhz)
        self._open = (name, self._clock())

    def on_instruction_end(self, name: str) -> None:
        if self._open is None or self._open[0] != name:
            raise ScheduleError(f"on_instruction_end({name!r}) without a matching on_instruction_begin")
        if self._sync is not None:
            self._sync()
        _, started = self._open
        self._times.append((name, self.schedule[self._pos][1], self._clock() - started))
        self._open = None
        self._pos += 1

    def abort_step(self) -> None:
        """Forget a step the engine left half-done (it raised): the next ``on_step_begin`` starts afresh."""
        self._in_step = False
        self._open = None
        self._pos = 0
        self._times = []

    def on_step_end(self) -> None:
        if self._pos != len(self.schedule):
            raise ScheduleError(f"the step ended after {self._pos} of the plan's {len(self.schedule)} instructions")
        self._in_step = False
        self.steps += 1
        self.last_step_times = self._times

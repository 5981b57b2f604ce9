"""The ``perseus-stage`` profiler: a pipeline stage's instruction profile, measured by training it.

    [device]
    plugin = "nvml"

    [profiler]
    plugin = "perseus-stage"
    step = "pipeline.py:make_step"   # make_step(hooks) or make_step(hooks, devices) -> one training step
    stage = 0
    warmup_steps = 1                 # per clock, not measured
    profile_steps = 3                # per clock, measured
    min_frequency = 0                # MHz; default: every clock the device supports
    stop_after_rises = 0             # stop once every instruction's energy rose this many clocks in a row
    thermally_stable = true          # warm up each clock until power and temperature settle (at most max_warmup_steps more)
    save_to = "profile-stage0.csv"   # relative to the job file's folder

The step factory receives an :class:`OnlineProfiler`, whose hooks the step
calls around every forward and backward (``on_instruction_begin("forward")``
...) and around the step itself. The part runs steps until the sweep is done,
then writes the profile CSV (``--output DIR`` gets ``DIR/profile.csv`` too).
Each rank of a multi-process pipeline profiles its own stage; their rows can
be concatenated, or uploaded to the plan server (``PlanClient.upload_profile``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from zeus_core import BuildContext, ClockControl, JobSummary, RunFailed, load_callable
from zeus_plugins_perseus.options import StageProfilerOptions
from zeus_plugins_perseus.runtime.hooks import ScheduleError
from zeus_plugins_perseus.runtime.profiler import OnlineProfiler


class StageProfiler:
    """Profiler part: sweeps the job device's SM clocks while a stage trains; writes the profile CSV."""

    needs_device = (ClockControl,)

    def __init__(self, options: StageProfilerOptions, context: BuildContext, step_factory: Callable[..., Any] | None = None) -> None:
        self.options = options
        self.devices = context.parts.get("device")
        if self.devices is None:
            raise ValueError("perseus-stage needs a [device] section: the GPU whose clocks are swept")
        self.context = context
        self.step_factory = step_factory or load_callable(options.step, context.job_dir)
        o = options
        self.profiler = OnlineProfiler(
            self.devices,
            o.stage,
            frequencies=o.frequencies or None,
            warmup_steps=o.warmup_steps,
            profile_steps=o.profile_steps,
            stop_after_rises=o.stop_after_rises,
            min_frequency=o.min_frequency,
            names=o.devices or None,
            thermally_stable=o.thermally_stable,
            max_warmup_steps=o.max_warmup_steps,
        )
        self.saved: Path | None = None

    def plan(self, ctx: BuildContext) -> None:
        p, o = self.profiler, self.options
        try:
            takes_devices = len(inspect.signature(self.step_factory).parameters) >= 2
        except (TypeError, ValueError):
            takes_devices = False
        calls = 0
        try:
            step = self.step_factory(p, self.devices) if takes_devices else self.step_factory(p)
            while not p.done:
                # the sweep's steps so far planned: a step that never calls the hooks is caught after as many
                # steps as without thermally_stable, not after every warm-up step it might have added
                if calls >= (o.max_steps or p.planned_steps + 1):
                    raise RunFailed(
                        f"perseus-stage: the sweep was not done after {calls} steps; the step must "
                        "call on_step_begin()/on_step_end() of the hooks it was given"
                    )
                step()
                calls += 1
        except ScheduleError as e:
            raise RunFailed(f"perseus-stage: {e}") from e
        except RunFailed:
            raise
        except Exception as e:
            raise RunFailed(f"perseus-stage: a step failed at {p.frequency} MHz: {type(e).__name__}: {e}") from e
        finally:
            p.close()  # resets the clocks even when a step failed
        if o.save_to:
            self.saved = p.to_csv(self.context.resolve_path(o.save_to))

    def write_outputs(self, out_dir: Path, job: JobSummary) -> list[Path]:
        if not self.profiler.measurements():
            return []
        return [self.profiler.to_csv(Path(out_dir) / "profile.csv")]

    def summary(self, job: JobSummary) -> dict:
        m = self.profiler.measurements()
        return {
            "stage": self.options.stage,
            "frequencies": sorted({f for _, f, _, _ in m}, reverse=True),
            "steps": self.profiler.steps,
            "saved_to": None if self.saved is None else str(self.saved),
            "simulated": self.profiler.simulated_drivers,  # the simulated drivers it measured on (empty: real hardware)
        }

    def report(self, console: Console, job: JobSummary) -> None:
        m = self.profiler.measurements()
        if not m:
            return
        table = Table(title=f"perseus-stage: stage {self.options.stage}, ms and J per microbatch")
        table.add_column("MHz", justify="right")
        insts = sorted({i for i, _, _, _ in m})
        for i in insts:
            table.add_column(i, justify="right")
        by = {(i, f): (t, e) for i, f, t, e in m}
        for f in sorted({f for _, f, _, _ in m}, reverse=True):
            cells = [f"{by[i, f][0] * 1e3:,.2f} ms / {by[i, f][1]:,.3f} J" if (i, f) in by else "" for i in insts]
            table.add_row(str(f), *cells)
        console.print(table)
        simulated = self.profiler.simulated_drivers
        if simulated:
            console.print(
                f"[yellow]measured on a SIMULATED GPU[/] ({escape(', '.join(f'${k}' for k in simulated))}): the times are "
                "this machine's, the energies the simulated driver's, so a plan made from this profile shows the pipeline "
                "at work, not a real GPU's saving (the profile's column 'simulated' says so to the planner)",
                highlight=False,
                soft_wrap=True,
            )

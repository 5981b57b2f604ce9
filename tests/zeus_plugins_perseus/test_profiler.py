"""The online profiler and the ``perseus-stage`` profiler part, on a GPU whose time and energy follow its clock."""

import sys
import types
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from zeus_core import BuildContext
from zeus_core.engine.registry import load as load_plugins

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perseus_fakes import VirtualGPU, stage_step  # noqa: E402

from zeus_plugins_perseus.options import StageProfilerOptions  # noqa: E402
from zeus_plugins_perseus.planner import plan_frontier  # noqa: E402
from zeus_plugins_perseus.profile import InstructionProfile, read_profile  # noqa: E402
from zeus_plugins_perseus.runtime import OnlineProfiler, ScheduleError  # noqa: E402
from zeus_plugins_perseus.schedule import one_f_one_b_order  # noqa: E402
from zeus_plugins_perseus.stage_profiler import StageProfiler  # noqa: E402


def sweep(profiler, device, stage=0, stages=2, mbs=3):
    step = stage_step(profiler, device, one_f_one_b_order(stages, mbs, stage))
    while not profiler.done:
        step()


def test_sweep_measures_every_instruction_at_every_clock(tmp_path):
    gpu = VirtualGPU()
    p = OnlineProfiler(gpu, stage=1, warmup_steps=1, profile_steps=2, monitor=None)
    assert p.total_steps == 12
    sweep(p, gpu, stage=1)
    assert p.steps == 12 and gpu.log == [1410, 1200, 1000, 800, "reset"]
    rows = p.rows()
    assert [(s, i, f) for s, i, f, _, _ in rows] == [(1, i, f) for f in (1410, 1200, 1000, 800) for i in ("backward", "forward")]
    for _, inst, f, t, e in rows:  # the warm-up step's slow first instruction is not in the means
        want_t, want_e = VirtualGPU.expected(inst, f)
        assert t == pytest.approx(want_t, rel=1e-12) and e == pytest.approx(want_e, rel=1e-12)
    path = p.to_csv(tmp_path / "profile.csv")
    assert path.read_text().splitlines()[0] == "stage,instruction,frequency,time,energy"
    back = read_profile(path)
    assert np.allclose(back.get(1, "forward").time, [r[3] for r in rows if r[1] == "forward"])
    # hooks are inert after the sweep: training goes on at the default clocks
    step = stage_step(p, gpu, one_f_one_b_order(2, 3, 1))
    step()
    assert gpu.log[-1] == "reset" and p.steps == 13


def test_without_warmup_the_transient_is_measured():
    gpu = VirtualGPU(clocks=(1410, 1000))
    p = OnlineProfiler(gpu, stage=0, warmup_steps=0, profile_steps=1)
    sweep(p, gpu, stages=1, mbs=1)  # one forward + one backward per step: the forward is cold
    fwd = dict((f, t) for i, f, t, _ in p.measurements() if i == "forward")
    assert fwd[1410] == pytest.approx(1.5 * VirtualGPU.expected("forward", 1410)[0])


def test_stops_after_energy_rises_and_profile_plans():
    clocks = (1410, 1200, 1000, 800, 600, 400, 300, 200)
    gpu = VirtualGPU(clocks)
    p = OnlineProfiler(gpu, stage=0, warmup_steps=1, profile_steps=1, stop_after_rises=2)
    sweep(p, gpu)
    # energy per instruction falls down to 600 MHz, rises at 400 and 300: stop there, 200 is never locked
    assert gpu.log == [1410, 1200, 1000, 800, 600, 400, 300, "reset"]
    freqs = sorted({f for _, f, _, _ in p.measurements()}, reverse=True)
    assert freqs == [1410, 1200, 1000, 800, 600, 400, 300]
    # two stages profiled online make a profile the planner takes
    gpu1 = VirtualGPU(clocks)
    p1 = OnlineProfiler(gpu1, stage=1, stop_after_rises=2)
    sweep(p1, gpu1, stage=1)
    ps = plan_frontier(InstructionProfile.from_rows(p.rows() + p1.rows()), 2, 3, "1f1b", 0.001, 60.0)
    assert len(ps) > 1 and ps.frequencies.min() < 1410


def test_engine_mistakes_are_reported():
    gpu = VirtualGPU()
    p = OnlineProfiler(gpu, stage=0)
    with pytest.raises(ScheduleError, match="outside a step"):
        p.on_instruction_begin("forward")
    p.on_step_begin()
    p.on_instruction_begin("forward")
    with pytest.raises(ScheduleError, match="without a matching"):
        p.on_instruction_end("backward")
    with pytest.raises(ValueError, match="cannot lock and reset"):
        OnlineProfiler(types.SimpleNamespace(names=["gpu0"]), stage=0, frequencies=[1000])
    with pytest.raises(ValueError, match="no SM clock to profile at or above min_frequency = 2000"):
        OnlineProfiler(gpu, stage=0, min_frequency=2000)
    empty = OnlineProfiler(VirtualGPU(), stage=0, warmup_steps=0)
    empty.on_step_begin()
    with pytest.raises(ScheduleError, match="no instruction was measured at 1410 MHz"):
        for _ in range(3):
            empty.on_step_end()
            empty.on_step_begin()


STEP_FILE = """
import sys
sys.path.insert(0, {here!r})
from perseus_fakes import stage_step
from zeus_plugins_perseus.schedule import one_f_one_b_order

def make_step(hooks, devices):
    return stage_step(hooks, devices, one_f_one_b_order(4, 4, 2))

def forgetful(hooks):
    return lambda: None
"""


def test_perseus_stage_part_writes_the_profile(tmp_path):
    (tmp_path / "pipe.py").write_text(STEP_FILE.format(here=str(Path(__file__).resolve().parent)))
    gpu = VirtualGPU(clocks=(1410, 1005, 600))
    ctx = BuildContext.outside_job(Console(), load_plugins(entry_points=False))  # paths resolve against tmp_path, the cwd
    ctx.parts["device"] = gpu
    opts = StageProfilerOptions(step="pipe.py:make_step", stage=2, profile_steps=2, save_to="out/stage2.csv")
    part = StageProfiler(opts, ctx)
    part.plan(ctx)
    prof = read_profile(tmp_path / "out" / "stage2.csv")
    assert prof.stages == [2] and list(prof.get(2, "backward").frequency) == [1410, 1005, 600]
    assert gpu.log[-1] == "reset"
    assert part.summary(None)["frequencies"] == [1410, 1005, 600]
    assert [p.name for p in part.write_outputs(tmp_path / "o", None)] == ["profile.csv"]

    stuck = StageProfiler(StageProfilerOptions(step="pipe.py:forgetful", stage=0), ctx)
    with pytest.raises(Exception, match="not done after 13 steps; the step must call on_step_begin"):
        stuck.plan(ctx)
    with pytest.raises(ValueError, match="defines no function 'nope'"):
        StageProfiler(StageProfilerOptions(step="pipe.py:nope"), ctx)
    with pytest.raises(ValueError, match="needs a \\[device\\]"):
        StageProfiler(opts, BuildContext.outside_job(Console(), load_plugins(entry_points=False)))


def test_registered_as_profiler():
    from zeus_core.engine import registry

    assert "perseus-stage" in registry.load().names("profiler")

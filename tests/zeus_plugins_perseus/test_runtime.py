"""Frequency controller, instruction hooks, and a real 2-process 1F1B pipeline on CPU."""

import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # perseus_fakes must be importable in the controller's spawned process

from perseus_fakes import FakeClockDevice, locked, log, two_stage_rows  # noqa: E402

from zeus_plugins_perseus.planner import plan_frontier  # noqa: E402
from zeus_plugins_perseus.profile import InstructionProfile  # noqa: E402
from zeus_plugins_perseus.runtime import FrequencyController, PerseusHooks, ScheduleError, load_stage_schedule  # noqa: E402
from zeus_plugins_perseus.runtime.controller import ControllerError  # noqa: E402


def test_controller_locks_and_resets_on_close(tmp_path):
    state = str(tmp_path / "dev.json")
    with FrequencyController(functools.partial(FakeClockDevice, state)) as c:
        c.set_frequency(1000)
        assert locked(state) == 1000
        c.set_frequency(1000)  # unchanged: no second driver call
        c.set_frequency(800)
        assert locked(state) == 800
        with pytest.raises(ControllerError, match="not a supported SM clock"):
            c.set_frequency(999)
        assert c.process.is_alive()
    assert locked(state) is None
    assert log(state) == [1000, 800, "reset"]


def test_controller_resets_on_sigterm(tmp_path):
    state = str(tmp_path / "dev.json")
    c = FrequencyController(functools.partial(FakeClockDevice, state))
    c.set_frequency(1200)
    os.kill(c.process.pid, signal.SIGTERM)
    c.process.join(20)
    assert locked(state) is None and log(state)[-1] == "reset"
    c.close()


def test_controller_resets_when_training_process_dies(tmp_path):
    state = tmp_path / "dev.json"
    code = (
        f"import sys, functools, os; sys.path.insert(0, {str(HERE)!r})\n"
        "from perseus_fakes import FakeClockDevice\n"
        "from zeus_plugins_perseus.runtime import FrequencyController\n"
        "if __name__ == '__main__':\n"
        f"    c = FrequencyController(functools.partial(FakeClockDevice, {str(state)!r}))\n"
        "    c.set_frequency(1000)\n"
        "    print('locked', flush=True)\n"
        "    os.kill(os.getpid(), 9)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "locked" in p.stdout, p.stderr
    deadline = time.monotonic() + 20
    while locked(str(state)) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert locked(str(state)) is None


def test_controller_refuses_device_without_clock_control(tmp_path):
    with pytest.raises(ControllerError, match="cannot lock clocks"):
        FrequencyController(functools.partial(dict))


def test_hooks_follow_the_plan_and_reject_deviations():
    set_to = []
    h = PerseusHooks([("forward", 1000), ("backward", 800)], set_to.append)
    for _ in range(2):
        h.on_step_begin()
        for inst in ("forward", "backward"):
            h.on_instruction_begin(inst)
            h.on_instruction_end(inst)
        h.on_step_end()
    assert set_to == [1000, 800, 1000, 800] and h.steps == 2
    assert [(n, f) for n, f, _ in h.last_step_times] == [("forward", 1000), ("backward", 800)]
    h.on_step_begin()
    with pytest.raises(ScheduleError, match="is 'forward' in the plan, but the engine ran 'backward'"):
        h.on_instruction_begin("backward")
    h.on_instruction_begin("forward")
    h.on_instruction_end("forward")
    with pytest.raises(ScheduleError, match="after 1 of the plan's 2 instructions"):
        h.on_step_end()


def test_load_stage_schedule_errors(tmp_path):
    with pytest.raises(ScheduleError, match="no stage 2"):
        load_stage_schedule({"stages": [{}, {}]}, 2)
    with pytest.raises(ScheduleError, match="equally long"):
        load_stage_schedule({"stages": [{"instructions": ["forward"], "frequencies": []}]}, 0)


def two_stage_plan(tmp_path, mbs):
    """A real Perseus plan with mixed clocks: stage 1 is lighter, so it can run slower."""
    ps = plan_frontier(InstructionProfile.from_rows(two_stage_rows()), 2, mbs, "1f1b", 0.001, 60.0)
    k = len(ps) // 2
    path = ps.write_plan(k, tmp_path / "plan.json")
    assert len(np.unique(ps.frequencies[k])) > 1
    return path


def test_two_process_1f1b_pipeline_hits_every_planned_clock(tmp_path):
    torch = pytest.importorskip("torch")  # noqa: F841
    mbs, steps = 4, 2
    plan = two_stage_plan(tmp_path, mbs)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [
        subprocess.Popen([sys.executable, str(HERE / "pipeline_worker.py"), str(r), "2", str(tmp_path / "store"),
                          str(tmp_path), str(plan), str(mbs), str(steps)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for r in range(2)
    ]
    for p in procs:
        out, _ = p.communicate(timeout=180)
        assert p.returncode == 0, out
    for r in range(2):
        got = json.loads((tmp_path / f"rank{r}.json").read_text())
        want = load_stage_schedule(plan, r)
        # every instruction, in order, ran at its planned clock, step after step
        assert [(i, f) for i, _, f in got["seen"]] == want * steps
        assert got["after"] is None  # the GPU was reset
        assert log(str(tmp_path / f"device{r}.json"))[-1] == "reset"
    losses = json.loads((tmp_path / "rank1.json").read_text())["losses"]
    assert len(losses) == mbs * steps and all(np.isfinite(losses))

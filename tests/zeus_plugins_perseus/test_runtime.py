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

from perseus_fakes import FakeClockDevice, locked, log, nvml_clocks, nvml_device, two_stage_rows  # noqa: E402

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
        assert c.process.poll() is None
    assert locked(state) is None
    assert log(state) == [1000, 800, "reset"]


def test_controller_resets_on_sigterm(tmp_path):
    state = str(tmp_path / "dev.json")
    c = FrequencyController(functools.partial(FakeClockDevice, state))
    c.set_frequency(1200)
    os.kill(c.process.pid, signal.SIGTERM)
    c.process.wait(20)
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


def journal_keys():
    from zeus_core import store

    with store.journal() as j:
        return [e.key for e in j.journal_entries()]


def test_controller_on_nvml_holds_the_memory_clock_at_max_while_the_sm_clock_is_locked(nvml_driver):
    from zeus_plugins_nvml.fake_pynvml import FakeGpu

    # gpu1's board refuses memory-clock locks (NotSupported): it runs with the SM clock locked alone
    driver = nvml_driver([FakeGpu(mem_clocks=[877, 1215]), FakeGpu(memory_clock_lock=False)])
    with FrequencyController(functools.partial(nvml_device, driver)) as c:
        assert c.supported_clocks[0] == 1410 and 1005 in c.supported_clocks
        assert nvml_clocks(driver, 0) == (None, None)
        c.set_frequency(1005)
        assert nvml_clocks(driver, 0) == (1005, 1215) and nvml_clocks(driver, 1) == (1005, None)
        c.set_frequency(810)
        assert nvml_clocks(driver, 0) == (810, 1215) and nvml_clocks(driver, 1) == (810, None)
        assert sorted(k.rsplit(":", 1)[1] for k in journal_keys()) == ["locked_clocks", "locked_clocks", "locked_memory_clocks"]
    assert nvml_clocks(driver, 0) == (None, None) and nvml_clocks(driver, 1) == (None, None)
    assert journal_keys() == []


NEXT_ZEUS_START = (
    "import sys\n"
    "from zeus_plugins_nvml import fake_pynvml\n"
    "fake_pynvml.install(sys.argv[1])\n"
    "from zeus_core.cli import main\n"
    "main(['plugins', '--json'])\n"
)


def test_sigkilled_controller_leaves_clocks_the_next_zeus_start_resets(nvml_driver):
    driver = nvml_driver(2)
    c = FrequencyController(functools.partial(nvml_device, driver))
    c.set_frequency(1200)
    os.kill(c.process.pid, signal.SIGKILL)  # nothing in the controller runs: only the journal knows
    c.process.wait(20)
    c.close()
    assert [nvml_clocks(driver, i) for i in range(2)] == [(1200, 1215)] * 2
    assert len(journal_keys()) == 4
    env = dict(os.environ, ZEUS_DISABLED_PLUGINS="torch")
    r = subprocess.run([sys.executable, "-c", NEXT_ZEUS_START, driver], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("locked_memory_clocks to None") == 2 and r.stderr.count("locked_clocks to None") == 2
    assert [nvml_clocks(driver, i) for i in range(2)] == [(None, None)] * 2
    assert journal_keys() == []


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


def run_ranks(tmp_path, source_args, mbs, steps, world=2, extra_env=None, nvml=None):
    """Start the ranks of the pipeline worker, wait for them, return their records."""
    env = dict(os.environ, OMP_NUM_THREADS="1", **(extra_env or {}))
    common = ["--world", str(world), "--store", str(tmp_path / "store"), "--out", str(tmp_path),
              "--microbatches", str(mbs), "--steps", str(steps), *source_args, *(["--nvml", nvml] if nvml else [])]
    procs = [subprocess.Popen([sys.executable, str(HERE / "pipeline_worker.py"), "--rank", str(r), *common],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(world)]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    for r, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, "\n".join(f"--- rank {k} (exit {q.returncode}):\n{o}" for k, (q, o) in enumerate(zip(procs, outs)))
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]


def test_two_process_1f1b_pipeline_hits_every_planned_clock(tmp_path):
    torch = pytest.importorskip("torch")  # noqa: F841
    mbs, steps = 4, 2
    plan = two_stage_plan(tmp_path, mbs)
    got = run_ranks(tmp_path, ["--plan", str(plan)], mbs, steps)
    for r in range(2):
        want = load_stage_schedule(plan, r)
        # every instruction, in order, ran at its planned clock, step after step
        assert [(i, f) for i, _, f in got[r]["seen"]] == want * steps
        assert got[r]["after"] is None  # the GPU was reset
        assert log(str(tmp_path / f"device{r}.json"))[-1] == "reset"
    losses = got[1]["losses"]
    assert len(losses) == mbs * steps and all(np.isfinite(losses))


def free_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_process_1f1b_pipeline_with_plans_from_the_plan_server(tmp_path, nvml_driver):
    """`zeus perseus serve` on loopback with a token; ranks register, fetch, train on the nvml device, report."""
    pytest.importorskip("torch")
    pytest.importorskip("uvicorn")
    from zeus_plugins_perseus.client import PlanClient

    mbs, steps, blocking = 4, 2, 60.0
    profile = InstructionProfile.from_rows(two_stage_rows())
    prof_csv = profile.to_csv(tmp_path / "profile.csv")
    ps = plan_frontier(profile, 2, mbs, "1f1b", 0.001, blocking)
    deadline = float(ps.emulated_time_s[len(ps) // 2])
    want_plan = ps.plan_json(ps.choose(deadline_s=deadline))
    want = [load_stage_schedule(want_plan, r) for r in range(2)]
    assert len({f for w in want for _, f in w}) > 1  # mixed clocks: a wrong stage or order shows
    from zeus_plugins_nvml.fake_pynvml import FakeGpu

    driver = nvml_driver([FakeGpu(graphics_clocks=[1410, 1200, 1000, 800]) for _ in range(2)])
    port, token = free_port(), "tok-e2e-7f3a"
    env = dict(os.environ, ZEUS_PERSEUS_TOKEN=token)
    server = subprocess.Popen(
        [sys.executable, "-m", "zeus_core.cli", "perseus", "serve", "--port", str(port), "--profile", str(prof_csv),
         "--blocking-power-w", str(blocking), "--log-level", "warning"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        got = run_ranks(tmp_path, ["--server", url, "--deadline", repr(deadline)], mbs, steps,
                        extra_env={"ZEUS_PERSEUS_TOKEN": token}, nvml=driver)
        job_id = got[0]["job_id"]
        with PlanClient(url, token=token, timeout_s=10) as c:
            status = c.status(job_id)
            merged = c.profile_csv(job_id).splitlines()
    finally:
        server.terminate()
        server_out, _ = server.communicate(timeout=20)
    assert "Traceback" not in server_out, server_out
    assert got[1]["job_id"] == job_id and status["ranks"] == [0, 1]
    for r in range(2):
        assert [tuple(x) for x in got[r]["schedule"]] == want[r]  # the server's plan is the one chosen by deadline
        # every instruction, in order, ran at its planned SM clock with the memory clock held at its max
        assert [(i, tuple(c)) for i, _, c in got[r]["seen"]] == [(i, (f, 1215)) for i, f in want[r]] * steps
        assert got[r]["after"] == [None, None]  # SM and memory clocks of the GPU were reset
        assert got[r]["uploaded"]["stage"] == r
    # both stages reported their results: whichever rank uploaded last completed the job's profile
    assert status["profile_complete"] and status["uploaded_rows"] == len(merged) - 1
    assert sorted(got[r]["uploaded"]["profile_complete"] for r in range(2)) == [False, True]
    # the results are on the server: one row per (stage, instruction, clock) the plan used, positive time and energy
    assert merged[0] == "stage,instruction,frequency,time,energy"
    rows = [line.split(",") for line in merged[1:]]
    assert sorted((int(s), i, int(f)) for s, i, f, _, _ in rows) == sorted(
        {(r, i, f) for r in range(2) for i, f in want[r]})
    assert all(float(t) > 0 and float(e) > 0 for *_, t, e in rows)
    assert journal_keys() == []  # nothing left for the next start to restore

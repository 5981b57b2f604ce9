"""Frequency controller and instruction hooks (real pipelines under them: test_pipelining.py)."""

import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # perseus_fakes must be importable in the controller's spawned process

from perseus_fakes import FakeClockDevice, amd_device, journal_keys, locked, log, nvml_clocks, nvml_device  # noqa: E402

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
    "from zeus_core.cli.main import main\n"
    "main(['plugins', '--json'])\n"
)


def test_controller_on_amd_gpus_holds_the_gfx_clock_under_the_plans_frequency(tmp_path, monkeypatch):
    """A plan's frequency on an AMD GPU is the ceiling of its GFX clock's soft limits (amdsmi takes ranges)."""
    from zeus_plugins_amdsmi import fake_amdsmi
    from zeus_plugins_amdsmi.fake_amdsmi import FakeAmdGpu

    for var in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    driver = str(fake_amdsmi.create(tmp_path / "amd.json", [FakeAmdGpu(), FakeAmdGpu(sys_clock_range_mhz=[800, 1700])], privileged=True))

    def gfx() -> list:
        return [g["sys_clock_lock_mhz"] for g in fake_amdsmi.read_state(driver)["gpus"]]

    with FrequencyController(functools.partial(amd_device, driver)) as c:
        assert c.supported_clocks[0] == 1695 and c.supported_clocks[-1] == 810  # the multiples of 15 MHz both GPUs take
        c.set_frequency(1395)
        assert gfx() == [[500, 1395], [800, 1395]]
        c.set_frequency(1095)
        assert gfx() == [[500, 1095], [800, 1095]]
    assert gfx() == [[500, 2100], [800, 1700]] and journal_keys() == []


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

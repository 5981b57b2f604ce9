"""The nvml device against the simulated driver: energy sources, control, errors, restore."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from zeus_test_helpers import timed_window

from zeus_core import DeviceError, Monitor
from zeus_core.engine.registry import load
from zeus_core.journal import Journal, journal_path, restore_pending
from zeus_plugins_nvml import fake_pynvml
from zeus_plugins_nvml import plugin as nvml_plugin
from zeus_plugins_nvml.control import restore_setting
from zeus_plugins_nvml.device import NvmlGpus
from zeus_plugins_nvml.fake_pynvml import FakeGpu
from zeus_plugins_nvml.options import NvmlOptions

REPO = Path(__file__).resolve().parents[2]


def journal_keys():
    with Journal(journal_path()) as j:
        return [e[2] for e in j.entries()]


def test_counter_energy_is_the_drivers_millijoules_in_joules(fake_nvml):
    nvml = fake_nvml([FakeGpu(demand_w=300.0), FakeGpu(demand_w=150.0)])
    with NvmlGpus() as dev:
        assert dev.energy_sources == {"gpu0": "counter", "gpu1": "counter"}
        assert dev.max_power_w == 800.0
        e = dev.read_energy()
        raw = nvml.nvmlDeviceGetTotalEnergyConsumption(dev.gpus[0].handle)
        assert raw / 1000.0 - e["gpu0"] < 0.5  # mJ -> J, read a moment apart at 300 W
        mon = Monitor(dev)
        m, elapsed = timed_window(lambda: mon.begin_window("w"), lambda: mon.end_window("w"), 0.2)
        # each between the window's shortest and longest length (a loaded machine can stretch a call between
        # the monitor's clock and its energy reading: 4 ms is 2% of 0.2 s)
        assert m.time == elapsed.drawn(1.0)
        assert m.energy["gpu0"] == elapsed.drawn(300.0, rel=0.02)
        assert m.energy["gpu1"] == elapsed.drawn(150.0, rel=0.02)
        assert m.total_energy == pytest.approx(m.energy["gpu0"] + m.energy["gpu1"])
        assert dev.read_power() == {"gpu0": 300.0, "gpu1": 150.0}


def test_counter_only_grows_across_load_changes(fake_nvml):
    fake_nvml([FakeGpu(demand_w=300.0)])
    with NvmlGpus() as dev:
        seen = [dev.read_energy()["gpu0"]]
        for w in (100.0, 400.0, 0.0):
            fake_pynvml.set_demand(0, w)
            seen.append(dev.read_energy()["gpu0"])
        assert seen == sorted(seen)


def test_old_gpu_is_polled_in_a_process_that_stops_with_the_device(fake_nvml, monkeypatch):
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    fake_nvml([FakeGpu(name="Tesla P100-PCIE-16GB", arch=4, demand_w=200.0), FakeGpu(demand_w=100.0)])
    dev = NvmlGpus(NvmlOptions(poll_interval_s=0.02))
    try:
        assert dev.energy_sources == {"gpu0": "polling", "gpu1": "counter"}
        proc = dev._poller.proc
        mon = Monitor(dev)
        mon.begin_window("w")
        t0 = time.monotonic()
        time.sleep(0.5)
        t_step = time.monotonic()
        fake_pynvml.set_demand(0, 100.0)  # the load halves mid-window
        time.sleep(0.5)
        m = mon.end_window("w")
        t1 = time.monotonic()
        assert m.sources["gpu0"] == "polling"
        truth = 200.0 * (t_step - t0) + 100.0 * (t1 - t_step)
        assert m.energy["gpu0"] == pytest.approx(truth, rel=0.1)
        assert dev._poller.samples > 20
    finally:
        dev.close()
    assert proc.poll() is not None  # the poller ended with the device
    assert proc.stdout.closed and proc.stderr.closed and proc.stdin.closed  # no pipe left to the garbage collector


def test_poller_never_outlives_a_sigkilled_parent(fake_nvml, tmp_path):
    fake_nvml([FakeGpu(arch=4)])
    script = textwrap.dedent(
        """
        import sys, time
        from zeus_plugins_nvml import fake_pynvml
        fake_pynvml.install(sys.argv[1])
        from zeus_plugins_nvml.device import NvmlGpus
        dev = NvmlGpus()
        print(dev._poller.proc.pid, flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script, os.environ[fake_pynvml.ENV]], stdout=subprocess.PIPE, text=True)
    poller_pid = int(parent.stdout.readline())
    os.kill(poller_pid, 0)  # running
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{poller_pid}/stat") as f:
                if f.read().split(") ")[1].startswith("Z"):
                    break  # exited; only its zombie remains until init reaps it
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        os.kill(poller_pid, signal.SIGKILL)
        pytest.fail("the poller outlived its SIGKILLed parent")


def test_energy_counter_required_but_missing_names_volta(fake_nvml):
    fake_nvml([FakeGpu(name="Tesla K80", arch=2)])
    with pytest.raises(DeviceError, match=r"gpu0 \(Tesla K80, GPU-.*\) has no energy counter .*from Volta on"):
        NvmlGpus(NvmlOptions(energy="counter"))


def test_no_driver_says_what_to_use_instead(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml)
    monkeypatch.delenv(fake_pynvml.ENV, raising=False)
    with pytest.raises(DeviceError, match=r'no usable NVIDIA driver.*"rapl" or "cpu-estimate"'):
        NvmlGpus()


def test_setters_without_permission_name_the_fix_and_change_nothing(fake_nvml):
    fake_nvml(1, privileged=False)
    with NvmlGpus() as dev:
        with pytest.raises(
            DeviceError, match=r"cannot set the power limit of gpu0 .*Insufficient Permissions.*CAP_SYS_ADMIN.*privileged helper"
        ):
            dev.set_power_limit(250)
        with pytest.raises(
            DeviceError, match=r"cannot lock the memory clock \(to 1215 MHz, done before the SM clock\) of gpu0.*CAP_SYS_ADMIN"
        ):
            dev.lock_clocks(1005)
        assert journal_keys() == []
    g = fake_pynvml.read_state()["gpus"][0]
    assert g["locked_clocks"] is None and g["locked_mem_clocks"] is None
    assert fake_pynvml.read_state()["gpus"][0]["limit_w"] == 400.0


def test_power_limit_is_journaled_and_restored_on_close(fake_nvml):
    fake_nvml(2, privileged=True)
    dev = NvmlGpus()
    assert dev.power_limit_range() == (100.0, 400.0)
    with pytest.raises(ValueError, match=r"power limits outside their GPU's range: gpu0 450 W \(range 100 to 400 W\); gpu1 450"):
        dev.set_power_limit(450)
    dev.set_power_limit(175)
    dev.set_power_limit(150)  # the journal keeps the first original
    assert dev.power_limit() == 150.0
    state = fake_pynvml.read_state()
    assert [g["limit_w"] for g in state["gpus"]] == [150.0, 150.0]
    assert len(journal_keys()) == 2
    dev.set_power_limits({"gpu1": 300})
    assert dev.power_limits() == {"gpu0": 150.0, "gpu1": 300.0}
    assert dev.power_limit() == 225.0
    with pytest.raises(ValueError, match="no GPU named gpu7"):
        dev.set_power_limits({"gpu7": 300})
    dev.close()
    assert [g["limit_w"] for g in fake_pynvml.read_state()["gpus"]] == [400.0, 400.0]
    assert journal_keys() == []


def test_clocks_from_the_supported_list_locked_and_reset(fake_nvml):
    fake_nvml(1, privileged=True)
    with NvmlGpus() as dev:
        clocks = dev.supported_clocks()
        assert clocks[0] == 1410 and clocks == sorted(clocks, reverse=True)
        with pytest.raises(ValueError, match=r"1000 MHz is not a supported SM clock of gpu0 .*nearest: 990, 1005"):
            dev.lock_clocks(1000)
        dev.lock_clocks(1005)
        g = fake_pynvml.read_state()["gpus"][0]
        assert g["locked_clocks"] == [1005, 1005]
        assert g["locked_mem_clocks"] == [1215, 1215]  # the memory clock is held at its max with the SM clock
        uuid = dev.gpus[0].uuid
        assert journal_keys() == [f"gpu:{uuid}:locked_memory_clocks", f"gpu:{uuid}:locked_clocks"]
        dev.lock_clocks(1410)  # per-instruction changes move the SM clock only
        assert fake_pynvml.read_state()["gpus"][0]["locked_mem_clocks"] == [1215, 1215]
        assert len(journal_keys()) == 2
        dev.reset_clocks()
        g = fake_pynvml.read_state()["gpus"][0]
        assert g["locked_clocks"] is None and g["locked_mem_clocks"] is None
        assert journal_keys() == []
        dev.lock_clocks(810)
    g = fake_pynvml.read_state()["gpus"][0]
    assert g["locked_clocks"] is None and g["locked_mem_clocks"] is None  # close() resets both


def test_memory_clock_is_locked_to_the_highest_supported_one(fake_nvml):
    nvml = fake_nvml([FakeGpu(name="NVIDIA A40", mem_clocks=[5001, 7251, 405], graphics_clocks=[1740, 1500, 1005])], privileged=True)
    with NvmlGpus() as dev:
        assert dev.gpus[0].max_memory_clock() == 7251
        dev.lock_clocks(1005)
        assert fake_pynvml.read_state()["gpus"][0]["locked_mem_clocks"] == [7251, 7251]
        assert nvml.nvmlDeviceGetClockInfo(dev.gpus[0].handle, nvml.NVML_CLOCK_MEM) == 7251
        assert dev.gpus[0].memory_clock_lockable is True


@pytest.mark.parametrize(
    "gpu", [FakeGpu(memory_clock_lock=False), FakeGpu(name="Tesla V100-SXM2-16GB", arch=5)], ids=["board-refuses", "volta"]
)
def test_gpu_that_cannot_lock_its_memory_clock_locks_the_sm_clock_alone(fake_nvml, gpu):
    fake_nvml([gpu], privileged=True)
    with NvmlGpus() as dev:
        dev.lock_clocks(1005)
        g = fake_pynvml.read_state()["gpus"][0]
        assert g["locked_clocks"] == [1005, 1005] and g["locked_mem_clocks"] is None
        assert journal_keys() == [f"gpu:{dev.gpus[0].uuid}:locked_clocks"]  # nothing to restore for memory
        assert dev.gpus[0].memory_clock_lockable is False
        dev.reset_clocks()
        assert fake_pynvml.read_state()["gpus"][0]["locked_clocks"] is None
    # resetting a fresh device's clocks (nothing locked by it) also tolerates NotSupported
    with NvmlGpus() as dev:
        dev.reset_clocks()
        assert journal_keys() == []


def test_failed_sm_lock_undoes_the_memory_lock(fake_nvml, monkeypatch):
    nvml = fake_nvml(1, privileged=True)

    def broken(handle, lo, hi):
        raise nvml.NVMLError(nvml.NVML_ERROR_UNKNOWN)

    monkeypatch.setattr(fake_pynvml, "nvmlDeviceSetGpuLockedClocks", broken)
    with NvmlGpus() as dev:
        with pytest.raises(DeviceError, match="cannot lock the SM clock of gpu0 .*NVML error: Unknown Error"):
            dev.lock_clocks(1005)
        assert fake_pynvml.read_state()["gpus"][0]["locked_mem_clocks"] is None
        assert journal_keys() == []


def test_fake_driver_memory_clock_rules(fake_nvml):
    gpus = [FakeGpu(), FakeGpu(memory_clock_lock=False)]
    nvml = fake_nvml(gpus, privileged=False)
    nvml.nvmlInit()
    try:
        h0, h1 = nvml.nvmlDeviceGetHandleByIndex(0), nvml.nvmlDeviceGetHandleByIndex(1)
        with pytest.raises(nvml.NVMLError_NoPermission):
            nvml.nvmlDeviceSetMemoryLockedClocks(h0, 1215, 1215)
        fake_nvml(gpus, privileged=True)  # the same GPUs, now as root
        with pytest.raises(nvml.NVMLError_InvalidArgument):
            nvml.nvmlDeviceSetMemoryLockedClocks(h0, 1000, 1000)  # not a supported memory clock
        with pytest.raises(nvml.NVMLError_NotSupported):
            nvml.nvmlDeviceSetMemoryLockedClocks(h1, 1215, 1215)
        with pytest.raises(nvml.NVMLError_NotSupported):
            nvml.nvmlDeviceResetMemoryLockedClocks(h1)
        nvml.nvmlDeviceSetMemoryLockedClocks(h0, 1215, 1215)
        assert fake_pynvml.read_state()["gpus"][0]["locked_mem_clocks"] == [1215, 1215]
        nvml.nvmlDeviceResetMemoryLockedClocks(h0)
        assert fake_pynvml.read_state()["gpus"][0]["locked_mem_clocks"] is None
    finally:
        nvml.nvmlShutdown()


def test_old_gpu_cannot_lock_clocks(fake_nvml):
    fake_nvml([FakeGpu(arch=4)], privileged=True)
    with NvmlGpus(NvmlOptions(energy="polling")) as dev:
        with pytest.raises(DeviceError, match="does not support this: cannot lock the SM clock"):
            dev.lock_clocks(1005)
        assert journal_keys() == []


CHILD = textwrap.dedent(
    """
    import sys, time
    from zeus_plugins_nvml import fake_pynvml
    fake_pynvml.install(sys.argv[1])
    from zeus_plugins_nvml.device import NvmlGpus
    dev = NvmlGpus()
    dev.set_power_limit(150)
    dev.lock_clocks(1005)
    print("changed", flush=True)
    time.sleep(60)
    """
)


def test_sigkilled_run_is_restored_at_the_next_start(fake_nvml):
    fake_nvml(2, privileged=True)
    child = subprocess.Popen([sys.executable, "-c", CHILD, os.environ[fake_pynvml.ENV]], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "changed"
    child.kill()
    child.wait()
    gpus = fake_pynvml.read_state()["gpus"]
    assert [g["limit_w"] for g in gpus] == [150.0, 150.0]  # a SIGKILL leaves the GPUs changed
    assert [g["locked_mem_clocks"] for g in gpus] == [[1215, 1215]] * 2
    assert len(journal_keys()) == 6  # power limit, memory clock, SM clock per GPU
    restorers = load(extra_plugins=[("nvml", nvml_plugin)], entry_points=False).restorers
    assert restorers["nvml"] is restore_setting
    assert restore_pending(restorers) == 6
    gpus = fake_pynvml.read_state()["gpus"]
    assert [g["limit_w"] for g in gpus] == [400.0, 400.0]
    assert [g["locked_clocks"] for g in gpus] == [None, None]
    assert [g["locked_mem_clocks"] for g in gpus] == [None, None]
    assert journal_keys() == []


def test_crash_restore_of_a_memory_clock_the_gpu_cannot_lock_is_a_no_op(fake_nvml):
    fake_nvml([FakeGpu(memory_clock_lock=False)], privileged=True)
    with Journal(journal_path()) as j:
        j.add("nvml", "gpu:GPU-00000000-fa6e-4e5d-9c1b-00000000a100:locked_memory_clocks", None)
        j._conn.execute("UPDATE journal SET pid = 999999999")
    assert restore_pending({"nvml": restore_setting}) == 1
    assert journal_keys() == []


def test_restore_without_permission_keeps_the_entry(fake_nvml, caplog):
    fake_nvml(1, privileged=False)
    with Journal(journal_path()) as j:
        j.add("nvml", "gpu:GPU-00000000-fa6e-4e5d-9c1b-00000000a100:power_limit", 300000)
        j._conn.execute("UPDATE journal SET pid = 999999999")
    assert restore_pending({"nvml": restore_setting}) == 0
    assert "CAP_SYS_ADMIN" in caplog.text
    assert len(journal_keys()) == 1


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("energy", "sometimes", "energy must be one of 'auto', 'counter', 'polling'"),
        ("poll_interval_s", 0.0001, "poll_interval_s must be between 0.005 and 5.0"),
        ("mig", "slice", "mig must be one of 'error', 'parent'"),
        ("gpus", [], "at least one"),
        ("gpus", [0, 0], "gpus lists 0 twice"),
        ("max_power_w", -3.0, "max_power_w must be positive"),
    ],
)
def test_options_say_the_allowed_values(field, value, message):
    with pytest.raises(ValueError, match=message):
        NvmlOptions(**{field: value})


def test_max_power_option(fake_nvml):
    fake_nvml(2)
    with NvmlGpus(NvmlOptions(max_power_w=250.0)) as dev:
        assert dev.max_power_w == 500.0


def test_zeus_fake_nvml_selects_the_simulated_driver_without_touching_pynvml(tmp_path, monkeypatch, capsys):
    """What examples use on a machine without a GPU: write a state, point $ZEUS_FAKE_NVML at it."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    path = tmp_path / "drv.json"
    monkeypatch.setenv(fake_pynvml.ENV, str(path))
    with pytest.raises(
        DeviceError,
        match=r"simulated NVIDIA driver \$ZEUS_FAKE_NVML=.*drv.json cannot start .*"
        r"python -m zeus_plugins_nvml.fake_pynvml .*drv.json --privileged",
    ):
        NvmlGpus()
    fake_pynvml.main([str(path), "--gpus", "2", "--privileged", "--graphics-clocks", "1005,1410"])
    assert "simulated driver with 2 GPU(s)" in capsys.readouterr().out
    assert sys.modules.get("pynvml") is not fake_pynvml  # selected by the variable, not by a test's swap
    with NvmlGpus() as dev:
        assert dev.names == ["gpu0", "gpu1"] and dev.supported_clocks() == [1410, 1005]
        dev.lock_clocks(1005)
        assert fake_pynvml.read_state(path)["gpus"][1]["locked_clocks"] == [1005, 1005]
    assert fake_pynvml.read_state(path)["gpus"][1]["locked_clocks"] is None


@pytest.mark.parametrize(
    "args, message",
    [
        (["--gpus", "0"], "--gpus must be at least 1"),
        (["--graphics-clocks", "1410,fast"], "--graphics-clocks must be comma-separated integers"),
        (["--graphics-clocks", "0"], "--graphics-clocks needs positive clocks"),
    ],
)
def test_fake_driver_cli_rejects_bad_arguments(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as e:
        fake_pynvml.main([str(tmp_path / "d.json"), *args])
    assert e.value.code == 2 and message in capsys.readouterr().err

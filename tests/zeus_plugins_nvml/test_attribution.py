"""Energy attribution on the nvml device: real processes on a simulated GPU, NVML's per-process samples."""

from __future__ import annotations

import math
import time

import pytest
from process_helpers import assert_alone, assert_split_3_to_1, measure_window, sleeping_processes
from zeus_test_helpers import timed_window

from zeus_core import Monitor
from zeus_plugins_nvml import fake_pynvml
from zeus_plugins_nvml.device import NvmlGpus
from zeus_plugins_nvml.fake_pynvml import FakeGpu
from zeus_plugins_nvml.options import NvmlOptions

procs = pytest.fixture(sleeping_processes, name="procs")


def window(dev, seconds=0.4):
    return measure_window(dev, seconds)


def test_two_processes_sharing_a_gpu_3_to_1_split_its_active_energy_3_to_1(fake_nvml, procs):
    fake_nvml([FakeGpu(demand_w=300.0, idle_w=60.0)])
    a, b = procs("job-a"), procs("job-b")
    fake_pynvml.set_processes(0, [{"pid": a, "sm": 60}, {"pid": b, "sm": 20}])
    with NvmlGpus(NvmlOptions(idle_power_w=60.0)) as dev:
        m = window(dev)
    assert_split_3_to_1(m, a, b, 60.0, "sm")


def test_a_lone_process_gets_all_the_active_energy_and_idle_is_learned_while_the_gpu_was_free(fake_nvml, procs):
    fake_nvml([FakeGpu(demand_w=60.0, idle_w=60.0)])  # nothing runs: the GPU draws its idle power
    with NvmlGpus() as dev:
        free = window(dev, 0.2).attribution["gpu0"]
        assert (free.basis, free.unattributed_j, free.idle_source) == ("none", pytest.approx(free.total_j), "learned")
        pid = procs("alone")
        fake_pynvml.set_demand(0, 250.0)
        fake_pynvml.set_processes(0, [{"pid": pid, "sm": 35}])
        mon = Monitor(dev, target_error=None)
        m, took = timed_window(lambda: mon.begin_window("w"), lambda: mon.end_window("w"), 0.4)
    att = assert_alone(m, pid, 60.0, "sm")
    # 250 W drawn less the learned 60 W idle: the energy and the window's time each lie between its shortest and
    # longest length (the times around the calls), whatever a loaded machine did inside them
    assert 0.99 * (250.0 * took.shortest - 60.0 * took.longest) <= att.active_j <= 1.01 * (250.0 * took.longest - 60.0 * took.shortest)


def test_no_sample_in_the_window_falls_back_to_equal_shares_of_the_holders(fake_nvml, procs):
    """A window shorter than the driver's sampling period has no sample (NVML: Not Found)."""
    nvml = fake_nvml([FakeGpu(demand_w=200.0, process_sample_period_s=3600.0)])
    a, b = procs("a"), procs("b")
    fake_pynvml.set_processes(0, [{"pid": a, "sm": 90}, {"pid": b, "sm": 10}])
    with NvmlGpus(NvmlOptions(idle_power_w=50.0)) as dev:
        with pytest.raises(nvml.NVMLError_NotFound):
            nvml.nvmlDeviceGetProcessUtilization(dev.gpus[0].handle, int(time.time() * 1e6))
        m = window(dev, 0.2)
    att = m.attribution["gpu0"]
    assert att.basis == "equal" and "Not Found" in att.note
    assert [p.active_j for p in att.processes] == [pytest.approx(att.active_j / 2)] * 2


def test_mig_without_per_process_samples_is_flagged_whole_gpu(fake_nvml, procs, monkeypatch):
    nvml = fake_nvml([FakeGpu(demand_w=200.0, mig_slices=["MIG-aaaa", "MIG-bbbb"])])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-aaaa")
    a, b = procs("a"), procs("b")
    fake_pynvml.set_processes(0, [{"pid": a, "sm": 90, "mig": 0}, {"pid": b, "sm": 10, "mig": 1}])
    with NvmlGpus(NvmlOptions(mig="parent", idle_power_w=50.0)) as dev:
        with pytest.raises(nvml.NVMLError_NotSupported):  # the driver's answer on MIG
            nvml.nvmlDeviceGetProcessUtilization(nvml.nvmlDeviceGetMigDeviceHandleByIndex(dev.gpus[0].handle, 0), 0)
        att = window(dev).attribution["gpu0"]
    assert att.whole_gpu and att.basis == "equal" and "MIG" in att.note
    assert {p.pid: p.instance for p in att.processes} == {a: "MIG-aaaa", b: "MIG-bbbb"}
    assert att.processes[0].energy_j == pytest.approx(att.processes[1].energy_j)


def test_mig_per_instance_where_the_driver_samples_each_weighs_by_the_instances_slices(fake_nvml, procs, monkeypatch):
    fake_nvml([FakeGpu(demand_w=200.0, mig_slices=["MIG-aaaa", "MIG-bbbb"], mig_slice_counts=[3, 1], mig_process_utilization=True)])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-bbbb")
    a, b = procs("a"), procs("b")
    # both at 50 % of their own instance: the 3-slice instance's process did 3 times the work
    fake_pynvml.set_processes(0, [{"pid": a, "sm": 50, "mig": 0}, {"pid": b, "sm": 50, "mig": 1}])
    with NvmlGpus(NvmlOptions(mig="parent", idle_power_w=50.0)) as dev:
        att = window(dev).attribution["gpu0"]
    assert (att.scope, att.basis) == ("mig-instance", "sm")
    by_pid = {p.pid: p for p in att.processes}
    assert by_pid[a].active_j == pytest.approx(3 * by_pid[b].active_j)
    assert (by_pid[a].instance, by_pid[b].instance) == ("MIG-aaaa", "MIG-bbbb")


def test_windows_shorter_than_attribute_min_s_carry_none_and_query_nothing(fake_nvml, procs, monkeypatch):
    """Per-step windows: a few ms hold no per-process sample, and the process queries would cost more
    than the rest of the window's end; 0 attributes every window."""
    fake_nvml([FakeGpu()])
    pid = procs("x")
    fake_pynvml.set_processes(0, [{"pid": pid, "sm": 10}])
    queries = []
    listed = fake_pynvml.nvmlDeviceGetComputeRunningProcesses
    monkeypatch.setattr(fake_pynvml, "nvmlDeviceGetComputeRunningProcesses", lambda h: queries.append(h) or listed(h))
    with NvmlGpus() as dev:
        short = Monitor(dev, target_error=None)
        assert short.attribute_min_s == 0.1
        for _ in range(3):
            short.begin_window("step")
            assert short.end_window("step").attribution == {}
        assert queries == []
        assert [p.pid for p in measure_window(dev, 0.15, target_error=None).attribution["gpu0"].processes] == [pid]
        assert len(queries) == 1
        every = Monitor(dev, target_error=None, attribute_min_s=0)
        every.begin_window("step")
        assert [p.pid for p in every.end_window("step").attribution["gpu0"].processes] == [pid]
        for bad in (-1, math.inf, "0.1"):
            with pytest.raises(ValueError, match="attribute_min_s must be a duration in seconds, 0 or more"):
                Monitor(dev, attribute_min_s=bad)


def test_attribution_can_be_turned_off(fake_nvml, procs):
    fake_nvml([FakeGpu()])
    fake_pynvml.set_processes(0, [{"pid": procs("x"), "sm": 10}])
    with NvmlGpus() as dev:
        mon = Monitor(dev, attribute=False)
        mon.begin_window("w")
        assert mon.end_window("w").attribution == {}

"""The nvml group's clock ranges and memory clocks (what zeus-compat's upstream clock API calls):
ranges as NVML takes them, each lock journaled on its own and put back on close."""

from __future__ import annotations

import pytest

from zeus_core import DeviceError
from zeus_core.journal import Journal, journal_path
from zeus_plugins_nvml import fake_pynvml
from zeus_plugins_nvml.device import NvmlGpus
from zeus_plugins_nvml.fake_pynvml import FakeGpu


def journal_keys():
    with Journal(journal_path()) as j:
        return [e[2] for e in j.entries()]


def test_ranges_lock_each_clock_alone_and_close_puts_them_back(fake_nvml):
    fake_nvml([FakeGpu(mem_clocks=[1593, 1215]), FakeGpu(mem_clocks=[1593, 405])], privileged=True)
    with NvmlGpus() as dev:
        assert dev.supported_memory_clocks() == [1593]  # those every GPU supports, in NVML's order
        assert dev.gpus[1].supported_memory_clocks() == [1593, 405]
        assert dev.supported_graphics_clocks(1593)[:2] == [1410, 1395]
        dev.lock_clock_range(900, 1200)
        state = fake_pynvml.read_state()["gpus"]
        assert [g["locked_clocks"] for g in state] == [[900, 1200]] * 2
        assert [g["locked_mem_clocks"] for g in state] == [None, None]  # a range locks the SM clock alone
        uuid = dev.gpus[0].uuid
        assert f"gpu:{uuid}:locked_clocks" in journal_keys() and f"gpu:{uuid}:locked_memory_clocks" not in journal_keys()
        dev.gpus[0].lock_memory_clock_range(1215, 1593)
        assert fake_pynvml.read_state()["gpus"][0]["locked_mem_clocks"] == [1215, 1593]
        dev.gpus[0].reset_sm_clocks()
        g = fake_pynvml.read_state()["gpus"][0]
        assert g["locked_clocks"] is None and g["locked_mem_clocks"] == [1215, 1593]
    state = fake_pynvml.read_state()["gpus"]
    assert [g["locked_clocks"] for g in state] == [None, None] and state[0]["locked_mem_clocks"] is None
    assert journal_keys() == []


def test_range_refusals_name_the_gpu(fake_nvml):
    fake_nvml([FakeGpu(arch=5)], privileged=True)  # Volta: no memory-clock locks
    with NvmlGpus() as dev:
        with pytest.raises(DeviceError, match=r"cannot lock the SM clock of gpu0 .*Invalid Argument"):
            dev.lock_clock_range(1200, 900)
        with pytest.raises(DeviceError, match="does not support this: cannot lock the memory clock"):
            dev.lock_memory_clock_range(1215, 1215)
        with pytest.raises(DeviceError, match="Not Found"):
            dev.supported_graphics_clocks(999)
    assert journal_keys() == []

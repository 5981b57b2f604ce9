"""Upstream's GPU clock API, deprecated camelCase aliases and setting lifetime, on the simulated NVIDIA driver.

Each assertion is upstream's answer (``zeus/device/gpu/nvidia.py`` over NVML): MHz lists as the driver
lists them, NVML's refusals as the ``ZeusGPU*Error`` upstream maps them to, settings made directly
left in place when the process ends.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
from zeus.device import get_gpus
from zeus.device.common import DeprecatedAliasABCMeta, deprecated_alias, has_sys_admin
from zeus.device.gpu import (
    GPU,
    GPUs,
    ZeusGPUInvalidArgError,
    ZeusGPUNoPermissionError,
    ZeusGPUNotFoundError,
    ZeusGPUNotSupportedError,
)

from zeus_plugins_nvml import fake_pynvml

SM = list(range(1410, 209, -15))


def _gpu(index: int = 0) -> dict:
    return fake_pynvml.read_state()["gpus"][index]


def test_supported_clocks_are_the_drivers_lists_in_mhz(driver):
    driver(gpus=2, mem_clocks=[1593, 1215, 405])
    gpus = get_gpus()
    assert gpus.get_supported_memory_clocks(1) == [1593, 1215, 405]
    assert gpus.get_supported_graphics_clocks(0, 1215) == SM
    assert gpus.get_supported_graphics_clocks(0, memory_clock_mhz=405) == SM
    assert gpus.get_supported_graphics_clocks(0) == SM  # None: at the highest memory clock
    assert all(type(c) is int for c in gpus.get_supported_memory_clocks(0))
    with pytest.raises(ZeusGPUNotFoundError):  # NVML_ERROR_NOT_FOUND for a memory clock the GPU lacks
        gpus.get_supported_graphics_clocks(0, 1000)
    with pytest.raises(ZeusGPUNotFoundError):
        gpus.get_supported_memory_clocks(2)


def test_gpu_and_memory_clock_locks_are_ranges_set_and_reset_separately(driver):
    driver(gpus=2, mem_clocks=[1593, 1215])
    gpus = get_gpus()
    gpus.set_gpu_locked_clocks(0, 900, 1200)
    assert _gpu(0)["locked_clocks"] == [900, 1200]
    assert _gpu(0)["locked_mem_clocks"] is None  # the memory clock is left alone, as upstream
    assert _gpu(1)["locked_clocks"] is None
    gpus.set_memory_locked_clocks(gpu_index=0, min_clock_mhz=1215, max_clock_mhz=1593, block=False)
    assert _gpu(0)["locked_mem_clocks"] == [1215, 1593]
    gpus.reset_gpu_locked_clocks(0)
    assert _gpu(0)["locked_clocks"] is None and _gpu(0)["locked_mem_clocks"] == [1215, 1593]
    gpus.reset_memory_locked_clocks(0, block=True)
    assert _gpu(0)["locked_mem_clocks"] is None
    gpus.set_gpu_locked_clocks(1, 1005, 1005)
    gpus.set_memory_locked_clocks(1, 1593, 1593)
    gpus.reset_locked_clocks(1)
    assert _gpu(1)["locked_clocks"] is None and _gpu(1)["locked_mem_clocks"] is None
    gpus.reset_gpu_locked_clocks(0)  # nothing locked: resetting again is fine, as NVML's reset is


def test_driver_refusals_are_upstreams_exceptions(driver):
    driver(gpus=1)
    gpus = get_gpus()
    with pytest.raises(ZeusGPUInvalidArgError):
        gpus.set_gpu_locked_clocks(0, 1200, 900)  # min above max
    with pytest.raises(ZeusGPUInvalidArgError):
        gpus.set_gpu_locked_clocks(0, 100, 2000)  # outside the GPU's range
    with pytest.raises(ZeusGPUInvalidArgError):
        gpus.set_memory_locked_clocks(0, 1000, 1000)  # not a memory clock of the GPU
    assert _gpu(0)["locked_clocks"] is None and _gpu(0)["locked_mem_clocks"] is None


def test_memory_locks_before_ampere_are_not_supported(driver):
    driver(gpus=1, arch=5)  # Volta: SM clocks lock, memory clocks do not
    gpus = get_gpus()
    gpus.set_gpu_locked_clocks(0, 1005, 1005)
    assert _gpu(0)["locked_clocks"] == [1005, 1005]
    with pytest.raises(ZeusGPUNotSupportedError):
        gpus.set_memory_locked_clocks(0, 1215, 1215)
    with pytest.raises(ZeusGPUNotSupportedError):
        gpus.reset_locked_clocks(0)  # SM clock reset first, then the memory reset NVML refuses
    assert _gpu(0)["locked_clocks"] is None


def test_setters_without_privilege_raise_no_permission(driver):
    driver(gpus=1, privileged=False)
    gpus = get_gpus()
    for call in (
        lambda: gpus.set_gpu_locked_clocks(0, 1005, 1005),
        lambda: gpus.set_memory_locked_clocks(0, 1215, 1215),
        lambda: gpus.set_power_management_limit(0, 200_000),
    ):
        with pytest.raises(ZeusGPUNoPermissionError):
            call()
    assert gpus.get_supported_memory_clocks(0) == [1215]  # reads need no privilege


def test_settings_made_directly_stay_when_the_gpus_close(driver):
    """Upstream sets the driver and never puts anything back: neither does a direct call here."""
    driver(gpus=1, mem_clocks=[1593, 1215])
    gpus = get_gpus()
    gpus.set_power_management_limit(0, 250_000)
    gpus.set_gpu_locked_clocks(0, 900, 1200)
    gpus.set_memory_locked_clocks(0, 1215, 1215)
    gpus.close()
    assert _gpu(0)["limit_w"] == 250.0
    assert _gpu(0)["locked_clocks"] == [900, 1200] and _gpu(0)["locked_mem_clocks"] == [1215, 1215]


def test_the_optimizers_limits_are_still_put_back(driver):
    driver(gpus=1)
    gpus = get_gpus()
    gpus.gpus[0]._set_power_limit_journaled(200_000)  # the path GlobalPowerLimitOptimizer takes
    assert _gpu(0)["limit_w"] == 200.0
    gpus.close()
    assert _gpu(0)["limit_w"] == 400.0


def test_a_limit_set_directly_stays_after_the_process_exits(driver):
    driver(gpus=1)
    script = "from zeus.device import get_gpus\nget_gpus().set_power_management_limit(0, 300_000)\n"
    subprocess.run([sys.executable, "-c", script], check=True, env=dict(os.environ), timeout=120)  # the simulated driver's env
    assert _gpu(0)["limit_w"] == 300.0


def test_camel_case_aliases_warn_once_and_call_the_new_names(driver):
    driver(gpus=1)
    gpus = get_gpus()
    with pytest.deprecated_call():
        assert gpus.getName(0) == "NVIDIA A100-SXM4-40GB"
    with pytest.deprecated_call():
        gpus.setGpuLockedClocks(0, 1005, 1005)
    assert _gpu(0)["locked_clocks"] == [1005, 1005]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gpus.setGpuLockedClocks(0, 990, 990)  # the second call does not warn again
    assert _gpu(0)["locked_clocks"] == [990, 990]
    with pytest.deprecated_call():
        gpus.gpus[0].resetGpuLockedClocks()  # the per-GPU object has them too
    assert _gpu(0)["locked_clocks"] is None
    with pytest.deprecated_call():
        assert gpus.getPowerManagementLimitConstraints(0) == (100_000, 400_000)
    with pytest.deprecated_call():
        assert gpus.getSupportedMemoryClocks(0) == [1215]
    # upstream's exact list: get_power_management_limit and get_persistence_mode have none
    names = {
        "getName",
        "getPowerManagementLimitConstraints",
        "setPowerManagementLimit",
        "resetPowerManagementLimit",
        "setPersistenceMode",
        "getSupportedMemoryClocks",
        "setMemoryLockedClocks",
        "resetMemoryLockedClocks",
        "getSupportedGraphicsClocks",
        "setGpuLockedClocks",
        "resetGpuLockedClocks",
        "getAveragePowerUsage",
        "getInstantPowerUsage",
        "getAverageMemoryPowerUsage",
        "supportsGetTotalEnergyConsumption",
        "getTotalEnergyConsumption",
        "getGpuTemperature",
    }
    assert all(callable(getattr(GPUs, n)) and callable(getattr(GPU, n)) for n in names)
    assert not hasattr(GPUs, "getPowerManagementLimit") and not hasattr(GPU, "getPersistenceMode")


def test_nonblocking_setters_are_not_supported_and_block_is_accepted(driver):
    driver(gpus=1)
    gpus = get_gpus()
    assert gpus.gpus[0].supports_nonblocking_setters is False
    gpus.set_power_management_limit(0, 300_000, block=False)
    assert _gpu(0)["limit_w"] == 300.0  # done before the call returned
    gpus.reset_power_management_limit(0, block=False)
    assert _gpu(0)["limit_w"] == 400.0


def test_deprecated_alias_metaclass_for_user_classes():
    import abc

    class Base(abc.ABC, metaclass=DeprecatedAliasABCMeta):
        @deprecated_alias("getValue")
        @abc.abstractmethod
        def get_value(self) -> int: ...

    class Impl(Base):
        def get_value(self) -> int:
            return 7

    with pytest.raises(TypeError):
        Base()  # type: ignore[abstract]
    with pytest.deprecated_call():
        assert Impl().getValue() == 7  # type: ignore[attr-defined]


def test_has_sys_admin_reads_the_effective_capability():
    with open("/proc/self/status") as f:
        cap = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff"))
    assert has_sys_admin() is bool(cap >> 21 & 1)


def test_setters_warn_once_without_sys_admin(driver, monkeypatch):
    import zeus.device.gpu.common as common

    driver(gpus=1)
    monkeypatch.setattr(common, "has_sys_admin", lambda: False)
    gpus = get_gpus()
    with pytest.warns(UserWarning, match="SYS_ADMIN"):
        gpus.set_gpu_locked_clocks(0, 1005, 1005)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gpus.set_power_management_limit(0, 300_000)  # once per GPU
        gpus.get_supported_memory_clocks(0)  # reads never warn
    assert _gpu(0)["limit_w"] == 300.0


def test_an_index_past_the_gpus_is_upstreams_index_error_and_empty_gpus_a_value_error(driver):
    from zeus.device.gpu import EmptyGPUs

    driver(gpus=2)
    gpus = get_gpus()
    with pytest.raises(IndexError):  # upstream indexes its list of GPUs
        gpus.set_gpu_locked_clocks(2, 1005, 1005)
    with pytest.raises(ZeusGPUNotFoundError):
        gpus.get_name(5)
    with pytest.raises(ValueError, match="No GPUs available."):
        EmptyGPUs().get_supported_memory_clocks(0)

"""Putting GPU settings back: the restorer used in-process and after a crash.

Journal keys are ``gpu:<UUID>:power_limit`` (original in mW),
``gpu:<UUID>:locked_clocks`` (SM clock) and ``gpu:<UUID>:locked_memory_clocks``
(original ``None`` for both: NVML cannot read back whether clocks were locked,
so zeus assumes they were not and resets them, as upstream Zeus does). GPUs are
addressed by UUID, which survives reboots and ``CUDA_VISIBLE_DEVICES``, unlike
indices.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from zeus_core import DeviceError
from zeus_core.devicekit import DriverErrors
from zeus_core.errors import DeviceAbsent

OWNER = "nvml"

PERMISSION_FIX = (
    "Changing GPU power limits and clocks needs root or the CAP_SYS_ADMIN capability. "
    "Fix: let the privileged helper `zeus daemon` (started as root) make the change: set ZEUS_DAEMON_SOCKET "
    "(or daemon_socket in [device]) to its socket (README: Running without root); "
    "or run zeus as root (sudo -E zeus ...), or start the container with --cap-add SYS_ADMIN; "
    'or keep the GPU as it is with [power] plugin = "max"'
)

#: setting -> (operation that sets it, operation that puts it back) of the ``nvml`` daemon service
DAEMON_OPS = {
    "power_limit": ("nvml.set_power_limit", "nvml.reset_power_limit"),
    "locked_clocks": ("nvml.lock_clocks", "nvml.reset_clocks"),
    "locked_memory_clocks": ("nvml.lock_memory_clocks", "nvml.reset_memory_clocks"),
}


def daemon_args(setting: str, value: Any) -> dict[str, Any]:
    """The arguments of ``setting``'s daemon operation for ``value`` (what :func:`apply` takes)."""
    if setting == "power_limit":
        return {"milliwatts": int(value)}
    return {"min_mhz": int(value[0]), "max_mhz": int(value[1])}


#: Set to a driver-state file, this makes the plugin use the simulated driver
#: (:mod:`zeus_plugins_nvml.fake_pynvml`) instead of ``pynvml``: demos and CI without a GPU.
FAKE_ENV = "ZEUS_FAKE_NVML"


def nvml_module() -> Any:
    """``pynvml`` as the process sees it; the simulated driver when ``$ZEUS_FAKE_NVML`` names its state.

    Tests may also put the simulated driver in ``sys.modules["pynvml"]``. Every
    process of a run (device, poller, crash restorer at the next start) resolves the
    module the same way, so a simulated run never reaches a real GPU and vice versa.
    """
    if os.environ.get(FAKE_ENV):
        return importlib.import_module("zeus_plugins_nvml.fake_pynvml")
    try:
        return importlib.import_module("pynvml")
    except ImportError as e:
        raise DeviceAbsent(f"pynvml cannot be imported ({e}): pip install nvidia-ml-py") from None


def driver_errors(nvml: Any) -> DriverErrors:
    """NVML's failures: ``NVMLError`` subclasses carrying an ``NVML_ERROR_*`` code (``value``), sent
    back by ``zeus daemon`` as ``nvml_error``."""
    return DriverErrors(
        library="NVML",
        exception=nvml.NVMLError,
        code=lambda e: e.value,
        rebuild=nvml.NVMLError,
        status=str,
        no_permission=lambda e: isinstance(e, nvml.NVMLError_NoPermission),
        not_supported=lambda e: isinstance(e, nvml.NVMLError_NotSupported),
        detail_key="nvml_error",
        permission_fix=PERMISSION_FIX,
    )


def key_for(uuid: str, setting: str) -> str:
    return f"gpu:{uuid}:{setting}"


def apply(nvml: Any, handle: Any, setting: str, value: Any) -> None:
    """Set one setting on a GPU handle; NVML errors propagate."""
    if setting == "power_limit":
        nvml.nvmlDeviceSetPowerManagementLimit(handle, int(value))
    elif setting == "locked_clocks":
        if value is None:
            nvml.nvmlDeviceResetGpuLockedClocks(handle)
        else:
            nvml.nvmlDeviceSetGpuLockedClocks(handle, int(value[0]), int(value[1]))
    elif setting == "locked_memory_clocks":
        if value is None:
            nvml.nvmlDeviceResetMemoryLockedClocks(handle)
        else:
            nvml.nvmlDeviceSetMemoryLockedClocks(handle, int(value[0]), int(value[1]))
    else:
        raise ValueError(f"unknown nvml setting {setting!r}")


def restore_setting(key: str, original: Any) -> None:
    """Restorer registered for owner ``nvml``: put ``key`` back to ``original``."""
    parts = key.split(":")
    if len(parts) != 3 or parts[0] != "gpu":
        raise ValueError(f"not an nvml journal key: {key!r}")
    _, uuid, setting = parts
    nvml = nvml_module()
    nvml.nvmlInit()
    try:
        handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
        try:
            apply(nvml, handle, setting, original)
        except nvml.NVMLError_NotSupported:
            # A GPU that cannot lock its memory clock cannot have it locked either: nothing to undo.
            if not (setting == "locked_memory_clocks" and original is None):
                raise
        except nvml.NVMLError_NoPermission:
            raise DeviceError(f"cannot restore {setting} of GPU {uuid}: NVML refused (no permission). {PERMISSION_FIX}") from None
    finally:
        nvml.nvmlShutdown()

"""The ``amdsmi`` module this process uses, and putting power caps and clocks back (in-process and after a crash).

Journal keys are ``gpu:<UUID>:power_cap`` with the original cap in µW (amdsmi's
unit), and ``gpu:<UUID>:locked_clocks`` (the GFX clock) and
``gpu:<UUID>:locked_memory_clocks`` with the soft limits in force before the
change, ``[min_mhz, max_mhz]``. GPUs are addressed by amdsmi's device UUID,
which survives reboots and ``HIP_VISIBLE_DEVICES``, unlike indices.

Why clocks are put back as a range rather than by switching the performance
level back to ``AUTO``: ``AUTO`` drops the soft limits of every clock at once,
so resetting the GFX clock would also drop a memory-clock lock someone still
holds. The range read before the change is exact (the hardware range, or the
lock that stood). The performance level stays ``MANUAL`` (the driver switched it
when the first range was set); with the limits back, the clocks move as before.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import threading
from collections.abc import Iterator
from typing import Any

from zeus_core import DeviceError
from zeus_core.devicekit import DriverErrors
from zeus_core.errors import DeviceAbsent

OWNER = "amdsmi"
SETTING = "power_cap"
#: clock settings (journal key suffix) -> the AmdSmiClkType member they set
CLOCK_SETTINGS = {"locked_clocks": "SYS", "locked_memory_clocks": "MEM"}

#: Set to a driver-state file, this makes the plugin use the simulated driver
#: (:mod:`zeus_plugins_amdsmi.fake_amdsmi`) instead of ``amdsmi``.
FAKE_ENV = "ZEUS_FAKE_AMDSMI"

# amdsmi_status_t codes the plugin tells apart (amdsmi_wrapper.AMDSMI_STATUS_*)
STATUS_INVAL = 1
STATUS_NOT_SUPPORTED = 2
STATUS_NO_PERM = 10


PERMISSION_FIX = (
    "Setting AMD GPU power caps and clocks writes root-owned sysfs files (hwmon power1_cap, pp_od_clk_voltage). "
    "Fix: let the privileged helper `zeus daemon` (started as root, with a [serve.amdsmi] table) set them: "
    "set ZEUS_DAEMON_SOCKET (or daemon_socket in [device]) to its socket (README: Running without root); "
    'or run zeus as root; or keep the caps as they are with [power] plugin = "max"'
)

INSTALL_FIX = (
    "Install the amdsmi Python package of your ROCm release (pip install /opt/rocm/share/amd_smi, "
    "or `pip install amdsmi==<ROCm version>`) and make sure libamd_smi.so is found (ROCM_PATH)"
)


def smi_module() -> Any:
    """``amdsmi`` as this process sees it; the simulated driver when ``$ZEUS_FAKE_AMDSMI`` names its state.

    ``amdsmi`` loads ``libamd_smi.so`` when imported and prints to stdout when it
    cannot; that output is kept out of the user's terminal and the failure becomes
    a :class:`DeviceError` that says how to install it. Every process (device,
    restorer at the next start, daemon) resolves the module the same way, so a
    simulated run never reaches a real GPU and vice versa.
    """
    if os.environ.get(FAKE_ENV):
        return importlib.import_module("zeus_plugins_amdsmi.fake_amdsmi")
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return importlib.import_module("amdsmi")
    except ModuleNotFoundError:
        raise DeviceAbsent(f"the amdsmi Python package is not installed. {INSTALL_FIX}") from None
    except Exception as e:  # OSError, KeyError, AttributeError: no libamd_smi.so, or a version mismatch
        raise DeviceError(f"amdsmi cannot be loaded ({type(e).__name__}: {e}). {INSTALL_FIX}") from None


def driver_errors(smi: Any) -> DriverErrors:
    """amdsmi's failures: ``AmdSmiLibraryException`` with an ``amdsmi_status_t`` code, sent back by
    ``zeus daemon`` as ``amdsmi_error``."""
    return DriverErrors(
        library="amdsmi",
        exception=smi.AmdSmiLibraryException,
        code=lambda e: e.get_error_code(),
        rebuild=smi.AmdSmiLibraryException,
        status=lambda e: e.get_error_info(),
        no_permission=lambda e: e.get_error_code() == STATUS_NO_PERM,
        not_supported=lambda e: e.get_error_code() == STATUS_NOT_SUPPORTED,
        detail_key="amdsmi_error",
        permission_fix=PERMISSION_FIX,
    )


_users = 0
_users_lock = threading.Lock()


def acquire(smi: Any) -> None:
    """Start using amdsmi (initialise it if no one in this process has).

    ``amdsmi_init`` is one flag per process, not a count, and one
    ``amdsmi_shut_down`` ends the library for every user in the process: so the
    device groups, the restorer and the daemon service of one process share one
    initialisation, counted here and shut down at the last :func:`release`.
    """
    global _users
    with _users_lock:
        if _users == 0:
            smi.amdsmi_init(smi.AmdSmiInitFlags.INIT_AMD_GPUS)
        _users += 1


def release(smi: Any) -> None:
    global _users
    with _users_lock:
        _users = max(0, _users - 1)
        if _users == 0:
            try:
                smi.amdsmi_shut_down()
            except smi.AmdSmiException:
                pass


@contextlib.contextmanager
def session(smi: Any) -> Iterator[None]:
    """amdsmi initialised for the body (see :func:`acquire`)."""
    acquire(smi)
    try:
        yield
    finally:
        release(smi)


def key_for(uuid: str, setting: str = SETTING) -> str:
    return f"gpu:{uuid}:{setting}"


def clock_range(smi: Any, handle: Any, setting: str) -> list[int]:
    """The soft limits in force on a clock (MHz): the hardware range, or the lock that stands
    (amdsmi reads back the current limits, never the hardware's once a lock is set)."""
    info = smi.amdsmi_get_clock_info(handle, smi.AmdSmiClkType[CLOCK_SETTINGS[setting]])
    return [int(info["min_clk"]), int(info["max_clk"])]


def set_clock_range(smi: Any, handle: Any, setting: str, min_mhz: int, max_mhz: int) -> None:
    """Set a clock's soft limits (MHz; the driver needs min < max, both inside the hardware range)."""
    smi.amdsmi_set_gpu_clk_range(handle, int(min_mhz), int(max_mhz), smi.AmdSmiClkType[CLOCK_SETTINGS[setting]])


def handle_by_uuid(smi: Any, uuid: str) -> Any:
    """The processor handle of the GPU with amdsmi device UUID ``uuid`` (amdsmi has no direct lookup)."""
    for h in smi.amdsmi_get_processor_handles():
        if smi.amdsmi_get_gpu_device_uuid(h) == uuid:
            return h
    raise DeviceError(f"no AMD GPU has UUID {uuid} on this machine (amd-smi list shows them)")


def set_cap(smi: Any, handle: Any, microwatts: int) -> None:
    """Set a GPU's power cap (sensor 0, as amd-smi does); amdsmi errors propagate."""
    smi.amdsmi_set_power_cap(handle, 0, int(microwatts))


def restore_setting(key: str, original: Any) -> None:
    """Restorer registered for owner ``amdsmi``: put the cap of ``key`` back to ``original`` µW."""
    parts = key.split(":")
    if len(parts) != 3 or parts[0] != "gpu" or parts[2] not in (SETTING, *CLOCK_SETTINGS):
        raise ValueError(f"not an amdsmi journal key: {key!r}")
    smi = smi_module()
    setting = parts[2]
    with session(smi):
        try:
            handle = handle_by_uuid(smi, parts[1])
            if setting == SETTING:
                set_cap(smi, handle, int(original))
            else:
                set_clock_range(smi, handle, setting, int(original[0]), int(original[1]))
        except smi.AmdSmiLibraryException as e:
            if e.get_error_code() == STATUS_NO_PERM:
                what = "power cap" if setting == SETTING else setting.replace("_", " ")
                raise DeviceError(
                    f"cannot restore the {what} of GPU {parts[1]}: amdsmi refused (no permission). {PERMISSION_FIX}"
                ) from None
            raise

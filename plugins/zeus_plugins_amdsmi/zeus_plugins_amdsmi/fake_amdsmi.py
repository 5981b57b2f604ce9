"""A simulated AMD GPU driver with the ``amdsmi`` Python package's interface, for tests and demos.

The plugin's code, unchanged, runs against it (``ZEUS_FAKE_AMDSMI=PATH`` makes
:func:`zeus_plugins_amdsmi.control.smi_module` return this module instead of
``amdsmi``), so what is tested is what runs on a real GPU. It follows the real
package (ROCm amdsmi 7.0, ``amdsmi_interface.py`` and ``amdsmi_exception.py``):

* power caps in microwatts (``amdsmi_get_power_cap_info``, ``amdsmi_set_power_cap``);
  socket power in whole watts, ``"N/A"`` where the GPU does not report it
  (``amdsmi_get_power_info``); temperatures in degrees Celsius (the C library
  divides the driver's millidegrees); the energy accumulator in counts of
  ``counter_resolution`` microjoules (a float32, 15.3 on Instinct GPUs), of a
  given width: 64 bits, or 32 bits on boards whose firmware accumulates in 32
  bits, where it wraps around;
* errors as the real exception classes and status codes:
  ``AmdSmiLibraryException(AMDSMI_STATUS_NO_PERM)`` for a setter without the
  privilege, ``..._INVAL`` for a cap outside the range, ``..._NOT_SUPPORTED``
  for a missing sensor, ``..._NOT_INIT`` before ``amdsmi_init``;
  ``AmdSmiParameterException`` for an argument of the wrong type;
* privilege: ``privileged`` is ``True`` (every process may set caps), ``False``
  (none may) or ``"root"`` (like the real driver, whose caps are root-owned
  sysfs files: only a process holding CAP_DAC_OVERRIDE, which root has and
  loses when it drops to another user);
* the known counter faults: ``counter_mode = "frozen"`` (the accumulator never
  moves, as on some MI100/MI250 boards), ``"scaled"`` (it moves at
  ``counter_scale`` times the true rate, as upstream Zeus found on some boards),
  ``"backwards"`` (it counts down, as a counter restarting after a driver reload
  or GPU reset looks), ``"jump"`` (1000 times the true rate: steps beyond what
  the board's maximum power allows, as a wrong resolution or a torn read gives;
  upstream validates AMD counters at start for these reasons), and
  ``reports_power = false`` (the
  odd die of a dual-die MI250X, whose power and energy its sibling reports);
* the measurement quirk, off by default: ``counter_period_s`` > 0 renews the
  accumulator (and its ``timestamp``) only at each multiple of that period, as
  the GPU metrics table it comes from is renewed by the firmware and cached by
  the kernel (:mod:`zeus_plugins_amdsmi.sensors` names the sources); a window
  read between two renewals misses up to a period's energy; ``counter_unit_uj``
  set to ``1e6 / 65536`` counts in the firmware's real unit, 2**-16 J, while
  ``counter_resolution`` still reports 15.3 µJ: counted energy is 0.27 % high;
* clocks in MHz (``amdsmi_get_clock_info``, ``amdsmi_set_gpu_clk_range``, the
  ``AmdSmiClkType`` SYS (= GFX) and MEM), as the driver's soft limits behave:
  a range must lie inside the GPU's hardware range with its minimum below its
  maximum (``AMDSMI_STATUS_INVAL`` otherwise: the library asserts
  ``min < max``), setting one switches the performance level to ``MANUAL``,
  ``amdsmi_set_gpu_perf_level(AUTO)`` drops every soft limit, and -- the quirk
  that matters -- ``min_clk``/``max_clk`` read back the *current* soft limits
  (the range of ``pp_dpm_sclk`` narrows to a lock), so the hardware range can
  only be read before a lock. The current clock (``clk``) is the top of the
  range in force (a busy GPU runs at its ceiling). Clock setters need the same
  privilege as caps (``pp_od_clk_voltage`` is a root-owned sysfs file);
* the processes on a GPU (``processes``: PID, name, the share of the GFX engine each keeps busy;
  :func:`set_processes`), listed by ``amdsmi_get_gpu_process_list`` as amdsmi 7.0 lists them: a
  dict per process with ``name`` (``"N/A"`` where unknown), ``pid``, ``mem``, ``engine_usage``
  (``gfx`` and ``enc``: the nanoseconds each engine has run the process's work since it opened
  the GPU, running totals that advance with time by its share), ``memory_usage`` (``gtt_mem``,
  ``cpu_mem``, ``vram_mem``, bytes) and ``cu_occupancy``. The library reads them from each
  process's ``/proc/<pid>/fdinfo``, which only the process's own user or a holder of
  CAP_SYS_PTRACE (root) may read: another user's process is left out (``others_processes =
  "hidden"``, amdsmi 7.0) or listed with its name ``"N/A"`` and no usage (``"redacted"``, later
  releases).

The driver state is a JSON file shared by every process, like a real driver: a
cap set by a process that is then SIGKILLed stays set for the next one. Energy
is computed from the draw since the last change of state (``min(demand, cap)``,
at least ``idle_w``), so readings need no background activity.
``python -m zeus_plugins_amdsmi.fake_amdsmi PATH --gpus N [--privileged | --root-only]``
writes a state.
"""

from __future__ import annotations

import os
import struct
import sys
import time
from enum import IntEnum
from pathlib import Path
from typing import Any

import attrs

from zeus_core.devicekit import CAP_DAC_OVERRIDE, simulated

ENV = "ZEUS_FAKE_AMDSMI"

# amdsmi_status_t values (amdsmi_wrapper.py)
AMDSMI_STATUS_SUCCESS = 0
AMDSMI_STATUS_INVAL = 1
AMDSMI_STATUS_NOT_SUPPORTED = 2
AMDSMI_STATUS_TIMEOUT = 8
AMDSMI_STATUS_RETRY = 9
AMDSMI_STATUS_NO_PERM = 10
AMDSMI_STATUS_INIT_ERROR = 18
AMDSMI_STATUS_NOT_FOUND = 31
AMDSMI_STATUS_NOT_INIT = 32
AMDSMI_STATUS_DRIVER_NOT_LOADED = 34

_MESSAGES = {
    AMDSMI_STATUS_INVAL: "AMDSMI_STATUS_INVAL - Invalid parameters",
    AMDSMI_STATUS_NOT_SUPPORTED: "AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported",
    AMDSMI_STATUS_TIMEOUT: "AMDSMI_STATUS_TIMEOUT - Timeout in API call",
    AMDSMI_STATUS_RETRY: "AMDSMI_STATUS_RETRY - Retry operation",
    AMDSMI_STATUS_NO_PERM: "AMDSMI_STATUS_NO_PERM - Permission Denied",
    AMDSMI_STATUS_INIT_ERROR: "AMDSMI_STATUS_INIT_ERROR - Initialization error",
    AMDSMI_STATUS_NOT_FOUND: "AMDSMI_STATUS_NOT_FOUND - Device Not found",
    AMDSMI_STATUS_NOT_INIT: "AMDSMI_STATUS_NOT_INIT - Device not initialized",
    AMDSMI_STATUS_DRIVER_NOT_LOADED: "AMDSMI_STATUS_DRIVER_NOT_LOADED - Driver not loaded",
}


class AmdSmiInitFlags(IntEnum):
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_CPUS = 1
    INIT_AMD_GPUS = 2
    INIT_NON_AMD_CPUS = 4
    INIT_NON_AMD_GPUS = 8
    INIT_AMD_APUS = 3


class AmdSmiClkType(IntEnum):
    SYS = 0
    GFX = 0  # an alias of SYS, as in amdsmi_wrapper
    DF = 1
    DCEF = 2
    SOC = 3
    MEM = 4
    PCIE = 5
    VCLK0 = 6
    VCLK1 = 7
    DCLK0 = 8
    DCLK1 = 9


class AmdSmiDevPerfLevel(IntEnum):
    AUTO = 0
    LOW = 1
    HIGH = 2
    MANUAL = 3
    STABLE_STD = 4
    STABLE_PEAK = 5
    STABLE_MIN_MCLK = 6
    STABLE_MIN_SCLK = 7
    DETERMINISM = 8
    UNKNOWN = 0x100


class AmdSmiTemperatureType(IntEnum):
    EDGE = 0
    HOTSPOT = 1
    JUNCTION = 1
    VRAM = 2
    HBM_0 = 3
    HBM_1 = 4
    HBM_2 = 5
    HBM_3 = 6
    PLX = 7


class AmdSmiTemperatureMetric(IntEnum):
    CURRENT = 0
    MAX = 1
    MIN = 2
    MAX_HYST = 3
    MIN_HYST = 4
    CRITICAL = 5


# --------------------------------------------------------------------------- exceptions (amdsmi_exception.py)


class AmdSmiException(Exception):
    """Base of every amdsmi exception."""


class AmdSmiLibraryException(AmdSmiException):
    """A non-success status from the C library; ``get_error_code()`` is the amdsmi_status_t."""

    def __init__(self, err_code: int) -> None:
        err_code = abs(err_code)
        super().__init__(err_code)
        self.err_code = err_code
        self.err_info = _MESSAGES.get(err_code, "AMDSMI_STATUS_UNKNOWN_ERROR - An unknown error occurred")

    def __str__(self) -> str:
        return f"Error code:\n\t{self.err_code} | {self.err_info}"

    def get_error_info(self, detailed: bool = True) -> str:
        return self.err_info if detailed else self.err_info.split(" - ")[0]

    def get_error_code(self) -> int:
        return self.err_code


class AmdSmiRetryException(AmdSmiLibraryException):
    def __init__(self) -> None:
        super().__init__(AMDSMI_STATUS_RETRY)


class AmdSmiTimeoutException(AmdSmiLibraryException):
    def __init__(self) -> None:
        super().__init__(AMDSMI_STATUS_TIMEOUT)


class AmdSmiParameterException(AmdSmiException):
    def __init__(self, received: Any, expected: Any, msg: str | None = None) -> None:
        super().__init__(msg)
        self.err_code = None
        self.err_msg = msg or f"Invalid parameter:\nActual type: {type(received)}\nExpected type: {expected}"

    def __str__(self) -> str:
        return self.err_msg


class AmdSmiKeyException(AmdSmiException):
    def __init__(self, key: str) -> None:
        super().__init__()
        self.err_msg = f"Key {key} is missing from dictionary"

    def __str__(self) -> str:
        return self.err_msg


class AmdSmiBdfFormatException(AmdSmiException):
    def __init__(self, bdf: Any) -> None:
        super().__init__()
        self.err_msg = f"Wrong BDF format: {bdf}"

    def __str__(self) -> str:
        return self.err_msg


# --------------------------------------------------------------------------- the driver state


def _float32(x: float) -> float:
    """What a C ``float`` holds of ``x`` (amdsmi returns the resolution through ctypes.c_float)."""
    return struct.unpack("f", struct.pack("f", x))[0]


@attrs.define
class FakeAmdGpu:
    """One simulated AMD GPU. Watts and degrees here; the interface converts (µW, counts)."""

    market_name: str = "AMD Instinct MI300X"
    uuid: str = ""
    hip_uuid: str = ""
    bdf: str = ""
    hip_id: int | None = None  # HIP's index; default: the BDF order (a node may differ, as MI350X nodes do)
    min_cap_w: float = 200.0
    max_cap_w: float = 750.0
    default_cap_w: float = 750.0
    cap_w: float | None = None
    idle_w: float = 120.0
    demand_w: float = 500.0
    reports_instant: bool = True  # current_socket_power (MI300 on); "N/A" before
    reports_average: bool = True  # average_socket_power
    reports_power: bool = True  # False: the odd die of an MI250X (reads 0 W, its counter never moves)
    counter_bits: int = 64
    counter_resolution_uj: float = 15.3
    counter_start: int = 4_000_000_000  # counts when the state is written (a driver up for a while)
    counter_mode: str = "ok"  # "ok", "frozen", "scaled", "backwards" or "jump"
    counter_scale: float = 1.0  # with "scaled": the counter's rate against the true one
    # the measurement quirk (0: off, every read counts to the moment): the accumulator renews only every
    # counter_period_s, as the metrics table the firmware renews and the kernel caches (zeus_plugins_amdsmi.sensors)
    counter_period_s: float = 0.0
    # the unit quirk (None: off, the firmware counts in counter_resolution_uj): the unit the firmware counts in,
    # 1e6 / 65536 on real GPUs while the library reports 15.3 (zeus_plugins_amdsmi.sensors)
    counter_unit_uj: float | None = None
    temperatures_c: dict[str, float] = attrs.field(factory=lambda: {"hotspot": 62.0, "vram": 55.0})
    energy_uj: float = 0.0  # true energy since the state was written, at the anchor
    anchor_t: float | None = None
    cap_history_w: list[float] = attrs.field(factory=list)  # every cap set, in order (for tests)
    sys_clock_range_mhz: list[int] = attrs.field(factory=lambda: [500, 2100])  # the hardware's GFX range (MI300X)
    mem_clock_range_mhz: list[int] = attrs.field(factory=lambda: [900, 1300])  # the hardware's memory (UCLK) range
    sys_clock_lock_mhz: list[int] | None = None  # the soft limits set, None: the hardware range
    mem_clock_lock_mhz: list[int] | None = None
    perf_level: str = "AUTO"
    clock_history: list[list[Any]] = attrs.field(factory=list)  # every range set: [type, min, max] or ["AUTO"] (for tests)
    # processes holding the GPU: {"pid", "name", "gfx": share of the GFX engine busy with it (0..1),
    # "vram_mb", "gfx_ns": its GFX engine time at "t" (monotonic)}; set with set_processes
    processes: list[dict] = attrs.field(factory=list)
    others_processes: str = "hidden"  # another user's process, to a caller without CAP_SYS_PTRACE: "hidden" or "redacted"


def create(
    path: str | os.PathLike[str], gpus: list[FakeAmdGpu] | int = 1, privileged: bool | str = False, driver_version: str = "6.10.5"
) -> Path:
    """Write a driver state with ``gpus`` (a count of default MI300X or a list) and return its path."""
    simulated.check_privilege_mode(privileged)
    if isinstance(gpus, int):
        gpus = [FakeAmdGpu() for _ in range(gpus)]
    now = time.monotonic()
    for i, g in enumerate(gpus):
        if g.counter_bits not in (32, 64):
            raise ValueError(f"counter_bits must be 32 or 64, got {g.counter_bits}")
        g.uuid = g.uuid or f"{0x74A1 + i:08x}-0000-1000-80a0-e6b1e97b{i:04x}"
        g.hip_uuid = g.hip_uuid or f"GPU-{0x3C2B4D5E6F70 + i:016x}"
        g.bdf = g.bdf or f"0000:{0x0C + 0x10 * i:02x}:00.0"
        g.hip_id = i if g.hip_id is None else g.hip_id
        g.cap_w = g.default_cap_w if g.cap_w is None else g.cap_w
        g.anchor_t = now if g.anchor_t is None else g.anchor_t
    hip_ids = sorted(g.hip_id for g in gpus if g.hip_id is not None)  # every one is set above
    if hip_ids != list(range(len(gpus))):
        raise ValueError(f"hip_id values must be 0..{len(gpus) - 1} once each, got {hip_ids}")
    state = {"driver_version": driver_version, "privileged": privileged, "gpus": [attrs.asdict(g) for g in gpus]}
    return simulated.write_state(path, state)


def install(path: str | os.PathLike[str], monkeypatch: Any = None) -> Any:
    """Make ``import amdsmi`` return this module, driven by the state at ``path`` (undone after the
    test with pytest's ``monkeypatch``)."""
    return simulated.install(sys.modules[__name__], "amdsmi", ENV, path, monkeypatch)


# No state (or no $ZEUS_FAKE_AMDSMI): no driver loaded.
_shared = simulated.SharedState(
    ENV,
    unset=lambda: AmdSmiLibraryException(AMDSMI_STATUS_DRIVER_NOT_LOADED),
    missing=lambda: AmdSmiLibraryException(AMDSMI_STATUS_DRIVER_NOT_LOADED),
)
_read = _shared.read
_changing = _shared.changing


def read_state(path: str | os.PathLike[str] | None = None) -> dict:
    """The driver state as a dict (for assertions)."""
    return _shared.fresh(path)


def _draw_w(g: dict) -> float:
    if not g["reports_power"]:
        return 0.0
    return max(min(g["demand_w"], g["cap_w"]), g["idle_w"])


def _true_uj(g: dict, now: float) -> float:
    return g["energy_uj"] + _draw_w(g) * 1e6 * max(0.0, now - g["anchor_t"])


def _fold(g: dict) -> None:
    """Fold the energy drawn so far into the state before the draw changes."""
    now = time.monotonic()
    g["energy_uj"] = _true_uj(g, now)
    g["anchor_t"] = now


def set_demand(index: int, watts: float) -> None:
    """Change the load on GPU ``index`` (BDF order): the power it would draw without a cap."""
    with _changing() as state:
        g = state["gpus"][index]
        _fold(g)
        g["demand_w"] = float(watts)


def reset_counter(index: int) -> None:
    """A driver reload on GPU ``index``: its energy accumulator starts again from 0."""
    with _changing() as state:
        g = state["gpus"][index]
        _fold(g)
        g["counter_start"] = -int(g["energy_uj"] / _float32(g["counter_resolution_uj"]))


def set_processes(index: int, processes: list[dict]) -> None:
    """The processes on GPU ``index``: ``{"pid", "gfx" (the share of the GFX engine it keeps busy,
    0..1), "name" (optional), "vram_mb" (optional)}`` each. A process listed before keeps the GFX
    time it has run (a running total, as the driver's)."""
    with _changing() as state:
        g = state["gpus"][index]
        now = time.monotonic()
        before = {p["pid"]: _gfx_ns(p, now) for p in g.get("processes", [])}
        g["processes"] = [
            {
                "pid": int(p["pid"]),
                "name": str(p.get("name", "")),
                "gfx": float(p.get("gfx", 0.0)),
                "vram_mb": int(p.get("vram_mb", 1024)),
                "gfx_ns": before.get(int(p["pid"]), 0),
                "t": now,
            }
            for p in processes
        ]


def _gfx_ns(p: dict, now: float) -> int:
    return int(p["gfx_ns"] + p["gfx"] * max(0.0, now - p["t"]) * 1e9)


def true_energy_j(index: int, path: str | os.PathLike[str] | None = None) -> float:
    """The energy GPU ``index`` really drew since the state was written (what a test compares with)."""
    g = read_state(path)["gpus"][index]
    return _true_uj(g, time.monotonic()) / 1e6


# --------------------------------------------------------------------------- handles


@attrs.frozen
class _Handle:
    """A processor handle (the real one is a ctypes ``amdsmi_processor_handle``)."""

    index: int


# Like the C library, initialisation is one flag per process, not a count: a second
# amdsmi_init is a no-op and one amdsmi_shut_down ends the library for every user in
# the process (their handles then fail with NOT_INIT).
_initialized = False


def _gpu(handle: Any) -> dict:
    if not _initialized:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_INIT)
    if not isinstance(handle, _Handle):
        raise AmdSmiParameterException(handle, "amdsmi_processor_handle")
    gpus = _read()["gpus"]
    if not 0 <= handle.index < len(gpus):
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_FOUND)
    return gpus[handle.index]


# --------------------------------------------------------------------------- the amdsmi interface


def amdsmi_init(flag: AmdSmiInitFlags = AmdSmiInitFlags.INIT_AMD_GPUS) -> None:
    global _initialized
    if not isinstance(flag, AmdSmiInitFlags):
        raise AmdSmiParameterException(flag, AmdSmiInitFlags)
    _read()  # no state: no driver
    _initialized = True


def amdsmi_shut_down() -> None:
    global _initialized
    _initialized = False


def amdsmi_get_processor_handles() -> list[_Handle]:
    if not _initialized:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_INIT)
    return [_Handle(i) for i in range(len(_read()["gpus"]))]


def amdsmi_get_gpu_device_uuid(processor_handle: Any) -> str:
    return _gpu(processor_handle)["uuid"]


def amdsmi_get_gpu_device_bdf(processor_handle: Any) -> str:
    return _gpu(processor_handle)["bdf"]


def amdsmi_get_gpu_enumeration_info(processor_handle: Any) -> dict[str, Any]:
    g = _gpu(processor_handle)
    return {
        "drm_render": 128 + processor_handle.index,
        "drm_card": processor_handle.index,
        "hsa_id": g["hip_id"] + 1,
        "hip_id": g["hip_id"],
        "hip_uuid": g["hip_uuid"],
    }


def amdsmi_get_gpu_asic_info(processor_handle: Any) -> dict[str, Any]:
    g = _gpu(processor_handle)
    return {
        "market_name": g["market_name"],
        "vendor_id": "0x1002",
        "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
        "subvendor_id": "0x1002",
        "device_id": "0x74a1",
        "rev_id": "0x00",
        "asic_serial": f"0x{0xA1B2C3D4 + processor_handle.index:016X}",
        "oam_id": processor_handle.index,
        "num_compute_units": 304,
        "target_graphics_version": "gfx942",
        "subsystem_id": "0x74a1",
    }


def amdsmi_get_gpu_driver_info(processor_handle: Any) -> dict[str, str]:
    _gpu(processor_handle)
    return {"driver_name": "amdgpu", "driver_version": _read()["driver_version"], "driver_date": "2015/01/01 00:00"}


def amdsmi_get_lib_version() -> dict[str, Any]:
    return {"year": 25, "major": 26, "minor": 0, "release": 2, "build": "26.0.2+simulated"}


def amdsmi_get_power_info(processor_handle: Any) -> dict[str, Any]:
    g = _gpu(processor_handle)
    watts = int(_draw_w(g))
    return {
        "socket_power": watts,
        "current_socket_power": watts if g["reports_instant"] else "N/A",
        "average_socket_power": watts if g["reports_average"] else "N/A",
        "gfx_voltage": 800,
        "soc_voltage": 750,
        "mem_voltage": 1100,
        "power_limit": int(g["cap_w"] * 1e6),
    }


def amdsmi_get_energy_count(processor_handle: Any) -> dict[str, Any]:
    g = _gpu(processor_handle)
    now = time.monotonic()
    res = _float32(g["counter_resolution_uj"])
    period = g.get("counter_period_s", 0.0)
    if period > 0:  # the table as last renewed: at the last multiple of the period (time.monotonic's phase)
        now = now - now % period
    if g["counter_mode"] == "frozen" or not g["reports_power"]:
        counts = g["counter_start"]
    else:
        scale = {"scaled": g["counter_scale"], "backwards": -1.0, "jump": 1000.0}.get(g["counter_mode"], 1.0)
        unit = g.get("counter_unit_uj") or res
        counts = g["counter_start"] + int(_true_uj(g, now) * scale / unit)
    return {"energy_accumulator": counts % (1 << g["counter_bits"]), "counter_resolution": res, "timestamp": int(now * 1e9)}


def amdsmi_get_power_cap_info(processor_handle: Any) -> dict[str, int]:
    g = _gpu(processor_handle)
    return {
        "power_cap": int(round(g["cap_w"] * 1e6)),
        "default_power_cap": int(round(g["default_cap_w"] * 1e6)),
        "dpm_cap": 2100,
        "min_power_cap": int(round(g["min_cap_w"] * 1e6)),
        "max_power_cap": int(round(g["max_cap_w"] * 1e6)),
    }


def amdsmi_set_power_cap(processor_handle: Any, sensor_ind: int, cap: int) -> None:
    _gpu(processor_handle)
    if not isinstance(sensor_ind, int):
        raise AmdSmiParameterException(sensor_ind, int)
    if not isinstance(cap, int):
        raise AmdSmiParameterException(cap, int)
    if not simulated.may_change(_read()["privileged"], CAP_DAC_OVERRIDE):
        raise AmdSmiLibraryException(AMDSMI_STATUS_NO_PERM)
    if sensor_ind != 0:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
    with _changing() as state:
        g = state["gpus"][processor_handle.index]
        if not g["min_cap_w"] * 1e6 <= cap <= g["max_cap_w"] * 1e6:
            raise AmdSmiLibraryException(AMDSMI_STATUS_INVAL)
        _fold(g)
        g["cap_w"] = cap / 1e6
        g["cap_history_w"].append(g["cap_w"])


def amdsmi_get_temp_metric(processor_handle: Any, sensor_type: AmdSmiTemperatureType, metric: AmdSmiTemperatureMetric) -> int:
    g = _gpu(processor_handle)
    if not isinstance(sensor_type, AmdSmiTemperatureType):
        raise AmdSmiParameterException(sensor_type, AmdSmiTemperatureType)
    if not isinstance(metric, AmdSmiTemperatureMetric):
        raise AmdSmiParameterException(metric, AmdSmiTemperatureMetric)
    value = g["temperatures_c"].get(sensor_type.name.lower())
    if value is None or metric != AmdSmiTemperatureMetric.CURRENT:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
    return int(value)


_CLOCKS = {AmdSmiClkType.SYS: "sys", AmdSmiClkType.MEM: "mem"}


def _clock_kind(clk_type: Any) -> str:
    if not isinstance(clk_type, AmdSmiClkType):
        raise AmdSmiParameterException(clk_type, AmdSmiClkType)
    kind = _CLOCKS.get(clk_type)
    if kind is None:  # DF, SOC, ... read and set through other files: not simulated
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
    return kind


def _clock_range(g: dict, kind: str) -> list[int]:
    """The soft limits in force: the lock, else the hardware range."""
    return list(g[f"{kind}_clock_lock_mhz"] or g[f"{kind}_clock_range_mhz"])


def amdsmi_get_clock_info(processor_handle: Any, clock_type: AmdSmiClkType) -> dict[str, Any]:
    g = _gpu(processor_handle)
    kind = _clock_kind(clock_type)
    lo, hi = _clock_range(g, kind)
    return {
        "clk": hi,
        "min_clk": lo,
        "max_clk": hi,
        "clk_locked": (g["sys_clock_lock_mhz"] is not None) if kind == "sys" else "N/A",
        "clk_deep_sleep": "N/A",
    }


def amdsmi_set_gpu_clk_range(processor_handle: Any, min_clk_value: int, max_clk_value: int, clk_type: AmdSmiClkType) -> None:
    _gpu(processor_handle)
    for value in (min_clk_value, max_clk_value):
        if not isinstance(value, int) or isinstance(value, bool):
            raise AmdSmiParameterException(value, int)
    kind = _clock_kind(clk_type)
    if not simulated.may_change(_read()["privileged"], CAP_DAC_OVERRIDE):
        raise AmdSmiLibraryException(AMDSMI_STATUS_NO_PERM)
    with _changing() as state:
        g = state["gpus"][processor_handle.index]
        lo, hi = g[f"{kind}_clock_range_mhz"]
        if not lo <= min_clk_value < max_clk_value <= hi:
            raise AmdSmiLibraryException(AMDSMI_STATUS_INVAL)
        g[f"{kind}_clock_lock_mhz"] = [min_clk_value, max_clk_value]
        g["perf_level"] = "MANUAL"
        g["clock_history"].append([kind, min_clk_value, max_clk_value])


def amdsmi_get_gpu_perf_level(processor_handle: Any) -> str:
    return f"AMDSMI_DEV_PERF_LEVEL_{_gpu(processor_handle)['perf_level']}"


def amdsmi_set_gpu_perf_level(processor_handle: Any, perf_level: AmdSmiDevPerfLevel) -> None:
    _gpu(processor_handle)
    if not isinstance(perf_level, AmdSmiDevPerfLevel):
        raise AmdSmiParameterException(perf_level, AmdSmiDevPerfLevel)
    if not simulated.may_change(_read()["privileged"], CAP_DAC_OVERRIDE):
        raise AmdSmiLibraryException(AMDSMI_STATUS_NO_PERM)
    if perf_level not in (AmdSmiDevPerfLevel.AUTO, AmdSmiDevPerfLevel.MANUAL):
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
    with _changing() as state:
        g = state["gpus"][processor_handle.index]
        g["perf_level"] = perf_level.name
        if perf_level == AmdSmiDevPerfLevel.AUTO:  # the driver drops every soft limit
            g["sys_clock_lock_mhz"] = g["mem_clock_lock_mhz"] = None
            g["clock_history"].append(["AUTO"])


#: the capability that lets a process read another user's /proc/<pid>/fdinfo
CAP_SYS_PTRACE = 19


def _uid_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def amdsmi_get_gpu_process_list(processor_handle: Any) -> list[dict[str, Any]]:
    g = _gpu(processor_handle)
    now = time.monotonic()
    sees_all = simulated.may_change("root", CAP_SYS_PTRACE)  # the capability check the kernel makes
    out = []
    for p in g.get("processes", []):
        own = sees_all or _uid_of(p["pid"]) in (None, os.geteuid())
        if not own and g.get("others_processes", "hidden") == "hidden":
            continue
        vram = p["vram_mb"] << 20 if own else 0
        out.append(
            {
                "name": (p["name"] or "N/A") if own else "N/A",
                "pid": p["pid"],
                "mem": vram,
                "engine_usage": {"gfx": _gfx_ns(p, now) if own else 0, "enc": 0},
                "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": vram},
                "cu_occupancy": "N/A",
            }
        )
    return out


__getattr__ = simulated.unsimulated(__name__, "amdsmi_")  # anything not simulated fails loudly instead of pretending


def main(argv: list[str] | None = None) -> None:
    """``python -m zeus_plugins_amdsmi.fake_amdsmi PATH``: write a simulated driver state."""
    p = simulated.command_line("zeus_plugins_amdsmi.fake_amdsmi", "AMD GPU driver (MI300X GPUs)", ENV, "power caps", "CAP_DAC_OVERRIDE")
    p.add_argument("--demand-w", type=float, default=500.0, help="power each GPU draws without a cap (W)")
    p.add_argument(
        "--counter", choices=("ok", "frozen"), default="ok", help="frozen: the energy accumulator never moves (zeus then polls power)"
    )
    p.add_argument("--counter-bits", type=int, choices=(32, 64), default=64, help="width of the energy accumulator")
    a, privileged = simulated.parse_command_line(p, argv)
    if a.demand_w <= 0:
        p.error(f"--demand-w must be positive, got {a.demand_w}")
    gpus = [FakeAmdGpu(demand_w=a.demand_w, counter_mode=a.counter, counter_bits=a.counter_bits) for _ in range(a.gpus)]
    path = create(a.path, gpus, privileged=privileged)
    print(f"simulated AMD driver with {a.gpus} GPU(s) in {path}; use it with {ENV}={Path(path).resolve()}")


if __name__ == "__main__":
    main()

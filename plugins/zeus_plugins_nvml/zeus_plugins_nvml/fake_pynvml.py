"""A simulated NVIDIA driver with ``pynvml``'s interface, for tests and benchmarks.

Put it in ``sys.modules["pynvml"]`` (see :func:`install`) and the plugin's own
code, unchanged, runs against it: the point is that the code under test is the
code that runs on a real GPU. It behaves like the driver where that matters:

* power in milliwatts, energy in millijoules, an energy counter that only grows;
* ``NVMLError_NotSupported`` for the energy counter before Volta, and for power
  and energy of a MIG slice (NVML measures whole GPUs only);
* the counter's update period (``counter_period_s``; real boards about 100 ms) and
  its faults (``counter_quirk``: frozen, backwards, jump; :data:`COUNTER_QUIRKS`),
  and a power reading averaged over a trailing window (``power_average_s``), all
  off by default;
* the measurement quirks of issue 37 (each off by default; :data:`MEASUREMENT_QUIRKS` says what each
  models and its source): a counter that moves in coarse steps (``counter_step_mj``), a power
  reading refreshed every ``power_period_s`` from the first ``power_coverage`` of each period
  (A100/H100: 25 ms of 100 ms), and a load that comes and goes (``load_wave``: [period s, busy
  fraction]; idle the rest), which is what makes a partial coverage miss energy;
* temperature-dependent power (``thermal_tau_s`` > 0; off by default): the die heats and
  cools towards ``ambient_c + thermal_c_per_w x draw`` with time constant ``thermal_tau_s``,
  and leakage adds ``leakage_w_per_c`` per degree above ``ambient_c`` to the draw, within the
  power limit (a capped GPU spends it on leakage instead of work: :func:`useful_w`). So GPUs
  measured back to back draw more the later they come (ML.ENERGY's "thermally stable
  profiling", upstream's ``zeus.profile``; issue 37); :mod:`zeus_core.profiling` is the answer;
* ``NVMLError_NoPermission`` for every setter unless the driver state is
  ``privileged``: ``True`` (every process may, as if all ran as root),
  ``False`` (none may), or ``"root"`` (like the real driver: only a process
  holding CAP_SYS_ADMIN, which root has and loses when it drops to another
  user; so a root ``zeus daemon`` and an unprivileged client share one driver
  state and get the real driver's answers);
* the power field values (``NVML_FI_DEV_POWER_INSTANT`` / ``..._AVERAGE``) at GPU scope where
  ``power_fields`` is true, and ``..._AVERAGE`` at memory scope where ``memory_power_w`` is set
  (``NVML_ERROR_NOT_SUPPORTED`` in the field's ``nvmlReturn`` otherwise); the die temperature;
* ``NVMLError_InvalidArgument`` for a limit outside the constraints or an
  unknown clock; ``NVMLError_Uninitialized`` before ``nvmlInit``;
* memory-clock locking (``nvmlDeviceSetMemoryLockedClocks`` / ``Reset...``)
  from Ampere on, and only on GPUs whose ``memory_clock_lock`` is true (some
  boards refuse it): ``NVMLError_NotSupported`` otherwise, checked after the
  permission like the driver; a clock not in ``mem_clocks`` is an invalid argument;
  ``NVMLError_LibraryNotFound`` from ``nvmlInit`` when no driver state exists
  (a machine without the NVIDIA driver);
* the compute processes on a GPU (``processes``: PID, SM utilisation in percent, MIG slice;
  :func:`set_processes`), listed by ``nvmlDeviceGetComputeRunningProcesses`` (with their GPU
  instance on MIG) and sampled by ``nvmlDeviceGetProcessUtilization`` /
  ``nvmlDeviceGetProcessesUtilizationInfo`` as the driver does: a sample every
  ``process_sample_period_s`` of the host's clock, a buffer of ``process_sample_buffer_s``, one
  entry per process with SM activity and a sample newer than ``lastSeenTimeStamp`` (µs), stamped
  with its latest sample, ``NVML_ERROR_NOT_FOUND`` when there is none; on a GPU in MIG mode the
  whole-GPU handle answers ``NOT_SUPPORTED``, and so does each MIG instance's handle unless
  ``mig_process_utilization`` (a driver that samples per instance); ``nvmlDeviceGetAttributes``
  gives a MIG instance's slice count (``mig_slice_counts``).

Outside tests, ``ZEUS_FAKE_NVML=PATH`` makes the ``nvml`` device use this
module instead of ``pynvml`` (:func:`zeus_plugins_nvml.control.nvml_module`),
so a job with ``[device] plugin = "nvml"`` runs on a machine without a GPU;
``python -m zeus_plugins_nvml.fake_pynvml PATH [--gpus N] [--privileged | --root-only]``
writes the state first.

The driver state is a JSON file named by ``$ZEUS_FAKE_NVML``, shared by every
process like a real driver's: a setting changed by a process that is then
SIGKILLed stays changed for the next one, and the background power poller
(another process) sees the same GPUs. Energy is computed from the draw since
the last change of state, so readings need no background activity. The draw
of a GPU is ``min(demand, limit)`` scaled by its locked SM clock; a test sets
``demand_w`` to model load (:func:`set_demand`).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import attrs
import pynvml as _real

from zeus_core.daemon import CAP_SYS_ADMIN
from zeus_core.devicekit import simulated

ENV = "ZEUS_FAKE_NVML"

# Constants and error classes are the real ones, so `except pynvml.NVMLError_...`
# in the plugin matches what the fake raises.
for _name in dir(_real):
    if _name.startswith(("NVML_", "NVMLError")):
        globals()[_name] = getattr(_real, _name)
NVMLError = _real.NVMLError


def _err(code: int) -> Exception:
    return _real.NVMLError(code)


# --------------------------------------------------------------------------- the driver state


@attrs.define
class FakeGpu:
    """One simulated GPU. Watts and MHz here; the NVML interface converts to mW."""

    name: str = "NVIDIA A100-SXM4-40GB"
    uuid: str = ""
    arch: int = 7  # NVML_DEVICE_ARCH_AMPERE
    min_limit_w: float = 100.0
    max_limit_w: float = 400.0
    default_limit_w: float = 400.0
    limit_w: float | None = None
    idle_w: float = 60.0
    demand_w: float = 250.0
    mem_clocks: list[int] = attrs.field(factory=lambda: [1215])
    graphics_clocks: list[int] = attrs.field(factory=lambda: list(range(1410, 209, -15)))
    locked_clocks: list[int] | None = None
    memory_clock_lock: bool = True  # False: the board refuses memory-clock locks (NotSupported), as some do
    locked_mem_clocks: list[int] | None = None
    mig_slices: list[str] = attrs.field(factory=list)  # MIG UUIDs; non-empty = MIG mode on
    energy_mj: float = 1.0e9  # counter value at the anchor (a driver loaded for a while)
    anchor_t: float | None = None
    counter_period_s: float = 0.0  # > 0: the counter only moves in steps of this period (real boards: about 0.1 s)
    counter_quirk: str = ""  # "", "frozen", "backwards" or "jump": a faulty counter (see COUNTER_QUIRKS)
    # > 0: nvmlDeviceGetPowerUsage and the POWER_AVERAGE field report the draw averaged over this trailing
    # window (GA100's default reading is an average; other Ampere-and-later boards average over 1 s:
    # Yang et al., SC'24); the POWER_INSTANT field stays instant. 0: every reading is instant.
    power_average_s: float = 0.0
    # > 0: nvmlDeviceGetPowerUsage (when not averaged) refreshes every power_period_s and reports the mean draw over
    # the first power_coverage of the latest whole period (A100/H100: 25 ms of each 100 ms, Yang et al., SC'24)
    power_period_s: float = 0.0
    power_coverage: float = 1.0
    counter_step_mj: float = 0.0  # > 0: the counter moves in steps of this many mJ (a coarse counter)
    # [period s, busy fraction]: the GPU draws its draw for the first busy fraction of each period (of the host's
    # monotonic clock) and idle_w for the rest; None: a steady draw. Not combined with thermal_tau_s.
    load_wave: list[float] | None = None
    prev_draw_w: float | None = None  # the draw before the last change of state (what an average still holds)
    temperature_c: float = 45
    power_fields: bool = True  # False: a driver without the POWER_INSTANT/AVERAGE field values (NotSupported)
    memory_power_w: float | None = None  # the memory domain (H100-class boards); None: NotSupported
    # > 0: the die's thermal time constant (s), and temperature-dependent power (see the module docstring):
    # temperature_c is then the die's at the anchor, relaxing towards ambient_c + thermal_c_per_w x draw;
    # real boards: tens of seconds, about 0.1-0.2 degrees per watt, leakage of a watt or so per degree
    thermal_tau_s: float = 0.0
    ambient_c: float = 45.0
    thermal_c_per_w: float = 0.12
    leakage_w_per_c: float = 1.0
    # compute processes: {"pid": int, "sm": SM utilisation in percent, "mig": MIG slice index or None}
    processes: list[dict] = attrs.field(factory=list)
    process_sample_period_s: float = 0.1  # how often the driver samples per-process utilisation
    process_sample_buffer_s: float = 60.0  # how far back its sample buffer reaches
    mig_process_utilization: bool = False  # True: MIG instances' handles answer per-process utilisation
    mig_slice_counts: list[int] = attrs.field(factory=list)  # each MIG instance's GPU-instance slices (default 1 each)


def _uuid(i: int) -> str:
    return f"GPU-{i:08x}-fa6e-4e5d-9c1b-{0xA100 + i:012x}"


def create(
    path: str | os.PathLike[str],
    gpus: list[FakeGpu] | int = 1,
    privileged: bool | str = False,
    driver_version: str = "550.54.15",
) -> Path:
    """Write a driver state with ``gpus`` (a count of default A100s or a list) and return its path.

    ``privileged``: who may call setters, ``True``, ``False`` or ``"root"`` (see the module docstring).
    """
    simulated.check_privilege_mode(privileged)
    if isinstance(gpus, int):
        gpus = [FakeGpu() for _ in range(gpus)]
    now = time.monotonic()
    for i, g in enumerate(gpus):
        g.uuid = g.uuid or _uuid(i)
        g.limit_w = g.default_limit_w if g.limit_w is None else g.limit_w
        g.anchor_t = now if g.anchor_t is None else g.anchor_t
    state = {"driver_version": driver_version, "privileged": privileged, "gpus": [attrs.asdict(g) for g in gpus]}
    path = simulated.write_state(path, state)
    _shared.forget()
    return path


def install(path: str | os.PathLike[str], monkeypatch: Any = None) -> types.ModuleType:
    """Make ``import pynvml`` return this module, driven by the state at ``path``.

    With pytest's ``monkeypatch`` the change is undone after the test.
    """
    _shared.forget()
    return simulated.install(sys.modules[__name__], "pynvml", ENV, path, monkeypatch)


# No $ZEUS_FAKE_NVML: no library; no state there: no driver loaded. Threads of one process
# share the parsed state, as they share a real driver.
_shared = simulated.SharedState(
    ENV, unset=lambda: _err(_real.NVML_ERROR_LIBRARY_NOT_FOUND), missing=lambda: _err(_real.NVML_ERROR_DRIVER_NOT_LOADED)
)
_state = _shared.read
_mutate = _shared.changing
_thread_lock = threading.RLock()  # the init count


def _draw_w(g: dict) -> float:
    top = min(g["demand_w"], g["limit_w"])
    if g["locked_clocks"]:
        top = g["idle_w"] + (top - g["idle_w"]) * g["locked_clocks"][1] / max(g["graphics_clocks"])
    return max(top, g["idle_w"])


#: The counter faults ``counter_quirk`` simulates (the plugin's check at open must refuse each),
#: and where each is seen. A missing counter is ``arch`` before Volta (NVML: NotSupported); the
#: update period is ``counter_period_s`` and the resolution is NVML's, 1 mJ.
COUNTER_QUIRKS = {
    "frozen": "the counter stands still under load (a stuck firmware accumulator: upstream Zeus validates AMD counters for this)",
    "backwards": "the counter runs backwards (a driver reload or GPU reset restarts it; a firmware fault)",
    "jump": "the counter counts 1000 times the energy drawn (a wrong unit or a torn 64-bit read): "
    "steps beyond what the board's maximum power allows",
}


def _thermal(g: dict) -> tuple[float, float, float, float] | None:
    """With the temperature quirk: (A, B, tau, cap) of the draw ``min(A + B exp(-t/tau), cap)`` t seconds after the anchor."""
    tau = g.get("thermal_tau_s", 0.0)
    if tau <= 0:
        return None
    base, amb, leak = _draw_w(g), g["ambient_c"], g["leakage_w_per_c"]
    steady = amb + g["thermal_c_per_w"] * base  # the temperature the draw without leakage heats towards
    return base + leak * (steady - amb), leak * (g["temperature_c"] - steady), tau, max(base, g["limit_w"])


def temperature_at(g: dict, now: float) -> float:
    """The die's temperature at ``now`` (°C; constant without the temperature quirk)."""
    tau = g.get("thermal_tau_s", 0.0)
    if tau <= 0:
        return float(g["temperature_c"])
    steady = g["ambient_c"] + g["thermal_c_per_w"] * _draw_w(g)
    return steady + (g["temperature_c"] - steady) * math.exp(-max(0.0, now - g["anchor_t"]) / tau)


def _power_at(g: dict, now: float) -> float:
    """The draw at ``now`` (W): :func:`_draw_w`, plus leakage with the temperature quirk."""
    if g.get("load_wave"):
        return _wave_w(g, now)
    th = _thermal(g)
    if th is None:
        return _draw_w(g)
    a, b, tau, cap = th
    return min(a + b * math.exp(-max(0.0, now - g["anchor_t"]) / tau), cap)


def _drawn_j(g: dict, now: float) -> float:
    """The energy drawn from the anchor to ``now`` (J): the integral of :func:`_power_at`, in closed form."""
    t = max(0.0, now - g["anchor_t"])
    if g.get("load_wave"):
        return _wave_j(g, g["anchor_t"], g["anchor_t"] + t)
    th = _thermal(g)
    if th is None:
        return _draw_w(g) * t
    a, b, tau, cap = th

    def free(lo: float, hi: float) -> float:  # the integral of a + b exp(-x/tau) over [lo, hi]
        return a * (hi - lo) + b * tau * (math.exp(-lo / tau) - math.exp(-hi / tau))

    # a + b exp(-x/tau) is monotone, so it crosses the cap at most once
    cross = -tau * math.log((cap - a) / b) if b != 0 and 0 < (cap - a) / b < 1 else None
    edges = [0.0, *([cross] if cross is not None and cross < t else []), t]
    total = 0.0
    for lo, hi in zip(edges, edges[1:], strict=False):
        mid = (lo + hi) / 2
        total += cap * (hi - lo) if a + b * math.exp(-mid / tau) > cap else free(lo, hi)
    return total


#: The measurement quirks (issue 37 item 2) and their sources; each is off by default and switched on by
#: the FakeGpu fields named. Missing counters (``arch`` before Volta) and faulty ones (``counter_quirk``)
#: are :data:`COUNTER_QUIRKS`'.
MEASUREMENT_QUIRKS = {
    "counter_period_s": "the energy counter updates about every 100 ms (Yang et al., SC'24, 70+ GPUs against an external meter)",
    "counter_step_mj": "a counter that moves in coarse steps: a window sees its energy only to a step",
    "power_period_s": "the power reading refreshes every period from its first power_coverage (A100/H100: 25 ms of 100 ms; SC'24)",
    "power_average_s": "the default power reading is a trailing average (GA100; 1 s on other Ampere-and-later boards; SC'24)",
    "load_wave": "a load that comes and goes within a refresh period, which a part-time reading sees only in part",
}


def _busy_s(period: float, duty: float, t: float) -> float:
    """Seconds of busy phase in [0, t] of a wave busy for the first ``duty`` of each ``period``."""
    whole, rest = divmod(t, period)
    return whole * duty * period + min(rest, duty * period)


def _wave_j(g: dict, t0: float, t1: float) -> float:
    """Energy (J) the wave draws over [t0, t1] (monotonic seconds)."""
    period, duty = g["load_wave"][0], g["load_wave"][1]
    busy = _busy_s(period, duty, t1) - _busy_s(period, duty, t0)
    return _draw_w(g) * busy + g["idle_w"] * (t1 - t0 - busy)


def _wave_w(g: dict, now: float) -> float:
    period, duty = g["load_wave"][0], g["load_wave"][1]
    return _draw_w(g) if now % period < duty * period else float(g["idle_w"])


def _covered_w(g: dict, now: float) -> float:
    """A part-time reading: the mean draw over the first ``power_coverage`` of the latest whole refresh period."""
    period, part = g["power_period_s"], g.get("power_coverage", 1.0)
    start = (now // period - 1) * period
    if not g.get("load_wave"):
        return _power_at(g, start)
    return _wave_j(g, start, start + part * period) / (part * period)


def true_energy_j(index: int, now: float | None = None) -> float:
    """The energy GPU ``index`` has drawn (J) since the driver state's counter origin, at ``now`` (default: now):
    what a counter without update period or steps would read (tests compare figures against it; not
    with a ``counter_quirk``, whose counter counts something else)."""
    g = _state()["gpus"][index]
    return g["energy_mj"] / 1000.0 + _drawn_j(g, time.monotonic() if now is None else now)


def useful_w(index: int) -> float:
    """What GPU ``index`` spends on work now (W): its draw less leakage (a simulated workload's speed follows it)."""
    g = _state()["gpus"][index]
    now = time.monotonic()
    leak = g["leakage_w_per_c"] * (temperature_at(g, now) - g["ambient_c"]) if g.get("thermal_tau_s", 0.0) > 0 else 0.0
    return _power_at(g, now) - leak


def _counted_mj(g: dict, now: float) -> float:
    """What the counter has counted by ``now`` (the energy drawn, or what its quirk makes of it)."""
    # without the temperature quirk, the product as it always was (the same figures to the last bit)
    drawn = _drawn_j(g, now) * 1000.0 if _thermal(g) is not None else _draw_w(g) * 1000.0 * max(0.0, now - g["anchor_t"])
    quirk = g.get("counter_quirk", "")
    if quirk:
        drawn *= {"frozen": 0.0, "backwards": -1.0, "jump": 1000.0}[quirk]
    return g["energy_mj"] + drawn


def _energy_mj(g: dict, now: float) -> float:
    if g["counter_period_s"] > 0:
        now = now - (now % g["counter_period_s"])
    step = g.get("counter_step_mj", 0.0)
    if step > 0:
        counted = _counted_mj(g, now)
        return counted - counted % step
    return _counted_mj(g, now)


def _reading_w(g: dict) -> float:
    """The power reading: the draw, or its average over the trailing ``power_average_s``, or a part-time reading."""
    if g.get("power_period_s", 0.0) > 0 and g.get("power_average_s", 0.0) <= 0:
        return _covered_w(g, time.monotonic())
    draw, window = _power_at(g, time.monotonic()), g.get("power_average_s", 0.0)
    since = time.monotonic() - g["anchor_t"]
    if window <= 0 or g.get("prev_draw_w") is None or since >= window:
        return draw
    return (g["prev_draw_w"] * (window - since) + draw * since) / window


def _reanchor(g: dict) -> None:
    """Fold the energy drawn so far into the counter before the draw changes."""
    now = time.monotonic()
    g["energy_mj"] = _counted_mj(g, now)
    g["prev_draw_w"] = _power_at(g, now)
    if g.get("thermal_tau_s", 0.0) > 0:
        g["temperature_c"] = temperature_at(g, now)
    g["anchor_t"] = now


def set_demand(index: int, watts: float) -> None:
    """Change the load on GPU ``index`` (the power it would draw without a limit)."""
    with _mutate() as state:
        g = state["gpus"][index]
        _reanchor(g)
        g["demand_w"] = float(watts)


def set_processes(index: int, processes: list[dict]) -> None:
    """The compute processes on GPU ``index``: ``{"pid", "sm" (percent), "mig" (slice index, optional)}`` each."""
    with _mutate() as state:
        state["gpus"][index]["processes"] = [{"pid": int(p["pid"]), "sm": float(p.get("sm", 0.0)), "mig": p.get("mig")} for p in processes]


def read_state(path: str | os.PathLike[str] | None = None) -> dict:
    """The driver state as a dict (for assertions)."""
    return _shared.fresh(path)


# --------------------------------------------------------------------------- handles


@attrs.frozen
class _Handle:
    index: int
    mig: int | None = None


_init_count = 0


def _check_init() -> None:
    if _init_count <= 0:
        raise _err(_real.NVML_ERROR_UNINITIALIZED)


def _gpu(handle: _Handle, allow_mig: bool = False) -> dict:
    _check_init()
    if not isinstance(handle, _Handle):
        raise _err(_real.NVML_ERROR_INVALID_ARGUMENT)
    gpus = _state()["gpus"]
    if handle.index >= len(gpus):
        raise _err(_real.NVML_ERROR_GPU_IS_LOST)
    if handle.mig is not None and not allow_mig:
        raise _err(_real.NVML_ERROR_NOT_SUPPORTED)
    return gpus[handle.index]


def _setter(handle: _Handle) -> tuple[int, int | None]:
    _gpu(handle)  # MIG slices cannot be steered
    if not simulated.may_change(_state()["privileged"], CAP_SYS_ADMIN):
        raise _err(_real.NVML_ERROR_NO_PERMISSION)
    return handle.index, handle.mig


# --------------------------------------------------------------------------- pynvml interface


def nvmlInit() -> None:
    global _init_count
    with _thread_lock:
        _state()
        _init_count += 1


def nvmlInitWithFlags(flags: int) -> None:
    nvmlInit()


def nvmlShutdown() -> None:
    global _init_count
    _check_init()
    _init_count -= 1


def nvmlSystemGetDriverVersion() -> str:
    _check_init()
    return _state()["driver_version"]


def nvmlSystemGetCudaDriverVersion() -> int:
    """The CUDA driver API version as NVML gives it: 1000 x major + 10 x minor."""
    _check_init()
    major, minor = _state().get("cuda_driver_version", "12.4").split(".")[:2]
    return 1000 * int(major) + 10 * int(minor)


def nvmlDeviceGetCount() -> int:
    _check_init()
    return len(_state()["gpus"])


def nvmlDeviceGetHandleByIndex(index: int) -> _Handle:
    _check_init()
    if not 0 <= index < len(_state()["gpus"]):
        raise _err(_real.NVML_ERROR_INVALID_ARGUMENT)
    return _Handle(index)


def nvmlDeviceGetHandleByUUID(uuid: str | bytes) -> _Handle:
    _check_init()
    if isinstance(uuid, bytes):
        uuid = uuid.decode()
    for i, g in enumerate(_state()["gpus"]):
        if g["uuid"] == uuid:
            return _Handle(i)
        if uuid in g["mig_slices"]:
            return _Handle(i, g["mig_slices"].index(uuid))
    raise _err(_real.NVML_ERROR_NOT_FOUND)


def nvmlDeviceGetUUID(handle: _Handle) -> str:
    g = _gpu(handle, allow_mig=True)
    return g["uuid"] if handle.mig is None else g["mig_slices"][handle.mig]


def nvmlDeviceGetName(handle: _Handle) -> str:
    g = _gpu(handle, allow_mig=True)
    return g["name"] if handle.mig is None else f"{g['name']} MIG {handle.mig}g"


def nvmlDeviceGetIndex(handle: _Handle) -> int:
    _gpu(handle)
    return handle.index


def nvmlDeviceGetArchitecture(handle: _Handle) -> int:
    return _gpu(handle, allow_mig=True)["arch"]


def nvmlDeviceGetMigMode(handle: _Handle) -> list[int]:
    g = _gpu(handle)
    if g["arch"] < _real.NVML_DEVICE_ARCH_AMPERE:
        raise _err(_real.NVML_ERROR_NOT_SUPPORTED)
    on = 1 if g["mig_slices"] else 0
    return [on, on]


def nvmlDeviceIsMigDeviceHandle(handle: _Handle) -> bool:
    _gpu(handle, allow_mig=True)
    return handle.mig is not None


def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle: _Handle) -> _Handle:
    _gpu(handle, allow_mig=True)
    if handle.mig is None:
        raise _err(_real.NVML_ERROR_INVALID_ARGUMENT)
    return _Handle(handle.index)


def nvmlDeviceGetMaxMigDeviceCount(handle: _Handle) -> int:
    return 7 if _gpu(handle)["arch"] >= _real.NVML_DEVICE_ARCH_AMPERE else 0


def nvmlDeviceGetMigDeviceHandleByIndex(handle: _Handle, index: int) -> _Handle:
    g = _gpu(handle)
    if not 0 <= index < len(g["mig_slices"]):
        raise _err(_real.NVML_ERROR_NOT_FOUND)
    return _Handle(handle.index, index)


def nvmlDeviceGetTotalEnergyConsumption(handle: _Handle) -> int:
    g = _gpu(handle)
    if g["arch"] < _real.NVML_DEVICE_ARCH_VOLTA:
        raise _err(_real.NVML_ERROR_NOT_SUPPORTED)
    return int(_energy_mj(g, time.monotonic()))


def nvmlDeviceGetPowerUsage(handle: _Handle) -> int:
    return int(_reading_w(_gpu(handle)) * 1000)


class _FieldValue:
    __slots__ = ("fieldId", "scopeId", "nvmlReturn", "value", "timestamp", "latencyUsec", "valueType")
    fieldId: int
    scopeId: int
    nvmlReturn: int
    value: Any
    timestamp: int
    latencyUsec: int
    valueType: int


def nvmlDeviceGetFieldValues(handle: _Handle, fieldIds: list) -> list:
    g = _gpu(handle)
    out = []
    for f in fieldIds:
        fid, scope = f if isinstance(f, tuple) else (f, 0)
        v = _FieldValue()
        v.fieldId, v.scopeId, v.timestamp, v.latencyUsec, v.valueType = fid, scope, time.time_ns() // 1000, 0, 1
        power_field = fid in (_real.NVML_FI_DEV_POWER_INSTANT, _real.NVML_FI_DEV_POWER_AVERAGE) and g.get("power_fields", True)
        memory = g.get("memory_power_w")
        if power_field and scope == _real.NVML_POWER_SCOPE_GPU:
            v.nvmlReturn = _real.NVML_SUCCESS
            watts = _power_at(g, time.monotonic()) if fid == _real.NVML_FI_DEV_POWER_INSTANT else _reading_w(g)
            v.value = types.SimpleNamespace(uiVal=int(watts * 1000))
        elif power_field and fid == _real.NVML_FI_DEV_POWER_AVERAGE and scope == _real.NVML_POWER_SCOPE_MEMORY and memory is not None:
            v.nvmlReturn = _real.NVML_SUCCESS
            v.value = types.SimpleNamespace(uiVal=int(memory * 1000))
        else:
            v.nvmlReturn = _real.NVML_ERROR_NOT_SUPPORTED
            v.value = types.SimpleNamespace(uiVal=0)
        out.append(v)
    return out


def nvmlDeviceGetPowerManagementLimitConstraints(handle: _Handle) -> list[int]:
    g = _gpu(handle)
    return [int(g["min_limit_w"] * 1000), int(g["max_limit_w"] * 1000)]


def nvmlDeviceGetPowerManagementLimit(handle: _Handle) -> int:
    return int(_gpu(handle)["limit_w"] * 1000)


def nvmlDeviceGetEnforcedPowerLimit(handle: _Handle) -> int:
    return nvmlDeviceGetPowerManagementLimit(handle)


def nvmlDeviceGetPowerManagementDefaultLimit(handle: _Handle) -> int:
    return int(_gpu(handle)["default_limit_w"] * 1000)


def nvmlDeviceSetPowerManagementLimit(handle: _Handle, limit_mw: int) -> None:
    index, _ = _setter(handle)
    with _mutate() as state:
        g = state["gpus"][index]
        if not g["min_limit_w"] * 1000 <= limit_mw <= g["max_limit_w"] * 1000:
            raise _err(_real.NVML_ERROR_INVALID_ARGUMENT)
        _reanchor(g)
        g["limit_w"] = limit_mw / 1000.0


def nvmlDeviceGetSupportedMemoryClocks(handle: _Handle) -> list[int]:
    return list(_gpu(handle)["mem_clocks"])


def nvmlDeviceGetSupportedGraphicsClocks(handle: _Handle, memoryClockMHz: int) -> list[int]:
    g = _gpu(handle)
    if memoryClockMHz not in g["mem_clocks"]:
        raise _err(_real.NVML_ERROR_NOT_FOUND)
    return list(g["graphics_clocks"])


def nvmlDeviceSetGpuLockedClocks(handle: _Handle, minGpuClockMHz: int, maxGpuClockMHz: int) -> None:
    index, _ = _setter(handle)
    with _mutate() as state:
        g = state["gpus"][index]
        if g["arch"] < _real.NVML_DEVICE_ARCH_VOLTA:
            raise _err(_real.NVML_ERROR_NOT_SUPPORTED)
        lo, hi = min(g["graphics_clocks"]), max(g["graphics_clocks"])
        if not lo <= minGpuClockMHz <= maxGpuClockMHz <= hi:
            raise _err(_real.NVML_ERROR_INVALID_ARGUMENT)
        _reanchor(g)
        g["locked_clocks"] = [int(minGpuClockMHz), int(maxGpuClockMHz)]


def nvmlDeviceResetGpuLockedClocks(handle: _Handle) -> None:
    index, _ = _setter(handle)
    with _mutate() as state:
        g = state["gpus"][index]
        if g["arch"] < _real.NVML_DEVICE_ARCH_VOLTA:
            raise _err(_real.NVML_ERROR_NOT_SUPPORTED)
        _reanchor(g)
        g["locked_clocks"] = None


def _memory_lockable(g: dict) -> dict:
    if g["arch"] < _real.NVML_DEVICE_ARCH_AMPERE or not g.get("memory_clock_lock", True):
        raise _err(_real.NVML_ERROR_NOT_SUPPORTED)
    return g


def nvmlDeviceSetMemoryLockedClocks(handle: _Handle, minMemClockMHz: int, maxMemClockMHz: int) -> None:
    index, _ = _setter(handle)
    with _mutate() as state:
        g = _memory_lockable(state["gpus"][index])
        lo, hi = int(minMemClockMHz), int(maxMemClockMHz)
        if lo > hi or lo not in g["mem_clocks"] or hi not in g["mem_clocks"]:
            raise _err(_real.NVML_ERROR_INVALID_ARGUMENT)
        g["locked_mem_clocks"] = [lo, hi]


def nvmlDeviceResetMemoryLockedClocks(handle: _Handle) -> None:
    index, _ = _setter(handle)
    with _mutate() as state:
        g = _memory_lockable(state["gpus"][index])
        g["locked_mem_clocks"] = None


def nvmlDeviceGetClockInfo(handle: _Handle, clock_type: int) -> int:
    g = _gpu(handle)
    if clock_type == _real.NVML_CLOCK_MEM:
        locked = g.get("locked_mem_clocks")
        return locked[1] if locked else max(g["mem_clocks"])
    return g["locked_clocks"][1] if g["locked_clocks"] else max(g["graphics_clocks"])


def nvmlDeviceGetMaxClockInfo(handle: _Handle, clock_type: int) -> int:
    g = _gpu(handle)
    return max(g["mem_clocks"]) if clock_type == _real.NVML_CLOCK_MEM else max(g["graphics_clocks"])


def nvmlDeviceGetTemperature(handle: _Handle, sensor: int) -> int:
    if sensor != _real.NVML_TEMPERATURE_GPU:
        raise _err(_real.NVML_ERROR_INVALID_ARGUMENT)
    return int(temperature_at(_gpu(handle), time.monotonic()))


def nvmlDeviceGetPersistenceMode(handle: _Handle) -> int:
    _gpu(handle)
    return _real.NVML_FEATURE_ENABLED


def nvmlDeviceGetC2cModeInfoV(handle: _Handle) -> Any:
    _gpu(handle)
    raise _err(_real.NVML_ERROR_NOT_SUPPORTED)


def _processes_of(handle: _Handle) -> tuple[dict, list[dict]]:
    g = _gpu(handle, allow_mig=True)
    procs = g.get("processes", [])
    return g, procs if handle.mig is None else [p for p in procs if p.get("mig") == handle.mig]


def nvmlDeviceGetComputeRunningProcesses(handle: _Handle) -> list[Any]:
    """The compute processes (on a MIG instance's handle, that instance's; on MIG, each with its instance)."""
    _, procs = _processes_of(handle)
    none = _real.NVML_VALUE_NOT_AVAILABLE_uint.value
    return [
        types.SimpleNamespace(
            pid=p["pid"],
            usedGpuMemory=1 << 30,
            gpuInstanceId=none if p.get("mig") is None else p["mig"],
            computeInstanceId=none if p.get("mig") is None else 0,
        )
        for p in procs
    ]


def _utilisation(handle: _Handle, last_seen_us: int) -> list[tuple[int, int, int]]:
    """(pid, timestamp in µs, smUtil) of each process with a sample newer than ``last_seen_us``."""
    g, procs = _processes_of(handle)
    if g["arch"] < _real.NVML_DEVICE_ARCH_MAXWELL:
        raise _err(_real.NVML_ERROR_NOT_SUPPORTED)
    if g["mig_slices"] and (handle.mig is None or not g.get("mig_process_utilization", False)):
        raise _err(_real.NVML_ERROR_NOT_SUPPORTED)
    period = g.get("process_sample_period_s", 0.1)
    now = time.time()
    latest = int(now / period)  # the number of the latest sample
    first = int(max(last_seen_us / 1e6, now - g.get("process_sample_buffer_s", 60.0)) / period) + 1
    active = [p for p in procs if p["sm"] > 0]
    if first > latest or not active:
        raise _err(_real.NVML_ERROR_NOT_FOUND)
    stamp = int(latest * period * 1e6)
    return [(p["pid"], stamp, int(round(p["sm"]))) for p in active]


def nvmlDeviceGetProcessUtilization(handle: _Handle, timeStamp: int) -> list[Any]:
    return [
        _real.c_nvmlProcessUtilizationSample_t(pid=pid, timeStamp=t, smUtil=sm, memUtil=0, encUtil=0, decUtil=0)
        for pid, t, sm in _utilisation(handle, timeStamp)
    ]


def nvmlDeviceGetProcessesUtilizationInfo(handle: _Handle, timeStamp: int) -> list[Any]:
    return [
        _real.c_nvmlProcessUtilizationInfo_v1_t(timeStamp=t, pid=pid, smUtil=sm, memUtil=0, encUtil=0, decUtil=0, jpgUtil=0, ofaUtil=0)
        for pid, t, sm in _utilisation(handle, timeStamp)
    ]


def nvmlDeviceGetAttributes(handle: _Handle) -> Any:
    """A device's attributes; the slice counts are those of a MIG instance (the whole GPU: 0)."""
    g = _gpu(handle, allow_mig=True)
    counts = g.get("mig_slice_counts") or [1] * len(g["mig_slices"])
    slices = counts[handle.mig] if handle.mig is not None else 0
    sms = 108 if handle.mig is None else 14 * slices
    return _real.c_nvmlDeviceAttributes(
        multiprocessorCount=sms, gpuInstanceSliceCount=slices, computeInstanceSliceCount=slices, memorySizeMB=40960
    )


nvmlDeviceGetAttributes_v2 = nvmlDeviceGetAttributes


def nvmlDeviceGetGpuInstanceId(handle: _Handle) -> int:
    """A MIG instance's GPU-instance id (its slice index here); the whole GPU's handle: invalid argument."""
    _gpu(handle, allow_mig=True)
    if handle.mig is None:
        raise _err(_real.NVML_ERROR_INVALID_ARGUMENT)
    return handle.mig


def _nvmlGetFunctionPointer(name: str) -> Any:
    raise _err(_real.NVML_ERROR_FUNCTION_NOT_FOUND)


__getattr__ = simulated.unsimulated(__name__, "nvml")  # anything not simulated fails loudly instead of reaching the real library


def main(argv: list[str] | None = None) -> None:
    """``python -m zeus_plugins_nvml.fake_pynvml PATH``: write a simulated driver state."""
    p = simulated.command_line(
        "zeus_plugins_nvml.fake_pynvml", "NVIDIA driver (A100 GPUs)", ENV, "power limits and clocks", "CAP_SYS_ADMIN"
    )
    p.add_argument("--graphics-clocks", help="comma-separated SM clocks in MHz (default 1410 down to 210 in 15 MHz steps)")
    p.add_argument("--demand-w", type=float, default=250.0, help="power each GPU draws at its highest clock (W)")
    a, privileged = simulated.parse_command_line(p, argv)
    clocks = None
    if a.graphics_clocks:
        try:
            clocks = sorted({int(c) for c in a.graphics_clocks.split(",") if c.strip()}, reverse=True)
        except ValueError:
            p.error(f"--graphics-clocks must be comma-separated integers (MHz), got {a.graphics_clocks!r}")
        if not clocks or min(clocks) <= 0:
            p.error(f"--graphics-clocks needs positive clocks, got {a.graphics_clocks!r}")
    extra: dict[str, Any] = {"graphics_clocks": clocks} if clocks else {}
    gpus = [FakeGpu(demand_w=a.demand_w, **extra) for _ in range(a.gpus)]
    path = create(a.path, gpus, privileged=privileged)
    print(f"simulated driver with {a.gpus} GPU(s) in {path}; use it with {ENV}={Path(path).resolve()}")


if __name__ == "__main__":
    main()

"""Who ran on each AMD GPU in a window, from amdsmi: the input of energy attribution (:mod:`zeus_core.attribution`).

amdsmi's call, as the library answers it (ROCm amdsmi 7.0, ``amdsmi_interface.py``):
``amdsmi_get_gpu_process_list(handle)`` lists the processes that have the GPU open, each a dict
with ``pid``, ``name`` (``"N/A"`` where unknown), ``mem``, ``memory_usage`` (``gtt_mem``,
``cpu_mem``, ``vram_mem``: bytes), ``cu_occupancy`` and ``engine_usage``: ``gfx`` and ``enc``, the
nanoseconds each engine has run the process's work since it opened the GPU (running totals the
kernel keeps per open file, DRM's ``drm-engine-*`` in ``/proc/<pid>/fdinfo``).

Why GFX time and not a utilisation: the totals are the engine's own accounting of the time it
worked for each process, so their differences over a window share the active energy without
sampling (``gfx-time``, :data:`zeus_core.attribution.BASES`). A total is read at each window's end
and kept (with the time of the reading); a window's share of a process is its total now minus its
total at the last reading at or before the window began -- the device's open, or an earlier
window's end (back-to-back windows: the previous one's end, exact). Where that reading is older
than the window's start the shares cover a little more than the window, and the note says by how
much; a process absent from that reading counts from 0 (it opened the GPU since), and one whose
total went back is a new process on a reused PID (counted from 0 too).

Fallbacks and limits, each flagged in :attr:`~zeus_core.attribution.DeviceActivity.note`:

* processes listed but no GFX time in the window: equal shares (``equal``); ROCm's compute
  queues run through ``/dev/kfd``, whose work some kernels leave out of the DRM engine time
  (amdsmi then reports ``GFX: 0 ns`` for a busy training process), so on those nodes every share
  is equal;
* the library reads each process's ``fdinfo``, which only its own user or a holder of
  CAP_SYS_PTRACE (root) may read: without it another user's process is left out (amdsmi 7.0) or
  listed without usage (later releases), so this process's user's processes share what the others
  drew too -- said in the note whenever the list may be limited so;
* a process that closed the GPU within the window is no longer listed, so its GFX time in the
  window is lost (its share goes to the others).

Idle power: ``idle_power_w`` of ``[device]`` where set (``configured``), else the lowest power read
while no process held the GPU (``learned``), else unknown (``none``), as on NVIDIA.
"""

from __future__ import annotations

import time
from typing import Any

from zeus_core.attribution import DeviceActivity, IdlePower, ProcessActivity, ProcessNames
from zeus_core.daemon import has_capability

#: the capability that lets a process read another user's ``/proc/<pid>/fdinfo`` (what amdsmi reads)
CAP_SYS_PTRACE = 19
#: the readings kept per GPU; past it the older half is thinned (every other one dropped)
MAX_READINGS = 256
#: a baseline this much older than a window's start (s) is said in the note
STALE_S = 0.5


class GfxTimeSampler:
    """Reads :class:`~zeus_core.attribution.DeviceActivity` of each GPU of an ``amdsmi`` group."""

    def __init__(self, smi: Any, gpus: list[Any], idle_power_w: float | None = None) -> None:
        self._smi = smi
        self._gpus = gpus  # AmdGpu objects: name, handle, read_power()
        self._idle = IdlePower(idle_power_w)
        self._readings: dict[str, list[tuple[float, dict[int, int]]]] = {g.name: [] for g in gpus}  # (Unix time, pid -> gfx ns)
        self._described = ProcessNames()
        self._limited = not has_capability(CAP_SYS_PTRACE)
        for g in gpus:  # the first baseline: the device's open
            try:
                self._read(g)
            except Exception:  # noqa: BLE001 - said at the first window's end, where the read fails again
                pass

    def activity(self, since: float | None) -> dict[str, DeviceActivity]:
        """Each GPU's processes and their GFX time since ``since`` (Unix seconds); None: since the last
        reading (the daemon's accounting, which reads every GPU in turn and charges what was drawn since)."""
        out = {}
        for g in self._gpus:
            try:
                out[g.name] = self._one(g, since)
            except Exception as e:  # noqa: BLE001 - a library without the call: no attribution for this GPU (said why), never a failed window
                out[g.name] = DeviceActivity(note=f"amdsmi cannot list the processes: {e}", basis="gfx-time")
        return out

    # -- one GPU --

    def _read(self, g: Any) -> tuple[float, list[dict[str, Any]]]:
        """The process list now, kept as a reading."""
        listed = list(self._smi.amdsmi_get_gpu_process_list(g.handle))
        now = time.time()
        readings = self._readings[g.name]
        readings.append((now, {int(p["pid"]): _ns(p.get("engine_usage", {}).get("gfx")) for p in listed}))
        if len(readings) > MAX_READINGS:
            half = len(readings) // 2
            readings[:half] = readings[:half:2]
        return now, listed

    def _one(self, g: Any, since: float | None) -> DeviceActivity:
        readings = self._readings[g.name]
        notes = []
        if since is None:
            base = readings[-1] if readings else None
        elif (base := next((r for r in reversed(readings) if r[0] <= since), None)) is None and readings:
            base = readings[0]  # every reading before the window thinned out, or the window began before the open
            notes.append(f"GFX time counted from {base[0] - since:.1f} s after the window began (no earlier reading)")
        elif base is not None and since - base[0] > STALE_S:
            notes.append(f"GFX time counted from {since - base[0]:.1f} s before the window began (the last reading before it)")
        _, listed = self._read(g)
        idle_w, idle_source = self._idle.of(g.name, not listed, g.read_power)
        before = base[1] if base is not None else {}
        weights: dict[int, float] = {}
        for p in listed:
            pid, now_ns = int(p["pid"]), _ns(p.get("engine_usage", {}).get("gfx"))
            then = before.get(pid, 0)
            weights[pid] = float(now_ns - then if now_ns >= then else now_ns)
        if listed and not any(weights.values()):
            notes.append("amdsmi reports no GFX engine time for the processes in the window (equal shares)")
        if self._limited:
            notes.append("without CAP_SYS_PTRACE amdsmi may leave other users' processes out (their energy goes to those listed)")
        return DeviceActivity(self._describe(listed, weights), "process", idle_w, idle_source, "; ".join(notes), basis="gfx-time")

    def _describe(self, listed: list[dict[str, Any]], weights: dict[int, float]) -> tuple[ProcessActivity, ...]:
        """Every listed process with its GFX time, user and command (read once per PID: a window's end is
        a training loop's hot path); amdsmi's name where ``/proc`` says nothing."""
        out = []
        names = {int(p["pid"]): str(p.get("name", "")) for p in listed}
        for pid in sorted(weights):
            user, command = self._described(pid)
            name = names.get(pid, "")
            out.append(ProcessActivity(pid, weights[pid], "", user, command or ("" if name == "N/A" else name)))
        return tuple(out)


def _ns(value: Any) -> int:
    """An engine total (ns); ``"N/A"`` or anything not a count: 0."""
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


__all__ = ["CAP_SYS_PTRACE", "GfxTimeSampler"]

"""Who ran on each GPU in a window, from NVML: the input of energy attribution (:mod:`zeus_core.attribution`).

NVML's calls, as the driver answers them:

* ``nvmlDeviceGetComputeRunningProcesses``: the compute processes holding a GPU now (on MIG, each
  with its ``gpuInstanceId``); an empty list when none.
* ``nvmlDeviceGetProcessUtilization(handle, lastSeenTimeStamp)``: per process, its ``smUtil``
  (percent) from the samples the driver took after ``lastSeenTimeStamp`` (µs of the host's clock),
  stamped ``timeStamp``; ``NVML_ERROR_NOT_FOUND`` when there is no sample (nothing ran on the SMs,
  or the window was shorter than the sampling period); ``NVML_ERROR_NOT_SUPPORTED`` before Maxwell
  and on a GPU in MIG mode, where some drivers answer on each MIG instance's handle instead.

The entries of one process are summed (a driver that returns one entry per sample weighs each
sample; one that returns one per process weighs its average: the ratios are the same). On MIG a
process's ``smUtil`` is a fraction of its instance, so it is weighted by the instance's share of
the GPU's slices (``nvmlDeviceGetAttributes``' ``gpuInstanceSliceCount``).

Idle power: ``idle_power_w`` of ``[device]`` where set (``configured``), else the lowest power
reading seen while no compute process held the GPU (``learned``, read at each window's end when
the GPU is free), else unknown (``none``: every joule counts as active).
"""

from __future__ import annotations

from typing import Any

from zeus_core.attribution import DeviceActivity, IdlePower, ProcessActivity, ProcessNames


class ProcessSampler:
    """Reads :class:`~zeus_core.attribution.DeviceActivity` of each GPU of an ``nvml`` group."""

    def __init__(self, nvml: Any, gpus: list[Any], idle_power_w: float | None = None) -> None:
        self._nvml = nvml
        self._gpus = gpus  # NvmlGpu objects: name, handle, read_power()
        self._idle = IdlePower(idle_power_w)
        self._mig: dict[str, bool] = {}
        self._described = ProcessNames()

    def activity(self, since: float) -> dict[str, DeviceActivity]:
        """Each GPU's processes and their SM weights since ``since`` (Unix seconds)."""
        out = {}
        for g in self._gpus:
            try:
                out[g.name] = self._one(g, int(since * 1e6))
            except Exception as e:  # noqa: BLE001 - a driver without these calls: no attribution for this GPU (said why), never a failed window
                out[g.name] = DeviceActivity(note=f"NVML cannot list the processes: {e}")
        return out

    # -- one GPU --

    def _one(self, g: Any, since_us: int) -> DeviceActivity:
        nvml = self._nvml
        running = list(nvml.nvmlDeviceGetComputeRunningProcesses(g.handle))
        idle_w, idle_source = self._idle.of(g.name, not running, g.read_power)
        if self._in_mig(g):
            return self._mig_activity(g, since_us, running, idle_w, idle_source)
        weights = self._weights(g.handle, since_us)
        note = "" if weights else "no per-process sample in the window (NVML: Not Found)"
        procs = self._describe({p.pid: "" for p in running}, weights)
        return DeviceActivity(procs, "process", idle_w, idle_source, note)

    def _in_mig(self, g: Any) -> bool:
        if g.name not in self._mig:
            try:
                self._mig[g.name] = bool(self._nvml.nvmlDeviceGetMigMode(g.handle)[0])
            except self._nvml.NVMLError:  # before Ampere: no MIG
                self._mig[g.name] = False
        return self._mig[g.name]

    def _weights(self, handle: Any, since_us: int, scale: float = 1.0) -> dict[int, float]:
        nvml = self._nvml
        try:
            samples = nvml.nvmlDeviceGetProcessUtilization(handle, since_us)
        except nvml.NVMLError as e:
            # NOT_FOUND: no sample; pynvml raises even SUCCESS when the driver's first answer is "none at all"
            if getattr(e, "value", None) in (nvml.NVML_ERROR_NOT_FOUND, nvml.NVML_SUCCESS):
                return {}
            raise
        out: dict[int, float] = {}
        for s in samples:
            out[int(s.pid)] = out.get(int(s.pid), 0.0) + float(s.smUtil) * scale
        return out

    def _mig_activity(self, g: Any, since_us: int, running: list[Any], idle_w: float | None, idle_source: str) -> DeviceActivity:
        """Per instance where the driver samples each; else every process of the GPU, equal shares (``whole-gpu``)."""
        nvml = self._nvml
        instances = []  # (gpu instance id, MIG UUID, handle, slices)
        for i in range(nvml.nvmlDeviceGetMaxMigDeviceCount(g.handle)):
            try:
                mh = nvml.nvmlDeviceGetMigDeviceHandleByIndex(g.handle, i)
            except nvml.NVMLError_NotFound:
                continue
            instances.append(
                (
                    nvml.nvmlDeviceGetGpuInstanceId(mh),
                    nvml.nvmlDeviceGetUUID(mh),
                    mh,
                    nvml.nvmlDeviceGetAttributes(mh).gpuInstanceSliceCount,
                )
            )
        names = {gi: _text(uuid) for gi, uuid, _, _ in instances}
        holders = {p.pid: names.get(p.gpuInstanceId, "") for p in running}
        slices = sum(n for *_, n in instances) or 1
        weights: dict[int, float] = {}
        try:
            for gi, _, mh, n in instances:
                for pid, w in self._weights(mh, since_us, n / slices).items():
                    weights[pid] = weights.get(pid, 0.0) + w
                    holders.setdefault(pid, names[gi])
        except nvml.NVMLError_NotSupported:
            note = "MIG: the driver gives no per-process utilisation; the GPU's processes share its active energy equally"
            return DeviceActivity(self._describe(holders, {}), "whole-gpu", idle_w, idle_source, note)
        return DeviceActivity(self._describe(holders, weights), "mig-instance", idle_w, idle_source)

    def _describe(self, holders: dict[int, str], weights: dict[int, float]) -> tuple[ProcessActivity, ...]:
        """Every process that holds the GPU or has samples (one that ended in the window still has its
        samples), with its weight, MIG instance, user and command (read once per PID: a window's end
        is a training loop's hot path)."""
        out = []
        for pid in sorted(set(holders) | set(weights)):
            user, command = self._described(pid)
            out.append(ProcessActivity(pid, weights.get(pid, 0.0), holders.get(pid, ""), user, command))
        return tuple(out)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


__all__ = ["ProcessSampler"]

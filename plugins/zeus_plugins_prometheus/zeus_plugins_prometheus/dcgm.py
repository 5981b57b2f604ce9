"""dcgm-exporter's names for the job's GPUs, read from its devices at each scrape (``ZEUS_METRICS_NAMES``).

Why: fleet dashboards and benchmark tools query ``DCGM_FI_DEV_POWER_USAGE`` and
``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` with dcgm-exporter's labels; a node
that runs zeus instead of (or next to) dcgm-exporter then shows up on them.

The fields, their types and units are those of dcgm-exporter's
``etc/default-counters.csv`` (NVIDIA/dcgm-exporter), the labels those of its
exposition (``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname``,
``DCGM_FI_DRIVER_VERSION``; ``pod``, ``namespace``, ``container`` of its
Kubernetes mapping; ``hpc_job`` of its HPC job mapping). Only what the job's
device group reads is served, each field where the group offers it:

* ``DCGM_FI_DEV_POWER_USAGE`` (gauge, W): :class:`~zeus_core.device.PowerReadings`;
* ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` (counter, mJ): ``read_energy()``: since the
  driver loaded where the GPU has an energy counter (as DCGM), else since the job opened
  the device (a counter that restarts with the process: ``rate()``/``increase()`` handle it);
* ``DCGM_FI_DEV_GPU_TEMP`` (gauge, C): :class:`~zeus_core.device.TemperatureReadings`;
* ``DCGM_FI_DEV_POWER_MGMT_LIMIT`` (gauge, W): :class:`~zeus_core.device.PerDevicePowerLimits`;
* ``DCGM_FI_DEV_SM_CLOCK`` and ``DCGM_FI_DEV_MEM_CLOCK`` (gauges, MHz):
  :class:`~zeus_core.device.ClockReadings` (the ``nvml`` device's SM clock, the ``amdsmi``
  device's GFX clock), each where the GPU reports it.
"""

from __future__ import annotations

import functools
import logging
import re
import socket
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client.utils import floatToGoString

from zeus_core.device import ClockReadings, PerDevicePowerLimits, PowerReadings, TemperatureReadings
from zeus_core.scheduler import context

log = logging.getLogger("zeus.prometheus")

#: (name, type, help) of each field served, as dcgm-exporter's default-counters.csv has them
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "Power management limit (in W)."),
)
FIELD_NAMES = tuple(name for name, _, _ in FIELDS)

#: label -> the column of the scheduler's context (:func:`zeus_core.scheduler.context`, the one reader
#: of Slurm's and Kubernetes' variables, which every try and window records too) it comes from:
#: dcgm-exporter's names for Kubernetes and for its HPC job mapping (Slurm's job id), then Slurm's
#: step and user, which dcgm-exporter has no label for
JOB_LABELS: tuple[tuple[str, str], ...] = (
    ("pod", "k8s_pod"),
    ("namespace", "k8s_namespace"),
    ("container", "k8s_container"),
    ("hpc_job", "slurm_job_id"),
    ("slurm_step", "slurm_step_id"),
    ("slurm_user", "slurm_user"),
)
#: the labels of every series, in dcgm-exporter's order, then the job's
GPU_LABELS = ("gpu", "UUID", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION")
ALL_LABELS = GPU_LABELS + tuple(label for label, _ in JOB_LABELS) + ("zeus_job",)

_GPU_NAME = re.compile(r"^gpu(\d+)$")


def job_labels(env: Mapping[str, str]) -> dict[str, str]:
    """The scheduler's context of this process as labels (:data:`JOB_LABELS`); unknown ones absent."""
    ctx = context(env)
    return {label: ctx[column] for label, column in JOB_LABELS if ctx.get(column)}


def hostname(env: Mapping[str, str]) -> str:
    """The node's name as dcgm-exporter gives it: ``$NODE_NAME`` (Kubernetes' downward API), else the host name."""
    return env.get("NODE_NAME", "").strip() or socket.gethostname()


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class DcgmSeries:
    """The dcgm-named series of ``device``'s GPUs (its ``gpu<N>`` devices), as exposition text.

    :meth:`render` reads the devices (on the scrape's thread: every reading a device group
    offers is safe to call from another thread, as the NVML poller does); :meth:`freeze` takes a
    last reading at the job's end, which later scrapes serve (the devices close after it)."""

    def __init__(self, device: Any, job: str, env: Mapping[str, str], plugin: str | None = None) -> None:
        self.device = device
        names = list(getattr(device, "names", None) or [])
        self.gpus = [n for n in names if _GPU_NAME.match(n)]
        per_gpu = {getattr(g, "name", None): g for g in getattr(device, "gpus", None) or []}
        models = _safe(lambda: dict(getattr(device, "device_models", None) or {}), {})
        drivers = _safe(lambda: dict(getattr(device, "driver_versions", None) or {}), {})
        driver = drivers.get("NVIDIA driver", "")
        host = hostname(env)
        context = {**job_labels(env), "zeus_job": job}
        self.labels: dict[str, dict[str, str]] = {}
        for name in self.gpus:
            m = _GPU_NAME.match(name)
            assert m is not None
            index = m.group(1)
            uuid = getattr(per_gpu.get(name), "uuid", None) or ""
            labels = {
                "gpu": index,
                "UUID": str(uuid),
                # dcgm-exporter's device is the NVIDIA device file (nvidia<N>); another vendor's GPU keeps its zeus name
                "device": f"nvidia{index}" if plugin == "nvml" else name,
                "modelName": models.get(name, ""),
                "Hostname": host,
                "DCGM_FI_DRIVER_VERSION": driver,
                **context,
            }
            self.labels[name] = {k: v for k, v in labels.items() if v != ""}
        self._last: dict[str, dict[str, float]] = {}
        self._frozen = False
        self._warned: set[str] = set()

    def read(self) -> dict[str, dict[str, float]]:
        """``{field: {gpu name: value}}`` now (or as frozen); a field the group cannot read is absent."""
        if self._frozen:
            return self._last
        d = self.device
        readers: list[tuple[str, Callable[[], Mapping[str, float]], float]] = [
            ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", d.read_energy, 1000.0)
        ]
        if isinstance(d, PowerReadings):
            readers.append(("DCGM_FI_DEV_POWER_USAGE", d.read_power, 1.0))
        if isinstance(d, TemperatureReadings):
            readers.append(("DCGM_FI_DEV_GPU_TEMP", d.read_temperatures, 1.0))
        if isinstance(d, PerDevicePowerLimits):
            readers.append(("DCGM_FI_DEV_POWER_MGMT_LIMIT", d.power_limits, 1.0))
        if isinstance(d, ClockReadings):
            clocks = functools.cache(d.read_clocks)  # one driver call per scrape serves both fields
            for field, clock in (("DCGM_FI_DEV_SM_CLOCK", "sm"), ("DCGM_FI_DEV_MEM_CLOCK", "memory")):
                readers.append((field, functools.partial(_clock, clocks, clock), 1.0))
        out: dict[str, dict[str, float]] = {}
        for field, reader, scale in readers:
            try:
                values = reader()
            except Exception as e:  # noqa: BLE001 - a scrape never fails the job; the last reading stands
                if field not in self._warned:
                    self._warned.add(field)
                    log.warning("cannot read %s for /metrics (%s: %s); serving the last reading", field, type(e).__name__, e)
                if field in self._last:
                    out[field] = self._last[field]
                continue
            out[field] = {n: float(values[n]) * scale for n in self.gpus if values.get(n) is not None}
        self._last = out
        return out

    def freeze(self) -> None:
        """Read once more, then serve that reading from now on (the job ended; its devices close next)."""
        self.read()
        self._frozen = True

    def render(self) -> str:
        """The series in Prometheus' text format 0.0.4, as dcgm-exporter writes them (a counter's
        samples carry its bare name: dcgm's, without ``_total``)."""
        values = self.read()
        lines = []
        for name, kind, help_ in FIELDS:
            per_gpu = values.get(name)
            if not per_gpu:
                continue
            lines.append(f"# HELP {name} {help_}")
            lines.append(f"# TYPE {name} {kind}")
            for gpu, value in per_gpu.items():
                labels = ",".join(f'{k}="{_escape(v)}"' for k, v in self.labels[gpu].items())
                text = str(round(value)) if kind == "counter" else floatToGoString(value)
                lines.append(f"{name}{{{labels}}} {text}")
        return "\n".join(lines) + "\n" if lines else ""


def _clock(read: Callable[[], Mapping[str, Mapping[str, float]]], clock: str) -> dict[str, float]:
    """One clock (``sm`` or ``memory``) of :meth:`~zeus_core.device.ClockReadings.read_clocks`, per GPU that reports it."""
    return {gpu: clocks[clock] for gpu, clocks in read().items() if clock in clocks}


def _safe(fn: Callable[[], Any], default: Any) -> Any:
    try:
        return fn()
    except Exception:  # noqa: BLE001 - a model or driver name is a label, not a reason to fail the job
        return default

"""Upstream's Prometheus metrics (``zeus.metric``): energy histograms, cumulative energy counters, power gauges.

Each metric measures through this package's monitors (``ZeusMonitor``, ``PowerMonitor``: the device plugins'
readings) and pushes a ``prometheus_client`` registry of its own to a Pushgateway under the ``job`` given, with
upstream's series names and labels:

* ``EnergyHistogram``: one observation per window and device, in joules, pushed when the window ends:
  ``energy_monitor_{gpu,cpu,dram}_energy_joules`` (histograms) labelled ``window`` and ``index``;
* ``EnergyCumulativeCounter``: while a window is open, every ``update_period`` seconds the energy of the
  period is added to ``energy_monitor_{gpu,cpu,dram}_energy_joules_total`` and pushed;
* ``PowerGauge``: while a window is open, every ``update_period`` seconds each GPU's power is set on
  ``power_monitor_gpu_power_watts`` and pushed.

As upstream, the counter and the gauge run in a spawned process per window (``energy_monitoring_loop`` and
``power_monitoring_loop``, which take upstream's arguments), stopped through a queue by ``end_window``.
Needs ``prometheus_client`` (``pip install zeus-compat[prometheus]``).
"""

from __future__ import annotations

import abc
import multiprocessing as mp
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.context import SpawnProcess

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, push_to_gateway

from zeus.device.cpu import get_cpus
from zeus.monitor.energy import ZeusMonitor
from zeus.monitor.power import PowerMonitor
from zeus.utils.framework import sync_execution as sync_execution_fn

__all__ = [
    "Metric",
    "EnergyHistogram",
    "EnergyCumulativeCounter",
    "PowerGauge",
    "MonitoringProcessState",
    "energy_monitoring_loop",
    "power_monitoring_loop",
]

_LABELS = ["window", "index"]


@dataclass
class MonitoringProcessState:
    """The queue that stops a window's monitoring process, and the process."""

    queue: mp.Queue
    proc: SpawnProcess


class Metric(abc.ABC):
    """What every metric does: a named window is begun and ended."""

    @abc.abstractmethod
    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        """Begin the window ``name`` (after the GPUs' queued work is done when ``sync_execution``)."""

    @abc.abstractmethod
    def end_window(self, name: str, sync_execution: bool = True) -> None:
        """End the window ``name`` and report what it measured."""


def _dram_measured(cpu_indices: list) -> bool:
    return bool(cpu_indices) and any(cpu.supports_get_dram_energy_consumption() for cpu in get_cpus().cpus)


class EnergyHistogram(Metric):
    """The energy of each window, per GPU, CPU package and DRAM, as Prometheus histograms pushed at its end."""

    def __init__(
        self,
        cpu_indices: list,
        gpu_indices: list,
        pushgateway_url: str,
        job: str,
        gpu_bucket_range: Sequence[float] = (50.0, 100.0, 200.0, 500.0, 1000.0),
        cpu_bucket_range: Sequence[float] = (10.0, 50.0, 100.0, 500.0, 1000.0),
        dram_bucket_range: Sequence[float] = (5.0, 10.0, 20.0, 50.0, 150.0),
    ) -> None:
        """Histograms of the devices asked for, pushed to ``pushgateway_url`` as ``job``.

        Raises:
            ValueError: a bucket range is empty.
        """
        for kind, buckets in (("GPU", gpu_bucket_range), ("CPU", cpu_bucket_range), ("DRAM", dram_bucket_range)):
            if not buckets:
                raise ValueError(f"{kind} bucket range cannot be empty. Please provide a valid range or omit the argument to use defaults.")
        self.gpu_bucket_range = gpu_bucket_range
        self.cpu_bucket_range = cpu_bucket_range
        self.dram_bucket_range = dram_bucket_range
        self.cpu_indices = cpu_indices
        self.gpu_indices = gpu_indices
        self.pushgateway_url = pushgateway_url
        self.job = job
        self.registry = CollectorRegistry()
        if gpu_indices:
            self.gpu_histograms = Histogram(
                "energy_monitor_gpu_energy_joules", "GPU energy consumption", _LABELS, buckets=gpu_bucket_range, registry=self.registry
            )
        if cpu_indices:
            self.cpu_histograms = Histogram(
                "energy_monitor_cpu_energy_joules", "CPU energy consumption", _LABELS, buckets=cpu_bucket_range, registry=self.registry
            )
            if _dram_measured(cpu_indices):
                self.dram_histograms = Histogram(
                    "energy_monitor_dram_energy_joules",
                    "DRAM energy consumption",
                    _LABELS,
                    buckets=dram_bucket_range,
                    registry=self.registry,
                )
        self.max_gpu_bucket, self.min_gpu_bucket = max(gpu_bucket_range), min(gpu_bucket_range)
        self.max_cpu_bucket, self.min_cpu_bucket = max(cpu_bucket_range), min(cpu_bucket_range)
        self.max_dram_bucket, self.min_dram_bucket = max(dram_bucket_range), min(dram_bucket_range)
        self.energy_monitor = ZeusMonitor(cpu_indices=cpu_indices, gpu_indices=gpu_indices)

    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        """Begin measuring the window ``name``."""
        if sync_execution:
            sync_execution_fn(self.gpu_indices)
        self.energy_monitor.begin_window(f"__EnergyHistogram_{name}", sync_execution=sync_execution)

    def end_window(self, name: str, sync_execution: bool = True) -> None:
        """End the window ``name``, observe each device's energy (J) and push the registry.

        A value outside the buckets' range is observed and warned about.
        """
        if sync_execution:
            sync_execution_fn(self.gpu_indices)
        measurement = self.energy_monitor.end_window(f"__EnergyHistogram_{name}", sync_execution=sync_execution)
        for kind, values, attr, low, high in (
            ("GPU", measurement.gpu_energy, "gpu_histograms", self.min_gpu_bucket, self.max_gpu_bucket),
            ("CPU", measurement.cpu_energy, "cpu_histograms", self.min_cpu_bucket, self.max_cpu_bucket),
            ("DRAM", measurement.dram_energy, "dram_histograms", self.min_dram_bucket, self.max_dram_bucket),
        ):
            if not values:
                continue
            histogram = getattr(self, attr)
            for index, energy in values.items():
                histogram.labels(window=name, index=index).observe(energy)
                if energy > high:
                    warnings.warn(f"{kind} {index} energy {energy} exceeds the maximum bucket value of {high}", stacklevel=2)
                if energy < low:
                    warnings.warn(f"{kind} {index} energy {energy} is below the minimum bucket value of {low}", stacklevel=2)
        push_to_gateway(self.pushgateway_url, job=self.job, registry=self.registry)


class _Windows(Metric):
    """A spawned monitoring process per open window, stopped through its queue."""

    gpu_indices: list
    window_state: dict[str, MonitoringProcessState]

    def _start(self, name: str, sync_execution: bool, target, args: tuple) -> None:
        if sync_execution:
            sync_execution_fn(self.gpu_indices)
        context = mp.get_context("spawn")
        queue = context.Queue()
        proc = context.Process(target=target, args=(name, queue, *args))
        proc.start()
        if not proc.is_alive():
            raise RuntimeError(f"Failed to start the monitoring process for '{name}'.")
        self.window_state[name] = MonitoringProcessState(queue=queue, proc=proc)

    def end_window(self, name: str, sync_execution: bool = False) -> None:
        """Stop the window's process (after its current period); terminated if it has not stopped in 20 s.

        Raises:
            ValueError: no window ``name`` is open.
        """
        if name not in self.window_state:
            raise ValueError(f"No active monitoring process found for '{name}'.")
        if sync_execution:
            sync_execution_fn(self.gpu_indices)
        state = self.window_state.pop(name)
        state.queue.put("stop")
        state.proc.join(timeout=20)
        if state.proc.is_alive():
            state.proc.terminate()


class EnergyCumulativeCounter(_Windows):
    """The energy of each device, added up every ``update_period`` seconds while a window is open (counters)."""

    def __init__(self, cpu_indices: list, gpu_indices: list, update_period: int, pushgateway_url: str, job: str) -> None:
        """Counters of the devices asked for, pushed to ``pushgateway_url`` as ``job`` every ``update_period`` s."""
        self.cpu_indices = cpu_indices
        self.gpu_indices = gpu_indices
        self.update_period = update_period
        self.pushgateway_url = pushgateway_url
        self.job = job
        self.window_state: dict[str, MonitoringProcessState] = {}

    def begin_window(self, name: str, sync_execution: bool = False) -> None:
        """Start the window's process (``energy_monitoring_loop``)."""
        self._start(
            name,
            sync_execution,
            energy_monitoring_loop,
            (self.cpu_indices, self.gpu_indices, self.update_period, self.pushgateway_url, self.job),
        )


class PowerGauge(_Windows):
    """Each GPU's power, set every ``update_period`` seconds while a window is open (gauges)."""

    def __init__(self, gpu_indices: list, update_period: int, pushgateway_url: str, job: str) -> None:
        """Gauges of the GPUs asked for, pushed to ``pushgateway_url`` as ``job`` every ``update_period`` s."""
        self.gpu_indices = gpu_indices
        self.update_period = update_period
        self.pushgateway_url = pushgateway_url
        self.job = job
        self.window_state: dict[str, MonitoringProcessState] = {}

    def begin_window(self, name: str, sync_execution: bool = False) -> None:
        """Start the window's process (``power_monitoring_loop``).

        Raises:
            ValueError: a window ``name`` is already open.
        """
        if name in self.window_state:
            raise ValueError(f"PowerGauge metric '{name}' already exists.")
        self._start(name, sync_execution, power_monitoring_loop, (self.gpu_indices, self.update_period, self.pushgateway_url, self.job))


def _stopped(pipe: mp.Queue) -> bool:
    return not pipe.empty()


def energy_monitoring_loop(
    name: str, pipe: mp.Queue, cpu_indices: list, gpu_indices: list, update_period: int, pushgateway_url: str, job: str
) -> None:
    """A window's counters: each period's energy is measured, added and pushed until ``pipe`` holds a message."""
    registry = CollectorRegistry()
    monitor = ZeusMonitor(cpu_indices=cpu_indices, gpu_indices=gpu_indices)
    counters: dict[str, Counter] = {}
    if monitor.gpu_indices:
        counters["gpu"] = Counter("energy_monitor_gpu_energy_joules", "GPU energy consumption", _LABELS, registry=registry)
    if monitor.cpu_indices:
        counters["cpu"] = Counter("energy_monitor_cpu_energy_joules", "CPU energy consumption", _LABELS, registry=registry)
        if _dram_measured(monitor.cpu_indices):
            counters["dram"] = Counter("energy_monitor_dram_energy_joules", "DRAM energy consumption", _LABELS, registry=registry)
    key = f"__EnergyCumulativeCounter_{name}"
    while not _stopped(pipe):
        monitor.begin_window(key, sync_execution=False)
        time.sleep(update_period)
        measurement = monitor.end_window(key, sync_execution=False)
        for kind, values in (("gpu", measurement.gpu_energy), ("cpu", measurement.cpu_energy), ("dram", measurement.dram_energy)):
            if values and kind in counters:
                for index, energy in values.items():
                    counters[kind].labels(window=name, index=index).inc(energy)
        push_to_gateway(pushgateway_url, job=job, registry=registry)


def power_monitoring_loop(name: str, pipe: mp.Queue, gpu_indices: list[int], update_period: int, pushgateway_url: str, job: str) -> None:
    """A window's gauges: each GPU's power is set and pushed every period until ``pipe`` holds a message.

    A reading or a push that fails is printed and the loop goes on, as upstream's does.
    """
    monitor = PowerMonitor(gpu_indices=gpu_indices)
    registry = CollectorRegistry()
    gauges = Gauge("power_monitor_gpu_power_watts", "Records power consumption for GPU over time", _LABELS, registry=registry)
    while not _stopped(pipe):
        try:
            power = monitor.get_power()
            for index, watts in (power or {}).items():
                gauges.labels(window=name, index=index).set(watts)
        except Exception as e:  # noqa: BLE001 - the gauge keeps its last values, as upstream's loop
            print(f"Error during processing power measurement: {e}")
        try:
            push_to_gateway(pushgateway_url, job=job, registry=registry)
        except Exception as e:  # noqa: BLE001
            print(f"Error pushing metrics: {e}")
        time.sleep(update_period)

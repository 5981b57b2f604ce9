"""Upstream's ``zeus.monitor.power_streaming``: the live power of many nodes' daemons at once.

``PowerStreamingClient(servers=[ZeusdConfig, ...])`` discovers each daemon (``ZeusdClient``),
measures its clock's offset from this machine's over ``/time``, and keeps one
``/gpu/stream_power`` and one ``/cpu/stream_power`` stream per node open in a thread,
reconnecting after ``reconnect_delay_s`` whenever one breaks (a token the daemon refuses ends
that stream). The latest reading of every device, watts, its timestamp on this machine's clock,
is kept per node: ``get_power()`` copies it; iterating the client (``for`` or ``async for``)
yields a copy each time a sample arrives, until ``stop()``.

The streams themselves -- connecting, reconnecting, parsing events, the clock offset -- are the
core's :class:`zeus_core.daemon.nodeclient.NodeStream`, which ``zeus monitor --node`` runs too.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from zeus.utils.zeusd import ZeusdCapabilityError, ZeusdClient, ZeusdConfig
from zeus_core.daemon.nodeclient import NodeStream, event_data

logger = logging.getLogger(__name__)

__all__ = ["CpuPowerReading", "PowerReadings", "PowerStreamingClient"]

_V = TypeVar("_V")


@dataclass
class CpuPowerReading:
    """One CPU package's power, W, and its DRAM's (None without a DRAM counter)."""

    cpu_w: float = 0.0
    dram_w: float | None = None


@dataclass
class PowerReadings:
    """One node's latest readings: the newest sample's time (Unix s, this machine's clock), W per GPU
    and per CPU package."""

    timestamp_s: float = 0.0
    gpu_power_w: dict[int, float] = field(default_factory=dict)
    cpu_power_w: dict[int, CpuPowerReading] = field(default_factory=dict)


def _copy(r: PowerReadings) -> PowerReadings:
    cpus = {i: CpuPowerReading(c.cpu_w, c.dram_w) for i, c in r.cpu_power_w.items()}
    return PowerReadings(r.timestamp_s, dict(r.gpu_power_w), cpus)


class PowerStreamingClient:
    """Stream GPU and CPU power from every daemon in ``servers`` (each a ``ZeusdConfig``; its
    ``gpu_indices``/``cpu_indices`` pick devices: None all, [] none). Readings are keyed by each
    config's ``endpoint``.

    Raises ZeusdConnectionError for a daemon that cannot be reached, ValueError for duplicate
    endpoints or devices a daemon does not serve, and ZeusdCapabilityError where indices were asked
    for explicitly and the token lacks the read scope (without explicit indices such a stream is
    skipped, with a log line).
    """

    def __init__(self, servers: Sequence[ZeusdConfig], reconnect_delay_s: float = 1.0) -> None:
        self._servers = list(servers)
        self._reconnect_delay = reconnect_delay_s
        endpoints = [s.endpoint for s in self._servers]
        repeated = sorted({e for e in endpoints if endpoints.count(e) > 1})
        if repeated:
            raise ValueError(f"Duplicate server endpoints: {repeated}")
        self._lock = threading.Lock()
        self._condition = threading.Condition(self._lock)
        self._readings: dict[str, PowerReadings] = {}
        self._clock_offsets: dict[str, float] = {}
        self._daemon_clients: dict[str, ZeusdClient] = {}
        self._threads: list[threading.Thread] = []
        self._streams: list[NodeStream] = []
        self._stop_event = threading.Event()
        for server in self._servers:
            gpu, cpu = self._init_server(server)
            endpoint = server.endpoint
            self._clock_offsets[endpoint] = self._daemon_clients[endpoint]._node.clock_offset_s()
            logger.info("Clock offset of %s: %.4f s", endpoint, self._clock_offsets[endpoint])
            if gpu:
                self._start(server, "/gpu/stream_power", {"gpu_ids": server.gpu_indices}, self._process_gpu_event)
            if cpu:
                self._start(server, "/cpu/stream_power", {"cpu_ids": server.cpu_indices}, self._process_cpu_event)
        if not self._threads:
            logger.warning("No power stream started: no daemon serves a device this client may read.")

    def _init_server(self, server: ZeusdConfig) -> tuple[bool, bool]:
        """Discover ``server``; whether to stream its GPUs and its CPUs."""
        client = ZeusdClient(server)
        self._daemon_clients[server.endpoint] = client
        gpu = self._resolve_streaming(server.gpu_indices, set(client.gpu_ids), client.can_read_gpu, "gpu-read", "GPU", server.endpoint)
        cpu = self._resolve_streaming(server.cpu_indices, set(client.cpu_ids), client.can_read_cpu, "cpu-read", "CPU", server.endpoint)
        return gpu, cpu

    @staticmethod
    def _resolve_streaming(
        user_indices: list[int] | None, available_ids: set[int], has_permission: bool, scope_name: str, device_type: str, endpoint: str
    ) -> bool:
        if user_indices is not None:
            if not user_indices:
                return False
            missing = sorted(set(user_indices) - available_ids)
            if missing:
                raise ValueError(f"{device_type} indices {missing} requested for {endpoint} but only {sorted(available_ids)} are available")
            if not has_permission:
                raise ZeusdCapabilityError(
                    f"Token for {endpoint} lacks required scope '{scope_name}' (asked for {device_type.lower()}_indices={user_indices})"
                )
            return True
        if not available_ids:
            logger.info("%s serves no %s; not streaming them", endpoint, device_type)
            return False
        if not has_permission:
            logger.info("Token for %s lacks '%s'; not streaming %ss", endpoint, scope_name, device_type)
            return False
        return True

    def _start(self, server: ZeusdConfig, path: str, params: dict[str, Any], process: Callable[[str, str], None]) -> None:
        endpoint = server.endpoint
        stream = NodeStream(
            server.node_client(),
            path,
            params,
            lambda data: process(f"data: {data}", endpoint),
            reconnect_delay_s=self._reconnect_delay,
            stop_event=self._stop_event,
        ).start()
        self._streams.append(stream)
        self._threads.append(stream.thread)
        logger.info("Streaming %s from %s", path, endpoint)

    def stop(self) -> None:
        """End every stream and wake every iterator."""
        self._stop_event.set()
        with self._condition:
            self._condition.notify_all()
        for stream in getattr(self, "_streams", []):
            stream.stop()
        for t in self._threads:
            t.join(timeout=5.0)
        self._threads.clear()

    def get_power(self) -> dict[str, PowerReadings]:
        """A copy of every node's latest readings, keyed by endpoint."""
        with self._lock:
            return {k: _copy(v) for k, v in self._readings.items()}

    def __iter__(self) -> Iterator[dict[str, PowerReadings]]:
        """A copy of the readings each time a sample arrives, until ``stop()``."""
        while not self._stop_event.is_set():
            if self._wait_for_update() and not self._stop_event.is_set():
                yield self.get_power()

    async def __aiter__(self) -> AsyncIterator[dict[str, PowerReadings]]:
        """As ``__iter__``, waiting in a worker thread so the event loop runs on."""
        import asyncio

        loop = asyncio.get_running_loop()
        while not self._stop_event.is_set():
            notified = await loop.run_in_executor(None, self._wait_for_update)
            if notified and not self._stop_event.is_set():
                yield self.get_power()

    def _wait_for_update(self) -> bool:
        with self._condition:
            return self._condition.wait(timeout=1.0)

    # -- events --

    def _samples(self, event_text: str, endpoint: str, device: str, fields: tuple[str, ...]) -> Iterator[dict[str, Any]]:
        """The JSON samples of one event that carry ``fields`` (a malformed one is logged and skipped)."""
        for data in event_data(event_text.strip()):
            try:
                sample = json.loads(data)
            except ValueError:
                logger.warning("Invalid JSON in a %s event from %s: %s", device, endpoint, data[:100])
                continue
            if not isinstance(sample, dict) or any(sample.get(f) is None for f in fields):
                logger.warning("Malformed %s event from %s: %s", device, endpoint, data[:100])
                continue
            yield sample

    def _store_reading(
        self, endpoint: str, timestamp_s: float, table: Callable[[PowerReadings], dict[int, _V]], device: int, value: _V
    ) -> None:
        with self._condition:
            readings = self._readings.get(endpoint)
            if readings is None:
                readings = self._readings[endpoint] = PowerReadings(timestamp_s=timestamp_s)
            else:
                readings.timestamp_s = max(readings.timestamp_s, timestamp_s)
            table(readings)[device] = value
            self._condition.notify_all()

    def _process_gpu_event(self, event_text: str, endpoint: str) -> None:
        """One ``/gpu/stream_power`` event: ``{"timestamp_ms", "gpu_id", "power_mw"}``."""
        for s in self._samples(event_text, endpoint, "GPU", ("timestamp_ms", "gpu_id", "power_mw")):
            try:
                gpu, watts = int(s["gpu_id"]), float(s["power_mw"]) / 1000.0
                t = float(s["timestamp_ms"]) / 1000.0 + self._clock_offsets.get(endpoint, 0.0)
            except (TypeError, ValueError):
                logger.warning("Malformed GPU event from %s: %s", endpoint, s)
                continue
            self._store_reading(endpoint, t, lambda r: r.gpu_power_w, gpu, watts)

    def _process_cpu_event(self, event_text: str, endpoint: str) -> None:
        """One ``/cpu/stream_power`` event: ``{"timestamp_ms", "cpu_id", "cpu_mw", "dram_mw"}``."""
        for s in self._samples(event_text, endpoint, "CPU", ("timestamp_ms", "cpu_id", "cpu_mw")):
            try:
                dram = s.get("dram_mw")
                reading = CpuPowerReading(float(s["cpu_mw"]) / 1000.0, float(dram) / 1000.0 if dram is not None else None)
                cpu = int(s["cpu_id"])
                t = float(s["timestamp_ms"]) / 1000.0 + self._clock_offsets.get(endpoint, 0.0)
            except (TypeError, ValueError):
                logger.warning("Malformed CPU event from %s: %s", endpoint, s)
                continue
            self._store_reading(endpoint, t, lambda r: r.cpu_power_w, cpu, reading)

"""A client of upstream zeusd's HTTP API (what ``zeus daemon`` serves): one node, or many at once.

This is the one place the project speaks that API as a client: zeus-compat's
``zeus.utils.zeusd`` and ``zeus.monitor.power_streaming`` (upstream's Python
side) and ``zeus monitor --node`` all go through it -- the routes' parameters
(:func:`encode`), the answers' errors (:class:`NodeError`), server-sent events
(:func:`sse_data`), the clock offset from ``/time`` (:meth:`NodeClient.clock_offset_s`)
and the reconnecting power stream of one node (:class:`NodeStream`).

Why the standard library's ``http.client`` moves the bytes here (a small
subclass connects it to a Unix socket) rather than httpx or h11: a client of
the daemon runs anywhere -- a login node, a notebook -- and ``zeus-core``
keeps its dependencies few; httpx is a dependency of some plugins only, h11 of
the daemon's extra only, and ``http.client`` already parses responses, chunked
bodies included, which is all a client of a dozen JSON routes and one event
stream needs. Where a caller must bring its own HTTP stack (zeus-compat keeps
upstream's ``ZeusdConfig.make_client()``, an httpx client, as its public API),
it passes a :class:`Transport` and everything above the bytes is still this module.

Endpoints are written as upstream's variables write them: ``ZEUSD_SOCK_PATH``
(a Unix socket, preferred), ``ZEUSD_HOST_PORT`` (``host:port``) and
``ZEUSD_TOKEN`` (a bearer token); ``https://host:port`` asks for TLS.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import logging
import os
import socket
import ssl
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol
from urllib.parse import urlencode

import attrs

log = logging.getLogger("zeus.daemon.client")

ENV_SOCK = "ZEUSD_SOCK_PATH"
ENV_HOST_PORT = "ZEUSD_HOST_PORT"
ENV_TOKEN = "ZEUSD_TOKEN"
#: upstream zeusd's default TCP port (its documentation's examples)
DEFAULT_PORT = 4938
#: a stream that brings no byte (sample or keep-alive; the daemon sends one every 5 s) this long is dead
STREAM_READ_TIMEOUT_S = 15.0


class NodeError(Exception):
    """A request that did not answer 200: ``status`` is the HTTP status, or None when the node could
    not be reached at all; ``text`` is the body as the daemon sent it."""

    def __init__(self, message: str, status: int | None = None, text: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.text = text


@attrs.frozen
class Endpoint:
    """Where a node's daemon listens (a Unix socket or ``host:port``) and the token to show it."""

    socket_path: str | None = None
    host_port: str | None = None
    token: str | None = None
    tls: bool = False

    @classmethod
    def parse(cls, text: str, token: str | None = None) -> Endpoint:
        """``HOST:PORT``, ``HOST`` (port 4938), ``https://HOST:PORT`` or a socket path (``/...``,
        ``./...``, ``unix:PATH``); ValueError saying what is wrong with anything else."""
        t = text.strip()
        if t.startswith("unix:"):
            t = t.removeprefix("unix:")
            if not t:
                raise ValueError(f"{text!r}: unix: needs a socket path after it")
            return cls(socket_path=t, token=token)
        if t.startswith(("/", "./", "../")):
            return cls(socket_path=t, token=token)
        tls = t.startswith("https://")
        t = t.removeprefix("https://").removeprefix("http://").rstrip("/")
        host, sep, port = t.rpartition(":") if not t.endswith("]") else (t, "", "")
        if not sep:
            host, port = t, str(DEFAULT_PORT)
        host = host.strip("[]")
        if not host or "/" in host or " " in host:
            raise ValueError(f"{text!r} is not HOST:PORT (e.g. node1:{DEFAULT_PORT}) nor a socket path")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{text!r}: the port must be a number from 1 to 65535, e.g. node1:{DEFAULT_PORT}")
        return cls(host_port=f"{host}:{int(port)}", token=token, tls=tls)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Endpoint | None:
        """Upstream's variables: ``ZEUSD_SOCK_PATH`` first, then ``ZEUSD_HOST_PORT``, with
        ``ZEUSD_TOKEN``; None when neither names a daemon."""
        env = os.environ if environ is None else environ
        token = env.get(ENV_TOKEN) or None
        if env.get(ENV_SOCK):
            return cls(socket_path=env[ENV_SOCK], token=token)
        if env.get(ENV_HOST_PORT):
            return cls.parse(env[ENV_HOST_PORT], token)
        return None

    @property
    def name(self) -> str:
        """How the node is named in output: its socket path or its ``host:port``."""
        return self.socket_path or self.host_port or "?"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


def encode(params: Mapping[str, Any]) -> dict[str, str]:
    """Query parameters as the API takes them: lists comma-joined, booleans ``true``/``false``, None left out."""
    out: dict[str, str] = {}
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, (list, tuple, set, frozenset)):
            out[key] = ",".join(str(v) for v in value)
        else:
            out[key] = str(value)
    return out


def error_text(status: int, text: str) -> str:
    """The daemon's message from an error body (``{"error": ...}`` or per-device ``{"errors": {...}}``)."""
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip()[:500] or f"HTTP {status}"
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return body["error"]
    if isinstance(body, dict) and isinstance(body.get("errors"), dict):
        return "; ".join(f"device {k}: {v}" for k, v in body["errors"].items())
    return text.strip()[:500]


def sse_data(chunks: Iterable[bytes]) -> Iterator[str]:
    """The ``data:`` payloads of a server-sent event stream, one per event (comments skipped)."""
    buffer = b""
    for chunk in chunks:
        buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            yield from event_data(event.decode("utf-8", "replace"))


def event_data(event: str) -> list[str]:
    """The ``data:`` lines of one event's text, joined as the SSE format joins them."""
    lines = [line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")]
    return ["\n".join(lines)] if lines else []


class Transport(Protocol):
    """What moves a request's bytes: ``request`` answers (status, body); ``stream`` yields the body's
    chunks as they come, after raising :class:`NodeError` for a status other than 200."""

    def request(self, method: str, path: str, params: dict[str, str]) -> tuple[int, bytes]: ...

    def stream(self, path: str, params: dict[str, str]) -> contextlib.AbstractContextManager[Iterator[bytes]]: ...

    def close(self) -> None: ...


class _UnixConnection(http.client.HTTPConnection):
    """``http.client`` over a Unix socket: the socket path instead of a host and port."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class HttpTransport:
    """The standard library's HTTP/1.1 to one endpoint: one kept-alive connection for requests
    (thread-safe), a connection of its own for each stream."""

    def __init__(self, endpoint: Endpoint, timeout_s: float = 10.0, ssl_context: ssl.SSLContext | None = None) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.ssl_context = ssl_context
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self._streams: set[http.client.HTTPConnection] = set()

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        e = self.endpoint
        if e.socket_path:
            return _UnixConnection(e.socket_path, timeout)
        host, _, port = (e.host_port or "").rpartition(":")
        if e.tls:
            ctx = self.ssl_context or ssl.create_default_context()
            return http.client.HTTPSConnection(host, int(port), timeout=timeout, context=ctx)
        return http.client.HTTPConnection(host, int(port), timeout=timeout)

    def _target(self, path: str, params: dict[str, str]) -> str:
        return f"{path}?{urlencode(params)}" if params else path

    def request(self, method: str, path: str, params: dict[str, str]) -> tuple[int, bytes]:
        with self._lock:
            for attempt in (0, 1):  # a kept-alive connection the daemon closed meanwhile: once more on a new one
                if self._conn is None:
                    self._conn = self._connect(self.timeout_s)
                try:
                    self._conn.request(method, self._target(path, params), headers=self.endpoint.headers())
                    resp = self._conn.getresponse()
                    body = resp.read()
                except (OSError, http.client.HTTPException) as e:
                    self._conn.close()
                    self._conn = None
                    if attempt or not isinstance(e, (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)):
                        raise NodeError(f"cannot reach the daemon at {self.endpoint.name}: {e}") from e
                    continue
                if resp.will_close:
                    self._conn.close()
                    self._conn = None
                return resp.status, body
        raise AssertionError("unreachable")

    @contextlib.contextmanager
    def stream(self, path: str, params: dict[str, str]) -> Iterator[Iterator[bytes]]:
        conn = self._connect(STREAM_READ_TIMEOUT_S)
        with self._lock:
            self._streams.add(conn)
        try:
            try:
                conn.request("GET", self._target(path, params), headers=self.endpoint.headers())
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                raise NodeError(f"cannot reach the daemon at {self.endpoint.name}: {e}") from e
            if resp.status != 200:
                text = resp.read().decode("utf-8", "replace")
                raise NodeError(f"{path}: HTTP {resp.status}: {error_text(resp.status, text)}", resp.status, text)

            def chunks() -> Iterator[bytes]:
                try:
                    while True:
                        data = resp.read1(65536)
                        if not data:
                            return
                        yield data
                except (OSError, http.client.HTTPException, ValueError, AttributeError) as e:  # the last two: closed under us by close()
                    raise NodeError(f"the stream from {self.endpoint.name} broke: {e}") from e

            yield chunks()
        finally:
            with self._lock:
                self._streams.discard(conn)
            conn.close()

    def close(self) -> None:
        """Close the request connection and every open stream (a reader blocked on one returns)."""
        with self._lock:
            conns = [c for c in (self._conn, *self._streams) if c is not None]
            self._conn = None
        for c in conns:
            sock = c.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            c.close()


class NodeClient:
    """One node's daemon: JSON routes by path, its ``/discover`` and ``/time``, its event streams."""

    def __init__(self, endpoint: Endpoint | None = None, transport: Transport | None = None, name: str | None = None) -> None:
        if transport is None:
            if endpoint is None:
                raise ValueError("a NodeClient needs an endpoint or a transport")
            transport = HttpTransport(endpoint)
        self.transport = transport
        self.name = name or (endpoint.name if endpoint else "daemon")

    def call(self, method: str, path: str, **params: Any) -> Any:
        """The route's JSON answer (None for a write, whose 200 carries nothing); :class:`NodeError` for any other status."""
        status, body = self.transport.request(method, path, encode(params))
        if status != 200:
            text = body.decode("utf-8", "replace")
            raise NodeError(f"{path}: HTTP {status}: {error_text(status, text)}", status, text)
        return json.loads(body) if method == "GET" else None

    def get(self, path: str, **params: Any) -> Any:
        return self.call("GET", path, **params)

    def post(self, path: str, **params: Any) -> Any:
        return self.call("POST", path, **params)

    def discover(self) -> dict[str, Any]:
        return self.get("/discover")

    def clock_offset_s(self, samples: int = 5) -> float:
        """Seconds to add to the daemon's timestamps to put them on this machine's clock: the median,
        over ``samples`` round trips to ``/time``, of this clock at the trip's midpoint minus the daemon's."""
        offsets = []
        for _ in range(samples):
            t1 = time.time()
            daemon_s = self.get("/time")["timestamp_ms"] / 1000.0
            t2 = time.time()
            offsets.append((t1 + t2) / 2.0 - daemon_s)
        return statistics.median(offsets)

    def events(self, path: str, **params: Any) -> contextlib.AbstractContextManager[Iterator[bytes]]:
        """The raw byte chunks of an event stream (``/gpu/stream_power``, ``/cpu/stream_power``)."""
        return self.transport.stream(path, encode(params))

    def close(self) -> None:
        self.transport.close()


class NodeStream:
    """One node's power stream, kept open: reconnects after ``reconnect_delay_s`` whenever it breaks
    (the daemon restarted, the network dropped), until :meth:`stop`. A 401 or 403 ends it (a token
    that does not open it will not open it later). ``on_event(text)`` gets each event's data;
    ``on_connect()`` runs before each (re)connection (e.g. to measure the clock offset again), and
    ``on_state(state, detail)`` hears ``connected``, ``lost`` and ``refused``."""

    def __init__(
        self,
        client: NodeClient,
        path: str,
        params: Mapping[str, Any],
        on_event: Callable[[str], None],
        reconnect_delay_s: float = 1.0,
        on_connect: Callable[[], None] | None = None,
        on_state: Callable[[str, str], None] | None = None,
        stop_event: threading.Event | None = None,
    ) -> None:
        self.client = client
        self.path = path
        self.params = dict(params)
        self.on_event = on_event
        self.on_connect = on_connect
        self.on_state = on_state or (lambda state, detail: None)
        self.reconnect_delay_s = reconnect_delay_s
        self.stop_event = stop_event or threading.Event()
        self.connections = 0  # how many times the stream opened
        self.thread = threading.Thread(target=self.run, name=f"zeus-stream-{client.name}{path}", daemon=True)

    def start(self) -> NodeStream:
        self.thread.start()
        return self

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                if self.on_connect is not None:
                    self.on_connect()
                with self.client.events(self.path, **self.params) as chunks:
                    self.connections += 1
                    self.on_state("connected", "")
                    for data in sse_data(chunks):
                        if self.stop_event.is_set():
                            return
                        self.on_event(data)
                if self.stop_event.is_set():
                    return
                self.on_state("lost", "the daemon ended the stream")
            except NodeError as e:
                if self.stop_event.is_set():
                    return
                if e.status in (401, 403):
                    log.error("%s%s refused: %s", self.client.name, self.path, e)
                    self.on_state("refused", str(e))
                    return
                log.warning("%s%s lost (%s); reconnecting in %.1f s", self.client.name, self.path, e, self.reconnect_delay_s)
                self.on_state("lost", str(e))
            except Exception:
                if self.stop_event.is_set():  # closed under a read by stop(): whatever it raised, the stream is over
                    return
                raise
            self.stop_event.wait(self.reconnect_delay_s)

    def stop(self, timeout_s: float = 5.0) -> None:
        self.stop_event.set()
        self.client.close()  # a read blocked on the stream returns now
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(timeout_s)


@attrs.define
class Reading:
    """A device's latest sample on a node: its time on this machine's clock (Unix s), its power (W),
    and the energy (J) its samples add up to since the fleet started (power held over each gap
    shorter than :data:`MAX_GAP_S`)."""

    time_s: float
    watts: float
    energy_j: float = 0.0
    samples: int = 1


#: a gap between two samples of a device longer than this (the node was away) adds no energy
MAX_GAP_S = 5.0


@attrs.define(eq=False)
class Node:
    """One node of a :class:`Fleet`: its client, its clock's offset, its state and its devices' readings."""

    endpoint: Endpoint
    client: NodeClient
    state: str = "connecting"
    detail: str = ""
    offset_s: float | None = None
    connections: int = 0
    readings: dict[str, Reading] = attrs.Factory(dict)
    streams: list[NodeStream] = attrs.Factory(list)

    @property
    def name(self) -> str:
        return self.endpoint.name


def sample_readings(path: str, sample: dict[str, Any]) -> list[tuple[str, int, float]]:
    """``(device, daemon timestamp ms, W)`` of one stream sample: ``gpuN``; ``cpuN`` and ``cpuN-dram``."""
    if path.startswith("/gpu/"):
        return [(f"gpu{int(sample['gpu_id'])}", int(sample["timestamp_ms"]), float(sample["power_mw"]) / 1000.0)]
    out = [(f"cpu{int(sample['cpu_id'])}", int(sample["timestamp_ms"]), float(sample["cpu_mw"]) / 1000.0)]
    if sample.get("dram_mw") is not None:
        out.append((f"cpu{int(sample['cpu_id'])}-dram", int(sample["timestamp_ms"]), float(sample["dram_mw"]) / 1000.0))
    return out


class Fleet:
    """The live power of many nodes' daemons: per node, ``/discover`` (retried until the node
    answers), the clock offset from ``/time`` (measured again at every reconnection, so a daemon
    restarted on a reset clock is corrected too), and a reconnecting stream per API group the
    node serves and the token may read. ``on_sample(node, device, time_s, watts, sample)`` hears
    every sample, its time on this machine's clock."""

    def __init__(
        self,
        endpoints: list[Endpoint],
        reconnect_delay_s: float = 1.0,
        on_sample: Callable[[Node, str, float, float, dict[str, Any]], None] | None = None,
        offset_samples: int = 3,
    ) -> None:
        names = [e.name for e in endpoints]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"the same node is named twice: {', '.join(repeated)}")
        self.nodes = [Node(e, NodeClient(e)) for e in endpoints]
        self.reconnect_delay_s = reconnect_delay_s
        self.on_sample = on_sample
        self.offset_samples = offset_samples
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> Fleet:
        for node in self.nodes:
            t = threading.Thread(target=self._join, args=(node,), name=f"zeus-fleet-{node.name}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def _join(self, node: Node) -> None:
        """Discover ``node`` (retrying while it is away), then open its streams."""
        while not self.stop_event.is_set():
            try:
                found = node.client.discover()
                break
            except NodeError as e:
                node.state, node.detail = ("refused", str(e)) if e.status in (401, 403) else ("away", str(e))
            except ValueError as e:  # not JSON: not a daemon
                node.state, node.detail = "away", f"not a daemon's answer: {e}"
            self.stop_event.wait(self.reconnect_delay_s)
        else:
            return
        groups = set(found.get("enabled_api_groups", []))
        paths = [p for p, g in (("/gpu/stream_power", "gpu-read"), ("/cpu/stream_power", "cpu-read")) if g in groups]
        paths = [p for p in paths if found.get("gpus" if p.startswith("/gpu") else "cpus")]
        if not paths:
            node.state, node.detail = "refused", "the node serves no device this client may read"
            return
        for path in paths:
            client = NodeClient(node.endpoint)  # a connection of its own per stream
            stream = NodeStream(
                client,
                path,
                {},
                functools.partial(self._event, node, path),
                reconnect_delay_s=self.reconnect_delay_s,
                on_connect=functools.partial(self._measure, node, client),
                on_state=lambda state, detail: self._state(node, state, detail),
                stop_event=self.stop_event,
            )
            node.streams.append(stream.start())

    def _measure(self, node: Node, client: NodeClient) -> None:
        node.offset_s = client.clock_offset_s(self.offset_samples)

    def _state(self, node: Node, state: str, detail: str) -> None:
        with self.lock:
            if state == "connected":
                node.connections += 1
            node.state, node.detail = state, detail

    def _event(self, node: Node, path: str, data: str) -> None:
        try:
            sample = json.loads(data)
            readings = sample_readings(path, sample)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("%s%s: a malformed sample (%s): %s", node.name, path, e, data[:100])
            return
        offset = node.offset_s or 0.0
        with self.lock:
            for device, ts_ms, watts in readings:
                t = ts_ms / 1000.0 + offset
                last = node.readings.get(device)
                if last is None:
                    node.readings[device] = Reading(t, watts)
                else:
                    dt = t - last.time_s
                    if 0 < dt <= MAX_GAP_S:
                        last.energy_j += last.watts * dt
                    last.time_s, last.watts, last.samples = t, watts, last.samples + 1
                if self.on_sample is not None:
                    self.on_sample(node, device, t, watts, sample)

    def snapshot(self) -> list[tuple[Node, dict[str, Reading]]]:
        """Each node and a copy of its readings."""
        with self.lock:
            return [(n, {k: attrs.evolve(r) for k, r in n.readings.items()}) for n in self.nodes]

    def stop(self) -> None:
        self.stop_event.set()
        for node in self.nodes:
            for stream in node.streams:
                stream.stop()
            node.client.close()
        for t in self._threads:
            t.join(5.0)


__all__ = [
    "ENV_SOCK",
    "ENV_HOST_PORT",
    "ENV_TOKEN",
    "DEFAULT_PORT",
    "STREAM_READ_TIMEOUT_S",
    "NodeError",
    "Endpoint",
    "NodeClient",
    "NodeStream",
    "Reading",
    "Node",
    "Fleet",
    "error_text",
    "event_data",
    "sse_data",
    "sample_readings",
]

"""The HTTP side of ``zeus daemon``: upstream zeusd's API (:mod:`zeus_core.daemon.api`) on the daemon's services.

Why h11 on the daemon's own threads rather than an ASGI server: the daemon is a
thread per connection with one device thread (:mod:`zeus_core.daemon.server`);
HTTP and the private framing share its Unix socket (the first byte of a
connection tells them apart: a frame starts with a zero byte, a request with a
method's letter), so the peer's credentials (``SO_PEERCRED``), the allow-list
and the per-user caps apply to both, and every device call still runs on the
one device thread. h11 parses HTTP/1.1 (a small, well-kept library, what
uvicorn and httpx use); the rest -- routing a dozen paths, checking tokens --
is this module. It keeps the privileged process small: no event loop, no web
framework, one more dependency and PyJWT for the tokens.

Requests map onto the services' operations: ``/gpu/set_power_limit?gpu_ids=0``
is ``nvml.set_power_limit`` for GPU 0's UUID, run through
:meth:`Daemon.dispatch <zeus_core.daemon.server.Daemon.dispatch>` (argument
checks, the device's constraints, holds, journal, the log) for the *principal*
the request comes from (:meth:`Daemon.http_session`).
"""

from __future__ import annotations

import json
import logging
import re
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import h11

from zeus_core.daemon import tokens
from zeus_core.daemon.accounting import Accountant
from zeus_core.daemon.api import BY_PATH, MAX_REQUEST_BYTES, HttpError, Route, aggregate, parse_params, status_of
from zeus_core.daemon.streams import PowerFeed, Subscriber
from zeus_core.privileged import ClientSession

#: the daemon (:class:`zeus_core.daemon.server.Daemon`, which imports this module) and one of its client connections
Daemon = Any
Connection = ClientSession

log = logging.getLogger("zeus.daemon")

#: how long a request may take to arrive once its connection is idle or its first byte came
REQUEST_TIMEOUT_S = 10.0
#: a stream sends a comment line this often when there is no sample, to notice a client that left
KEEPALIVE_S = 5.0
#: a stream whose client takes no bytes for this long is closed (samples or not)
STREAM_SEND_TIMEOUT_S = 30.0
#: the kernel's send buffer of a stream connection: with the sample queue, what one client may have pending
STREAM_SNDBUF = 32 * 1024
CONTROL_GROUPS = ("gpu-control", "cpu-control")
#: what a GPU route is called in the services' operations
GPU_OPS = {
    "set_power_limit": "set_power_limit",
    "reset_power_limit": "reset_power_limit",
    "set_persistence_mode": "set_persistence_mode",
    "set_gpu_locked_clocks": "lock_clocks",
    "reset_gpu_locked_clocks": "reset_clocks",
    "set_mem_locked_clocks": "lock_memory_clocks",
    "reset_mem_locked_clocks": "reset_memory_clocks",
}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Peer:
    """Who is on the other end: the kernel's credentials on the Unix socket, an address over TCP."""

    def __init__(self, uid: int | None, pid: int, gid: int, address: str) -> None:
        self.uid, self.pid, self.gid, self.address = uid, pid, gid, address

    @property
    def tcp(self) -> bool:
        return self.uid is None


class NodeApi:
    """The devices the daemon's services serve, numbered as upstream numbers them, and one method per route."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        cfg = daemon.config.raw
        self.enabled = [g for g in ("gpu-control", "gpu-read", "cpu-read", "cpu-control") if g in cfg.enable]
        self.auth = cfg.auth
        self.secret = tokens.load_secret(cfg.secret_path) if cfg.auth else b""
        self.gpus: dict[int, dict[str, Any]] = {}  # index -> {"service", "uuid", discover fields}
        self.cpus: dict[int, dict[str, Any]] = {}  # package index -> {"service", "zone", "dram"}
        self._discover()
        self.gpu_feed = PowerFeed("gpu", self._gpu_samples, cfg.stream_interval_s)
        self.cpu_feed = PowerFeed("cpu", self._cpu_samples, cfg.stream_interval_s)
        self._cpu_last: dict[int, tuple[float, dict[str, Any]]] = {}
        self.accountant = self._accountant()

    # -- the devices --

    def call(self, session: Connection, op: str, **args: Any) -> Any:
        """Run an operation for ``session``; HttpError with the reply's status when it fails."""
        reply = self.daemon.dispatch(session, {"op": op, "args": args})
        if not reply["ok"]:
            raise HttpError(status_of(reply), reply["error"]["message"])
        return reply["result"]

    def _discover(self) -> None:
        system = self.daemon.system_session
        ops = self.daemon.operations
        for name, svc in self.daemon.services.items():
            served = getattr(getattr(svc, "gpus", None), "gpus", None)
            if isinstance(served, dict) and f"{name}.read_info" in ops:
                for uuid in served:
                    info = self.call(system, f"{name}.read_info", gpu=uuid)
                    self.gpus.setdefault(int(info.pop("index")), {"service": name, "uuid": uuid, **info})
            zones = getattr(svc, "zones", None)
            if isinstance(zones, dict) and f"{name}.read" in ops:
                for key in zones:
                    m = re.fullmatch(r"intel-rapl:(\d+)", key)
                    if m:
                        dram = next((k for k in sorted(zones) if k.startswith(key + "/")), None)
                        self.cpus.setdefault(int(m.group(1)), {"service": name, "zone": key, "dram": dram})
        self.gpus = dict(sorted(self.gpus.items()))
        self.cpus = dict(sorted(self.cpus.items()))

    def _ids(self, params: dict[str, Any], key: str, table: dict[int, Any], device: str) -> list[int]:
        ids = params.get(key)
        if ids is None:
            return list(table)
        missing = [i for i in ids if i not in table]
        if missing:
            raise HttpError(400, f"{device} {missing[0]} not found (this daemon serves {device}s {list(table)})")
        return ids

    def _gpu_write_ids(self, params: dict[str, Any]) -> list[int]:
        for i in params["gpu_ids"]:
            if i not in self.gpus:
                raise HttpError(400, f"GPU index {i} does not exist (this daemon serves GPUs {list(self.gpus)}).")
        return params["gpu_ids"]

    def _each(self, ids: list[int], fn: Callable[[int], Any]) -> dict[str, Any]:
        out, errors = {}, {}
        for i in ids:
            try:
                out[str(i)] = fn(i)
            except HttpError as e:
                errors[i] = (e.status, str(e))
        if errors:
            raise aggregate(errors)
        return out

    # -- the routes: each takes (session, params, claims) and returns a JSON value --

    def discover(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        return {
            "gpus": [
                {
                    "id": i,
                    "name": g["name"],
                    "pci_address": g["pci_address"],
                    "cumulative_energy_available": g["cumulative_energy_available"],
                }
                for i, g in self.gpus.items()
            ],
            "cpus": [{"id": i, "dram_available": c["dram"] is not None} for i, c in self.cpus.items()],
            "enabled_api_groups": self.enabled,
            "auth_required": self.auth,
        }

    def time(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        return {"timestamp_ms": now_ms()}

    def whoami(self, session: Connection, params: dict[str, Any], claims: tokens.Claims) -> Any:
        return claims.as_json()

    def _gpu_op(self, session: Connection, i: int, route_op: str, **args: Any) -> Any:
        g = self.gpus[i]
        op = f"{g['service']}.{GPU_OPS[route_op]}"
        if op not in self.daemon.operations:
            raise HttpError(400, f"GPU {i} ({g['service']}) does not support {route_op}")
        return self.call(session, op, gpu=g["uuid"], **args)

    def _write(self, session: Connection, params: dict[str, Any], route_op: str, **args: Any) -> Any:
        self._each(self._gpu_write_ids(params), lambda i: self._gpu_op(session, i, route_op, **args))
        return None

    def set_power_limit(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        return self._write(session, params, "set_power_limit", milliwatts=params["power_limit_mw"])

    def reset_power_limit(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        return self._write(session, params, "reset_power_limit")

    def set_persistence_mode(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        return self._write(session, params, "set_persistence_mode", enabled=params["enabled"])

    def set_gpu_locked_clocks(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        return self._write(session, params, "set_gpu_locked_clocks", min_mhz=params["min_clock_mhz"], max_mhz=params["max_clock_mhz"])

    def reset_gpu_locked_clocks(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        return self._write(session, params, "reset_gpu_locked_clocks")

    def set_mem_locked_clocks(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        return self._write(session, params, "set_mem_locked_clocks", min_mhz=params["min_clock_mhz"], max_mhz=params["max_clock_mhz"])

    def reset_mem_locked_clocks(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        return self._write(session, params, "reset_mem_locked_clocks")

    def reset_locked_clocks(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        def both(i: int) -> None:
            self._gpu_op(session, i, "reset_gpu_locked_clocks")
            self._gpu_op(session, i, "reset_mem_locked_clocks")

        self._each(self._gpu_write_ids(params), both)
        return None

    def _gpu_read(self, session: Connection, params: dict[str, Any], op: str, fields: tuple[str, ...]) -> Any:
        def one(i: int) -> dict[str, Any]:
            g = self.gpus[i]
            result = self.call(session, f"{g['service']}.{op}", gpu=g["uuid"])
            return {f: result[f] for f in fields}

        return self._each(self._ids(params, "gpu_ids", self.gpus, "GPU"), one)

    def gpu_energy(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        def one(i: int) -> dict[str, Any]:
            g = self.gpus[i]
            if not g["cumulative_energy_available"]:
                raise HttpError(400, f"GPU {i} has no cumulative energy counter (see /discover)")
            return {"energy_mj": self.call(session, f"{g['service']}.read_energy", gpu=g["uuid"])["energy_mj"]}

        return self._each(self._ids(params, "gpu_ids", self.gpus, "GPU"), one)

    def gpu_power(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        power = self._gpu_read(session, params, "read_power", ("power_mw",))
        return {"timestamp_ms": now_ms(), "power_mw": {k: v["power_mw"] for k, v in power.items()}}

    def gpu_power_limit(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        return self._gpu_read(session, params, "read_power_limit", ("power_limit_mw",))

    def gpu_power_limit_constraints(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        return self._gpu_read(session, params, "read_power_limit", ("min_power_limit_mw", "max_power_limit_mw"))

    def gpu_persistence_mode(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        return self._gpu_read(session, params, "read_persistence_mode", ("enabled",))

    def _rapl(self, session: Connection, i: int) -> dict[str, Any]:
        """Package ``i``'s counters in µJ (``dram_energy_uj`` None without a DRAM zone), with their ranges."""
        c = self.cpus[i]
        pkg = self.call(session, f"{c['service']}.read", zone=c["zone"])
        dram = self.call(session, f"{c['service']}.read", zone=c["dram"]) if c["dram"] else None
        return {
            "cpu_energy_uj": pkg["energy_uj"],
            "cpu_range_uj": pkg["max_energy_range_uj"],
            "dram_energy_uj": dram["energy_uj"] if dram else None,
            "dram_range_uj": dram["max_energy_range_uj"] if dram else None,
        }

    def cpu_energy(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        def one(i: int) -> dict[str, Any]:
            r = self._rapl(session, i)
            return {
                "cpu_energy_uj": r["cpu_energy_uj"] if params["cpu"] else None,
                "dram_energy_uj": r["dram_energy_uj"] if params["dram"] else None,
            }

        return self._each(self._ids(params, "cpu_ids", self.cpus, "CPU"), one)

    @staticmethod
    def _mw(first: dict[str, Any], second: dict[str, Any], key: str, elapsed_s: float) -> int | None:
        a, b = first[f"{key}_energy_uj"], second[f"{key}_energy_uj"]
        if a is None or b is None:
            return None
        delta = b - a if b >= a else b + first[f"{key}_range_uj"] - a  # the counter wrapped once
        return int(delta / 1000 / max(elapsed_s, 1e-6))

    def cpu_power(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        ids = self._ids(params, "cpu_ids", self.cpus, "CPU")
        first = self._each(ids, lambda i: self._rapl(session, i))
        t0 = time.monotonic()
        time.sleep(0.1)
        second = self._each(ids, lambda i: self._rapl(session, i))
        elapsed = time.monotonic() - t0
        return {
            "timestamp_ms": now_ms(),
            "power_mw": {
                k: {"cpu_mw": self._mw(first[k], second[k], "cpu", elapsed), "dram_mw": self._mw(first[k], second[k], "dram", elapsed)}
                for k in first
            },
        }

    def gpu_stream(self, session: Connection, params: dict[str, Any], claims: Any) -> tuple[PowerFeed, list[int]]:
        return self.gpu_feed, self._ids(params, "gpu_ids", self.gpus, "GPU")

    def cpu_stream(self, session: Connection, params: dict[str, Any], claims: Any) -> tuple[PowerFeed, list[int]]:
        return self.cpu_feed, self._ids(params, "cpu_ids", self.cpus, "CPU")

    def _gpu_samples(self, ids: list[int]) -> list[tuple[int, dict[str, Any]]]:
        out = []
        for i in ids:
            try:
                power = self._gpu_op_read(i)
            except HttpError as e:
                log.warning("gpu power stream: GPU %d: %s", i, e)
                continue
            out.append((i, {"timestamp_ms": now_ms(), "gpu_id": i, "power_mw": power}))
        return out

    def _gpu_op_read(self, i: int) -> int:
        g = self.gpus[i]
        return int(self.call(self.daemon.system_session, f"{g['service']}.read_power", gpu=g["uuid"])["power_mw"])

    def _cpu_samples(self, ids: list[int]) -> list[tuple[int, dict[str, Any]]]:
        out = []
        for i in ids:
            try:
                reading = self._rapl(self.daemon.system_session, i)
            except HttpError as e:
                log.warning("cpu power stream: CPU %d: %s", i, e)
                continue
            now = time.monotonic()
            last = self._cpu_last.get(i)
            self._cpu_last[i] = (now, reading)
            if last is None or now - last[0] > 10 * self.cpu_feed.interval_s + 1:  # the first, or a stale, reading: no rate yet
                continue
            elapsed = now - last[0]
            out.append(
                (
                    i,
                    {
                        "timestamp_ms": now_ms(),
                        "cpu_id": i,
                        "cpu_mw": self._mw(last[1], reading, "cpu", elapsed),
                        "dram_mw": self._mw(last[1], reading, "dram", elapsed),
                    },
                )
            )
        return out

    def _accountant(self) -> Accountant:
        """Energy accounting (:mod:`zeus_core.daemon.accounting`) on the GPUs whose service lists their processes."""

        def read(i: int, since: float) -> dict[str, Any]:
            g = self.gpus[i]
            return dict(self.call(self.daemon.system_session, f"{g['service']}.read_processes", gpu=g["uuid"], since=since))

        ops = self.daemon.operations
        return Accountant([i for i, g in self.gpus.items() if f"{g['service']}.read_processes" in ops], read)

    def gpu_attributed_energy(self, session: Connection, params: dict[str, Any], claims: Any) -> Any:
        ids = self._ids(params, "gpu_ids", self.gpus, "GPU")
        missing = [i for i in ids if i not in self.accountant.gpus]
        if missing:
            g = self.gpus[missing[0]]
            raise HttpError(400, f"GPU {missing[0]} ({g['service']}) cannot list the processes on it: no energy attribution")
        return self.accountant.totals(ids)

    def close(self) -> None:
        self.accountant.close()
        self.gpu_feed.close()
        self.cpu_feed.close()


# --------------------------------------------------------------------------- one connection


def _json(status: int, body: Any, extra: list[tuple[str, str]] | None = None) -> tuple[int, list[tuple[str, str]], bytes]:
    data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
    headers = [("content-type", "application/json"), ("content-length", str(len(data))), *(extra or [])]
    return status, headers, data


class HttpConnection:
    """One HTTP/1.1 connection (keep-alive) of ``peer`` on the daemon's Unix socket or its TCP listener."""

    def __init__(self, api: NodeApi, conn: socket.socket, peer: Peer) -> None:
        self.api = api
        self.daemon = api.daemon
        self.conn = conn
        self.peer = peer
        self.h = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_BYTES)

    def _send(self, *events: Any) -> None:
        self.conn.sendall(b"".join(self.h.send(e) or b"" for e in events))

    def _respond(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self._send(h11.Response(status_code=status, headers=headers), h11.Data(data=body), h11.EndOfMessage())

    def _next(self, deadline: float | None) -> Any:
        while True:
            event = self.h.next_event()
            if event is not h11.NEED_DATA:
                return event
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self.conn.settimeout(left)
            data = self.conn.recv(65536)
            self.h.receive_data(data)

    def serve(self) -> None:
        """Answer requests until the peer closes, stays idle for :data:`REQUEST_TIMEOUT_S`, or the daemon stops."""
        try:
            while not self.daemon.stopping:
                self.conn.settimeout(REQUEST_TIMEOUT_S)
                try:
                    event = self._next(None)
                    if isinstance(event, h11.ConnectionClosed):
                        return
                    deadline = time.monotonic() + REQUEST_TIMEOUT_S
                    request = event
                    body = 0
                    while True:
                        event = self._next(deadline)
                        if isinstance(event, h11.Data):
                            body += len(event.data)
                            if body > MAX_REQUEST_BYTES:
                                raise HttpError(413, f"the request body exceeds {MAX_REQUEST_BYTES} bytes (values go in the query string)")
                        elif isinstance(event, h11.EndOfMessage):
                            break
                        elif isinstance(event, h11.ConnectionClosed):
                            return
                except h11.RemoteProtocolError as e:
                    status = 413 if "exceeds" in str(e) or "too" in str(e).lower() else e.error_status_hint
                    self._respond_error(status, f"bad HTTP request: {e}")
                    return
                except HttpError as e:
                    self._respond_error(e.status, str(e))
                    return
                except (TimeoutError, OSError):
                    return
                if not isinstance(request, h11.Request):
                    return
                head = len(request.target) + sum(len(k) + len(v) + 4 for k, v in request.headers)
                if head > MAX_REQUEST_BYTES:  # h11 bounds only what arrives in pieces; one large read is bounded here
                    self._respond_error(431, f"the request's target and headers exceed {MAX_REQUEST_BYTES} bytes")
                    return
                length = dict(request.headers).get(b"content-length")
                if length is not None and length.isdigit() and int(length) > MAX_REQUEST_BYTES:
                    self._respond_error(413, f"the request body exceeds {MAX_REQUEST_BYTES} bytes")
                    return
                if self._handle(request) == "close" or self.h.our_state is h11.MUST_CLOSE:
                    return
                try:
                    self.h.start_next_cycle()
                except h11.LocalProtocolError:
                    return
        except OSError:
            return

    def _respond_error(self, status: int, message: str) -> None:
        try:
            if self.h.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                self._respond(*_json(status, {"error": message}, [("connection", "close")]))
        except (OSError, h11.LocalProtocolError):
            pass

    def _handle(self, request: h11.Request) -> str | None:
        target = request.target.decode("latin-1")
        method = request.method.decode("latin-1")
        try:
            route, params, claims = self._authorize(method, target, dict(request.headers))
            session = self.daemon.http_session(self._principal(claims), self.peer)
            result = getattr(self.api, route.handler)(session, params, claims)
        except HttpError as e:
            self._respond(*_json(e.status, e.body, e.headers))
            return None
        except Exception as e:  # noqa: BLE001 - a bug here must answer, and leave the daemon serving
            log.exception("%s %s failed", method, target[:200])
            self._respond(*_json(500, {"error": f"the daemon failed this request: {type(e).__name__}: {e}"}))
            return None
        if route.stream:
            feed, ids = result
            self._stream(feed, ids)
            return "close"
        self._respond(*_json(200, result))
        return None

    def _principal(self, claims: tokens.Claims | None) -> str:
        if claims is not None:
            return f"token {claims.sub}"
        return "tcp" if self.peer.tcp else f"uid {self.peer.uid}"

    def _authorize(self, method: str, target: str, headers: dict[bytes, bytes]) -> tuple[Route, dict[str, Any], Any]:
        """The route, its parameters and the token's claims; HttpError 404/405/401/403/400 in upstream's order."""
        url = urlsplit(target)
        route = BY_PATH.get(url.path)
        if route is None:
            raise HttpError(404, f"no route {url.path[:200]}; see /discover and the API reference")
        if route.group is not None and route.group not in self.api.enabled:
            raise HttpError(404, f"API group '{route.group}' is not enabled on this server.")
        if method != route.method:
            raise HttpError(405, f"{route.path} takes {route.method}", headers=[("allow", route.method)])
        claims = None
        if url.path.startswith("/auth/") and not self.api.auth:
            raise HttpError(404, "Authentication is not enabled on this server.")
        if self.api.auth and route.path not in ("/discover", "/time"):
            claims = self._claims(headers, route)
        if route.group in CONTROL_GROUPS and self.peer.tcp and not self.api.auth:
            raise HttpError(
                403, "control over TCP needs tokens (auth = true in the daemon's configuration); without them use the Unix socket"
            )
        try:
            query = parse_qs(url.query, keep_blank_values=True, strict_parsing=False, max_num_fields=32)
        except ValueError as e:
            raise HttpError(400, f"Query deserialize error: {e}") from None
        return route, parse_params(route, query), claims

    def _claims(self, headers: dict[bytes, bytes], route: Route) -> tokens.Claims:
        challenge = [("www-authenticate", 'Bearer realm="zeusd"')]
        auth = headers.get(b"authorization", b"").decode("latin-1")
        if not auth.startswith("Bearer "):
            raise HttpError(401, "Authentication required. Provide an Authorization: Bearer <token> header.", headers=challenge)
        try:
            claims = tokens.verify(self.api.secret, auth.removeprefix("Bearer ").strip())
        except tokens.TokenError as e:
            raise HttpError(401, str(e), headers=challenge) from None
        if route.group is not None and route.group not in claims.scopes:
            scopes = ", ".join(f"'{s}'" for s in claims.scopes)
            raise HttpError(403, f"Token for user '{claims.sub}' lacks required scope '{route.group}'. Token scopes: [{scopes}]")
        return claims

    def _stream(self, feed: PowerFeed, ids: list[int]) -> None:
        """Server-sent events until the client leaves, is too slow, or the daemon stops."""
        try:
            self.conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, STREAM_SNDBUF)
        except OSError:
            pass
        self.conn.settimeout(STREAM_SEND_TIMEOUT_S)  # a send that cannot go out this long ends the stream
        self._send(h11.Response(status_code=200, headers=[("content-type", "text/event-stream"), ("cache-control", "no-cache")]))

        def drop() -> None:
            try:
                self.conn.shutdown(socket.SHUT_RDWR)  # wakes a send blocked on a client that does not read
            except OSError:
                pass

        sub: Subscriber = feed.subscribe(ids, drop)
        try:
            while not sub.dropped and not self.daemon.stopping:
                try:
                    sample = sub.queue.get(timeout=KEEPALIVE_S)
                    chunk = f"data: {json.dumps(sample, separators=(',', ':'))}\n\n".encode()
                except Exception:  # noqa: BLE001 - queue.Empty: nothing to say, check the client is still there
                    chunk = b": keepalive\n\n"
                self._send(h11.Data(data=chunk))
        except (OSError, h11.LocalProtocolError):
            pass
        finally:
            feed.unsubscribe(sub)


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """A server context for the TCP listener (TLS 1.2 at least)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    return ctx

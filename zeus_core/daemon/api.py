"""Upstream zeusd's HTTP API, as ``zeus daemon`` serves it: every route in one table.

The routes, their query parameters, their answers and their status codes are
those of upstream zeusd's API reference (``docs/zeusd/api.md`` of
ml-energy/zeus), so that upstream's clients (``zeus.utils.zeusd``,
``PowerStreamingClient``) and anything written against that reference work
unchanged; a client of this daemon reads :data:`ROUTES` for the same facts.

* ``GET /discover`` and ``GET /time``: always served, never need a token.
* ``GET /auth/whoami``: the token's ``sub``, ``scopes`` and ``exp``; 404 when ``auth`` is off.
* ``/gpu/*``: ``gpu_ids`` is a comma-separated list of GPU indices (NVML's numbering),
  required on writes, optional on reads (all served GPUs). Writes are ``POST`` with their
  values in the query string and ``block`` (``true``/``false``) required; they answer an
  empty 200.
* ``/cpu/*``: ``cpu_ids`` lists RAPL package indices (the ``N`` of ``intel-rapl:N``).
* ``stream_power``: server-sent events, one ``data: {...}`` line per device sample.

Status codes: 200; 400 bad input (a missing or malformed parameter, an unknown parameter,
a device not served, a value outside the device's range, an operation the device does not
support); 401 no token, a bad one or an expired one (``WWW-Authenticate: Bearer``); 403 a
token without the route's scope, or the driver's NoPermission; 404 an API group this daemon
does not serve (``enable``), an unknown path, or ``/auth/*`` with auth off; 405 a known path
with the wrong method; 413 a request over :data:`MAX_REQUEST_BYTES`; 500 a driver failure.
Errors are ``{"error": "..."}``; per-device failures of one request are
``{"errors": {"<id>": "..."}}`` with the worst status.

Where this daemon deliberately differs from upstream (each said in the README too):

* ``POST /gpu/reset_power_limit`` (``gpu_ids``, ``block``) is an addition: it puts back the
  limit the GPU had before this daemon changed it.
* A setting made over HTTP is *held* (:mod:`zeus_core.daemon.server`) by the caller -- the
  token's subject, or on the Unix socket without auth the peer's uid -- until that caller
  resets it or the daemon stops, which puts every original back (upstream leaves them). A
  setting an engine client holds over the private protocol cannot be reset over HTTP by
  someone else (400).
* Over TCP without ``auth``, the control routes answer 403: the Unix socket knows its peer
  (``SO_PEERCRED``, the allow-list), a TCP connection does not.
* ``GET /gpu/get_attributed_energy`` (``gpu_ids`` optional) is an addition: each GPU's energy
  since the daemon started, charged to the processes and Slurm jobs on it (an estimate:
  :mod:`zeus_core.daemon.accounting`); 400 for a GPU whose service cannot list its processes.
* ``POST /gpu/set_persistence_mode`` answers 400 (not supported) unless the GPU service
  offers it; ``block=false`` runs the write before answering all the same (there is no
  queue to hand it to), and reports its errors.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs

#: the largest request (headers and body) the daemon reads; a request carries its values in
#: the query string, so a few KiB is plenty
MAX_REQUEST_BYTES = 16 * 1024


class HttpError(Exception):
    """An answer other than 200: ``status`` and its JSON ``body`` (``{"error": ...}`` by default)."""

    def __init__(self, status: int, message: str = "", body: dict[str, Any] | None = None, headers: list[tuple[str, str]] | None = None):
        super().__init__(message)
        self.status = status
        self.body = body if body is not None else {"error": message}
        self.headers = headers or []


@attrs.frozen
class Param:
    """A query parameter: ``kind`` is ``ids`` (comma-separated indices), ``bool`` or ``uint``."""

    name: str
    kind: str
    required: bool = True


@attrs.frozen
class Route:
    """One route: its method and path, the API group (scope) it needs (None: no token), its
    parameters, and the name of the :class:`~zeus_core.daemon.http.NodeApi` method that answers it."""

    method: str
    path: str
    group: str | None
    params: tuple[Param, ...]
    handler: str
    stream: bool = False

    @property
    def writes(self) -> bool:
        return self.method == "POST"


def _gpu_write(path: str, handler: str, *values: Param) -> Route:
    return Route("POST", path, "gpu-control", (Param("gpu_ids", "ids"), *values, Param("block", "bool")), handler)


def _gpu_read(path: str, handler: str, stream: bool = False) -> Route:
    return Route("GET", path, "gpu-read", (Param("gpu_ids", "ids", required=False),), handler, stream)


def _cpu_read(path: str, handler: str, *extra: Param, stream: bool = False) -> Route:
    return Route("GET", path, "cpu-read", (Param("cpu_ids", "ids", required=False), *extra), handler, stream)


_CLOCKS = (Param("min_clock_mhz", "uint"), Param("max_clock_mhz", "uint"))

ROUTES: tuple[Route, ...] = (
    Route("GET", "/discover", None, (), "discover"),
    Route("GET", "/time", None, (), "time"),
    Route("GET", "/auth/whoami", None, (), "whoami"),
    _gpu_write("/gpu/set_power_limit", "set_power_limit", Param("power_limit_mw", "uint")),
    _gpu_write("/gpu/reset_power_limit", "reset_power_limit"),
    _gpu_write("/gpu/set_persistence_mode", "set_persistence_mode", Param("enabled", "bool")),
    _gpu_write("/gpu/set_gpu_locked_clocks", "set_gpu_locked_clocks", *_CLOCKS),
    _gpu_write("/gpu/reset_gpu_locked_clocks", "reset_gpu_locked_clocks"),
    _gpu_write("/gpu/set_mem_locked_clocks", "set_mem_locked_clocks", *_CLOCKS),
    _gpu_write("/gpu/reset_mem_locked_clocks", "reset_mem_locked_clocks"),
    _gpu_write("/gpu/reset_locked_clocks", "reset_locked_clocks"),
    _gpu_read("/gpu/get_cumulative_energy", "gpu_energy"),
    _gpu_read("/gpu/get_power", "gpu_power"),
    _gpu_read("/gpu/get_power_limit", "gpu_power_limit"),
    _gpu_read("/gpu/get_power_limit_constraints", "gpu_power_limit_constraints"),
    _gpu_read("/gpu/get_persistence_mode", "gpu_persistence_mode"),
    _gpu_read("/gpu/stream_power", "gpu_stream", stream=True),
    _gpu_read("/gpu/get_attributed_energy", "gpu_attributed_energy"),
    _cpu_read("/cpu/get_cumulative_energy", "cpu_energy", Param("cpu", "bool"), Param("dram", "bool")),
    _cpu_read("/cpu/get_power", "cpu_power"),
    _cpu_read("/cpu/stream_power", "cpu_stream", stream=True),
)
BY_PATH: dict[str, Route] = {r.path: r for r in ROUTES}

_UINT = re.compile(r"^\d{1,10}$")


def parse_ids(raw: str, param: str, device: str) -> list[int]:
    """``"0,2"`` as sorted unique indices; HttpError 400 for an empty list, an empty entry or a non-index."""
    if not raw.strip():
        raise HttpError(400, f"{param} must contain at least one {device} index")
    ids = set()
    for part in raw.split(","):
        part = part.strip()
        if not part:
            raise HttpError(400, f"{param} contains an empty {device} index")
        if not _UINT.match(part):
            raise HttpError(400, f"Invalid {device} index: {part[:40]}")
        ids.add(int(part))
    return sorted(ids)


def parse_params(route: Route, query: dict[str, list[str]]) -> dict[str, Any]:
    """The route's parameters from a parsed query string, typed; HttpError 400 naming the parameter
    for a missing, repeated, unknown or malformed one (upstream refuses unknown fields too)."""
    known = {p.name: p for p in route.params}
    unknown = sorted(set(query) - set(known))
    if unknown:
        expected = ", ".join(known) or "none"
        raise HttpError(400, f"Query deserialize error: unknown field(s) {', '.join(unknown)[:200]}, expected: {expected}")
    out: dict[str, Any] = {}
    for p in route.params:
        values = query.get(p.name)
        if not values:
            if p.required:
                raise HttpError(400, f"Query deserialize error: missing field `{p.name}`")
            continue
        if len(values) > 1:
            raise HttpError(400, f"Query deserialize error: `{p.name}` given {len(values)} times")
        raw = values[0]
        if p.kind == "bool":
            if raw not in ("true", "false"):
                raise HttpError(400, f"Query deserialize error: `{p.name}` must be true or false, got {raw[:40]!r}")
            out[p.name] = raw == "true"
        elif p.kind == "uint":
            if not _UINT.match(raw) or int(raw) > 2**32 - 1:
                raise HttpError(400, f"Query deserialize error: `{p.name}` must be a whole number (0 to 4294967295), got {raw[:40]!r}")
            out[p.name] = int(raw)
        else:
            device = "GPU" if p.name.startswith("gpu") else "CPU"
            out[p.name] = parse_ids(raw, p.name, device)
    return out


#: NVML's error codes (``detail.nvml_error`` of a failed operation) that are the caller's doing, as statuses
_NVML_STATUS = {2: 400, 3: 400, 4: 403}  # INVALID_ARGUMENT, NOT_SUPPORTED, NO_PERMISSION
#: amdsmi's status codes (``detail.amdsmi_error``) likewise: AMDSMI_STATUS_INVAL, _NOT_SUPPORTED, _NO_PERM
_AMDSMI_STATUS = {1: 400, 2: 400, 10: 403}


def status_of(reply: dict[str, Any]) -> int:
    """The HTTP status of a failed reply of :meth:`~zeus_core.daemon.server.Daemon.dispatch`."""
    err = reply.get("error", {})
    code = err.get("code")
    if code in ("invalid_arguments", "refused", "unknown_operation", "bad_request"):
        return 400
    if code == "forbidden":
        return 403
    detail = err.get("detail") or {}
    for key, statuses in (("nvml_error", _NVML_STATUS), ("amdsmi_error", _AMDSMI_STATUS)):
        code = detail.get(key)
        if isinstance(code, int):
            return statuses.get(code, 500)
    return 500


def aggregate(errors: dict[int, tuple[int, str]]) -> HttpError:
    """Per-device failures as one answer: ``{"errors": {id: message}}`` with the worst status."""
    worst = max(status for status, _ in errors.values())
    return HttpError(worst, body={"errors": {str(i): msg for i, (_, msg) in sorted(errors.items())}})


Handler = Callable[..., Any]

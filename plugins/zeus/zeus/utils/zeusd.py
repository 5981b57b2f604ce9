"""Upstream's ``zeus.utils.zeusd``: a client of a node daemon's HTTP API (upstream zeusd, or ``zeus daemon``).

``ZeusdConfig`` says where the daemon is (``ZeusdConfig.uds``, ``ZeusdConfig.tcp``, or
``ZeusdConfig.from_env()`` from ``ZEUSD_SOCK_PATH``, ``ZEUSD_HOST_PORT`` and ``ZEUSD_TOKEN``);
``ZeusdClient`` runs ``/discover`` and, when the daemon wants tokens, ``/auth/whoami`` once, then
offers one method per route with upstream's names, arguments and return types;
``require_capabilities`` fails early when the daemon or the token cannot do what a caller needs.

The API itself -- the routes' parameters, their errors, events, the clock offset -- is spoken by
the core's :mod:`zeus_core.daemon.nodeclient`, the one client of it in this project (``zeus
monitor --node`` uses it too). What stays here is upstream's public surface: its dataclasses, its
errors, and ``ZeusdConfig.make_client()``, which upstream documents as returning an
``httpx.Client``; so the bytes go through that client (:class:`HttpxTransport`), and a program (or
a test) that replaces ``make_client`` steers every request, as it does upstream.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from zeus.exception import ZeusBaseError
from zeus_core.daemon.nodeclient import ENV_HOST_PORT, ENV_SOCK, ENV_TOKEN, STREAM_READ_TIMEOUT_S, NodeClient, NodeError, error_text

logger = logging.getLogger(__name__)

__all__ = [
    "CpuDramPower",
    "CpuEnergyResult",
    "CpuInfo",
    "CpuPowerSnapshot",
    "GpuInfo",
    "GpuPowerSnapshot",
    "HttpxTransport",
    "ZeusdAuthError",
    "ZeusdCapabilityError",
    "ZeusdClient",
    "ZeusdConfig",
    "ZeusdConnectionError",
    "require_capabilities",
]


class ZeusdConnectionError(ZeusBaseError):
    """The daemon cannot be reached, or its ``/discover`` did not answer as a daemon's does."""


class ZeusdAuthError(ZeusBaseError):
    """The daemon wants a token and none was given, or it refused the one given."""


class ZeusdCapabilityError(ZeusBaseError):
    """The daemon does not serve an API group, a device, or a scope a caller needs."""


@dataclass(frozen=True)
class GpuInfo:
    """A GPU the daemon serves: its index in the routes, model name, PCI address (``lspci -D``), and
    whether ``/gpu/get_cumulative_energy`` can be trusted for it."""

    id: int
    name: str
    pci_address: str
    cumulative_energy_available: bool


@dataclass(frozen=True)
class CpuInfo:
    """A CPU package the daemon serves (its RAPL index) and whether it has a DRAM counter."""

    id: int
    dram_available: bool


@dataclass(frozen=True)
class GpuPowerSnapshot:
    """``/gpu/get_power``: the daemon's Unix time (ms) and each GPU's power (mW)."""

    timestamp_ms: int
    power_mw: dict[int, int]


@dataclass(frozen=True)
class CpuDramPower:
    """One package's power (mW) and its DRAM's (None without a DRAM counter)."""

    cpu_mw: int
    dram_mw: int | None


@dataclass(frozen=True)
class CpuPowerSnapshot:
    """``/cpu/get_power``: the daemon's Unix time (ms) and each package's power."""

    timestamp_ms: int
    power_mw: dict[int, CpuDramPower]


@dataclass(frozen=True)
class CpuEnergyResult:
    """``/cpu/get_cumulative_energy`` of one package (µJ); None where not asked for or not available."""

    cpu_energy_uj: int | None
    dram_energy_uj: int | None


class HttpxTransport:
    """The core client's transport over an ``httpx.Client`` (what ``ZeusdConfig.make_client()`` gives)."""

    def __init__(self, client: httpx.Client, config: ZeusdConfig) -> None:
        self.client = client
        self.config = config

    def request(self, method: str, path: str, params: dict[str, str]) -> tuple[int, bytes]:
        try:
            resp = self.client.request(method, self.config.url(path), params=params)
        except httpx.RequestError as e:
            raise NodeError(f"Cannot reach Zeusd at {self.config.endpoint}: {e}") from e
        return resp.status_code, resp.content

    @contextlib.contextmanager
    def stream(self, path: str, params: dict[str, str]) -> Iterator[Iterator[bytes]]:
        timeout = httpx.Timeout(10.0, read=STREAM_READ_TIMEOUT_S)
        try:
            with self.client.stream("GET", self.config.url(path), params=params, timeout=timeout) as resp:
                if resp.status_code != 200:
                    text = resp.read().decode("utf-8", "replace")
                    raise NodeError(f"{path}: HTTP {resp.status_code}: {error_text(resp.status_code, text)}", resp.status_code, text)

                def chunks() -> Iterator[bytes]:
                    try:
                        yield from resp.iter_raw()
                    except (httpx.HTTPError, httpx.StreamError, OSError) as e:
                        raise NodeError(f"the stream from {self.config.endpoint} broke: {e}") from e

                yield chunks()
        except httpx.RequestError as e:
            raise NodeError(f"Cannot reach Zeusd at {self.config.endpoint}: {e}") from e

    def close(self) -> None:
        self.client.close()


@dataclass(frozen=True)
class ZeusdConfig:
    """Where a daemon listens: ``host_port`` (TCP) or ``socket_path`` (Unix socket), the ``token`` to show
    it (else ``ZEUSD_TOKEN``'s, read by ``from_env``), and for ``PowerStreamingClient`` which GPUs and
    CPUs to stream (None: all; an empty list: none)."""

    host_port: str | None = None
    socket_path: str | None = None
    token: str | None = None
    gpu_indices: list[int] | None = None
    cpu_indices: list[int] | None = None

    @classmethod
    def tcp(
        cls, host: str, port: int, *, token: str | None = None, gpu_indices: list[int] | None = None, cpu_indices: list[int] | None = None
    ) -> ZeusdConfig:
        """A daemon at ``host:port``."""
        return cls(host_port=f"{host}:{port}", token=token, gpu_indices=gpu_indices, cpu_indices=cpu_indices)

    @classmethod
    def uds(
        cls, socket_path: str, *, token: str | None = None, gpu_indices: list[int] | None = None, cpu_indices: list[int] | None = None
    ) -> ZeusdConfig:
        """A daemon on the Unix socket ``socket_path``."""
        return cls(socket_path=socket_path, token=token, gpu_indices=gpu_indices, cpu_indices=cpu_indices)

    @classmethod
    def from_env(cls) -> ZeusdConfig | None:
        """``ZEUSD_SOCK_PATH`` (preferred) or ``ZEUSD_HOST_PORT``, with ``ZEUSD_TOKEN``; None when neither is set."""
        token = os.environ.get(ENV_TOKEN)
        sock = os.environ.get(ENV_SOCK)
        if sock is not None:
            return cls.uds(socket_path=sock, token=token)
        host_port = os.environ.get(ENV_HOST_PORT)
        if host_port is not None:
            return cls(host_port=host_port, token=token)
        return None

    @property
    def _is_uds(self) -> bool:
        return self.socket_path is not None

    def _auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def make_client(self) -> httpx.Client:
        """An ``httpx.Client`` that reaches the daemon (over the Unix socket when there is one) with the token."""
        if self._is_uds:
            return httpx.Client(transport=httpx.HTTPTransport(uds=self.socket_path), headers=self._auth_headers())
        return httpx.Client(headers=self._auth_headers())

    def url(self, path: str) -> str:
        """The URL of ``path`` on this daemon (``http://localhost`` stands for the Unix socket)."""
        return f"http://localhost{path}" if self._is_uds else f"http://{self.host_port}{path}"

    @property
    def endpoint(self) -> str:
        """The socket path or ``host:port``: how the daemon is named in messages and in readings."""
        if self.socket_path is not None:
            return self.socket_path
        if self.host_port is not None:
            return self.host_port
        raise ValueError("ZeusdConfig has neither socket_path nor host_port set.")

    def node_client(self) -> NodeClient:
        """The core's client of this daemon, its bytes through :meth:`make_client`."""
        return NodeClient(transport=HttpxTransport(self.make_client(), self), name=self.endpoint)


def _ids(ids: list[int] | None) -> list[int] | None:
    return None if ids is None else list(ids)


class ZeusdClient:
    """A daemon, discovered: its GPUs and CPUs, its API groups, and what the token may do there.

    ``config`` None reads ``ZEUSD_SOCK_PATH`` / ``ZEUSD_HOST_PORT``; ZeusdConnectionError when neither is
    set, the daemon cannot be reached, or its ``/discover`` is not a current daemon's. A token problem
    does not raise here: it is kept in ``auth_error`` (``require_capabilities`` raises it).
    """

    def __init__(self, config: ZeusdConfig | None = None) -> None:
        if config is None:
            config = ZeusdConfig.from_env()
            if config is None:
                raise ZeusdConnectionError(
                    f"No Zeusd connection configured: set {ENV_SOCK} (a Unix socket) or {ENV_HOST_PORT} (host:port), or pass a ZeusdConfig."
                )
        self._config = config
        self._node = config.node_client()
        try:
            data = self._node.discover()
        except NodeError as e:
            if e.status is None:
                raise ZeusdConnectionError(f"Cannot reach Zeusd at {config.endpoint}: {e.__cause__ or e}") from e
            raise ZeusdConnectionError(f"Zeusd at {config.endpoint} returned HTTP {e.status} on /discover: {e.text}") from e
        try:
            self._gpus = [GpuInfo(g["id"], g["name"], g["pci_address"], g["cumulative_energy_available"]) for g in data["gpus"]]
            self._cpus = [CpuInfo(c["id"], c["dram_available"]) for c in data["cpus"]]
            self._enabled_api_groups: set[str] = set(data["enabled_api_groups"])
            self._auth_required: bool = bool(data["auth_required"])
        except (KeyError, TypeError) as e:
            raise ZeusdConnectionError(
                f"Zeusd at {config.endpoint} did not report {e} in /discover: the daemon predates this client; Upgrade zeusd."
            ) from e
        self._gpu_ids = [g.id for g in self._gpus]
        self._cpu_ids = [c.id for c in self._cpus]
        self._dram_available = [c.dram_available for c in self._cpus]
        self._auth_error: str | None = None
        self._granted_scopes: frozenset[str] = frozenset()
        self._whoami_sub: str | None = None
        self._whoami_exp: int | None = None
        if self._auth_required:
            self._authenticate()

    def _authenticate(self) -> None:
        where = self._config.endpoint
        if not self._config.token:
            self._auth_error = (
                f"Zeusd at {where} requires authentication but no token was provided: set {ENV_TOKEN} or pass token= to the ZeusdConfig."
            )
        else:
            try:
                whoami = self._node.get("/auth/whoami")
            except NodeError as e:
                if e.status == 401:
                    self._auth_error = f"Token rejected by Zeusd at {where}: {e.text}"
                else:
                    self._auth_error = f"Unexpected response from /auth/whoami at {where} (HTTP {e.status}): {e.text or e}"
            else:
                self._granted_scopes = frozenset(whoami.get("scopes", []))
                self._whoami_sub = whoami.get("sub")
                self._whoami_exp = whoami.get("exp")
                logger.info("Authenticated with Zeusd at %s as '%s' (scopes: %s)", where, self._whoami_sub, sorted(self._granted_scopes))
        if self._auth_error:
            logger.warning("Zeusd at %s: %s", where, self._auth_error)

    # -- what discovery found --

    @property
    def endpoint(self) -> str:
        return self._config.endpoint

    @property
    def gpus(self) -> list[GpuInfo]:
        return list(self._gpus)

    @property
    def gpu_ids(self) -> list[int]:
        return list(self._gpu_ids)

    @property
    def cpus(self) -> list[CpuInfo]:
        return list(self._cpus)

    @property
    def cpu_ids(self) -> list[int]:
        return list(self._cpu_ids)

    @property
    def dram_available(self) -> list[bool]:
        """Whether each package (in ``cpu_ids``' order) has a DRAM counter."""
        return list(self._dram_available)

    @property
    def auth_required(self) -> bool:
        return self._auth_required

    @property
    def auth_error(self) -> str | None:
        """Why the token does not work here (None: it does, or none is needed)."""
        return self._auth_error

    @property
    def granted_scopes(self) -> frozenset[str]:
        """The token's scopes (empty without auth or with a token that failed)."""
        return self._granted_scopes

    def _can(self, group: str) -> bool:
        return group in self._enabled_api_groups and (not self._auth_required or group in self._granted_scopes)

    @property
    def can_read_gpu(self) -> bool:
        return self._can("gpu-read")

    @property
    def can_control_gpu(self) -> bool:
        return self._can("gpu-control")

    @property
    def can_read_cpu(self) -> bool:
        return self._can("cpu-read")

    # -- the routes --

    def _call(self, operation: str, method: str, path: str, **params: Any) -> Any:
        from zeus.device.exception import ZeusdError

        try:
            return self._node.call(method, path, **params)
        except NodeError as e:
            raise ZeusdError(f"Failed to {operation}: {e.text or e}") from e

    def get_gpu_energy(self, gpu_ids: list[int]) -> dict[int, int]:
        """Each GPU's energy counter, mJ."""
        data = self._call("get_gpu_energy", "GET", "/gpu/get_cumulative_energy", gpu_ids=list(gpu_ids))
        return {int(k): v["energy_mj"] for k, v in data.items()}

    def get_gpu_power(self, gpu_ids: list[int] | None = None) -> GpuPowerSnapshot:
        """Each GPU's power now, mW (None: every GPU served)."""
        data = self._call("get_gpu_power", "GET", "/gpu/get_power", gpu_ids=_ids(gpu_ids))
        return GpuPowerSnapshot(data["timestamp_ms"], {int(k): v for k, v in data["power_mw"].items()})

    def set_power_limit(self, gpu_ids: list[int], power_limit_mw: int, block: bool = True) -> None:
        self._call("set_power_limit", "POST", "/gpu/set_power_limit", gpu_ids=list(gpu_ids), power_limit_mw=power_limit_mw, block=block)

    def set_persistence_mode(self, gpu_ids: list[int], enabled: bool, block: bool = True) -> None:
        self._call("set_persistence_mode", "POST", "/gpu/set_persistence_mode", gpu_ids=list(gpu_ids), enabled=enabled, block=block)

    def get_persistence_mode(self, gpu_ids: list[int] | None = None) -> dict[int, bool]:
        data = self._call("get_persistence_mode", "GET", "/gpu/get_persistence_mode", gpu_ids=_ids(gpu_ids))
        return {int(k): v["enabled"] for k, v in data.items()}

    def get_power_limit(self, gpu_ids: list[int] | None = None) -> dict[int, int]:
        """Each GPU's power limit, mW."""
        data = self._call("get_power_limit", "GET", "/gpu/get_power_limit", gpu_ids=_ids(gpu_ids))
        return {int(k): v["power_limit_mw"] for k, v in data.items()}

    def get_power_limit_constraints(self, gpu_ids: list[int] | None = None) -> dict[int, tuple[int, int]]:
        """Each GPU's power-limit range ``(min_mw, max_mw)``."""
        data = self._call("get_power_limit_constraints", "GET", "/gpu/get_power_limit_constraints", gpu_ids=_ids(gpu_ids))
        return {int(k): (v["min_power_limit_mw"], v["max_power_limit_mw"]) for k, v in data.items()}

    def _clocks(self, operation: str, gpu_ids: list[int], min_clock_mhz: int, max_clock_mhz: int, block: bool) -> None:
        path = f"/gpu/{operation}"
        self._call(operation, "POST", path, gpu_ids=list(gpu_ids), min_clock_mhz=min_clock_mhz, max_clock_mhz=max_clock_mhz, block=block)

    def set_gpu_locked_clocks(self, gpu_ids: list[int], min_clock_mhz: int, max_clock_mhz: int, block: bool = True) -> None:
        self._clocks("set_gpu_locked_clocks", gpu_ids, min_clock_mhz, max_clock_mhz, block)

    def set_mem_locked_clocks(self, gpu_ids: list[int], min_clock_mhz: int, max_clock_mhz: int, block: bool = True) -> None:
        self._clocks("set_mem_locked_clocks", gpu_ids, min_clock_mhz, max_clock_mhz, block)

    def _reset(self, operation: str, gpu_ids: list[int], block: bool) -> None:
        self._call(operation, "POST", f"/gpu/{operation}", gpu_ids=list(gpu_ids), block=block)

    def reset_gpu_locked_clocks(self, gpu_ids: list[int], block: bool = True) -> None:
        self._reset("reset_gpu_locked_clocks", gpu_ids, block)

    def reset_mem_locked_clocks(self, gpu_ids: list[int], block: bool = True) -> None:
        self._reset("reset_mem_locked_clocks", gpu_ids, block)

    def reset_locked_clocks(self, gpu_ids: list[int], block: bool = True) -> None:
        """Both clock domains back to their defaults (AMD GPUs have only this reset)."""
        self._reset("reset_locked_clocks", gpu_ids, block)

    def get_cpu_energy(self, cpu_ids: list[int] | None = None, cpu: bool = True, dram: bool = True) -> dict[int, CpuEnergyResult]:
        """Each package's counters, µJ."""
        data = self._call("get_cpu_energy", "GET", "/cpu/get_cumulative_energy", cpu_ids=_ids(cpu_ids), cpu=cpu, dram=dram)
        return {int(k): CpuEnergyResult(v.get("cpu_energy_uj"), v.get("dram_energy_uj")) for k, v in data.items()}

    def get_cpu_power(self, cpu_ids: list[int] | None = None) -> CpuPowerSnapshot:
        data = self._call("get_cpu_power", "GET", "/cpu/get_power", cpu_ids=_ids(cpu_ids))
        power = {int(k): CpuDramPower(v["cpu_mw"], v.get("dram_mw")) for k, v in data["power_mw"].items()}
        return CpuPowerSnapshot(data["timestamp_ms"], power)

    def get_time(self) -> float:
        """The daemon's clock, Unix seconds."""
        return self._call("get_time", "GET", "/time")["timestamp_ms"] / 1000.0

    def make_client(self) -> httpx.Client:
        """A new ``httpx.Client`` to this daemon (what a long-lived stream uses)."""
        return self._config.make_client()

    def url(self, path: str) -> str:
        return self._config.url(path)


def require_capabilities(
    client: ZeusdClient,
    *,
    read_gpu: bool = False,
    control_gpu: bool = False,
    read_cpu: bool = False,
    gpu_ids: list[int] | None = None,
    cpu_ids: list[int] | None = None,
) -> None:
    """Raise before any work when the daemon cannot serve what the caller needs: ZeusdAuthError for a
    token problem, ZeusdCapabilityError listing every group, scope or device that is missing."""
    if client.auth_error:
        raise ZeusdAuthError(client.auth_error)
    missing: list[str] = []
    for wanted, group in ((read_gpu, "gpu-read"), (control_gpu, "gpu-control"), (read_cpu, "cpu-read")):
        if wanted and not client._can(group):
            if group not in client._enabled_api_groups:
                missing.append(f"API group '{group}' is not enabled on this server")
            else:
                missing.append(f"Token lacks required scope '{group}' (granted: {sorted(client.granted_scopes)})")
    for kind, wanted_ids, have in (("GPU", gpu_ids, client.gpu_ids), ("CPU", cpu_ids, client.cpu_ids)):
        if wanted_ids is not None and set(wanted_ids) - set(have):
            missing.append(f"{kind} indices {sorted(set(wanted_ids) - set(have))} not available (available: {sorted(have)})")
    if missing:
        raise ZeusdCapabilityError(f"Zeusd at {client.endpoint}: " + "; ".join(missing))

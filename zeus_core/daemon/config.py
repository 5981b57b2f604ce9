"""``zeus daemon``'s configuration: one TOML file, structured with attrs + cattrs.

Every mistake is reported at once with its line and path, as ``zeus
validate`` does for ``job.toml`` (``daemon.toml:4: no user named 'bob' on this
machine ... @ $.allow_users[1]``), and the daemon exits 2 before it creates
the socket or touches a device. Example (``contrib/zeus-daemon.toml``)::

    socket = "/run/zeus/daemon.sock"
    socket_group = "zeus"            # who may open the socket: its group ...
    socket_mode = "0660"             # ... with these permissions
    allow_groups = ["zeus"]          # whom the daemon serves (SO_PEERCRED)
    plugins = ["nvml", "cpu"]        # entry points the root process imports
    journal_dir = "/var/lib/zeus-daemon"

    [serve.nvml]                     # GPU power limits and clocks
    gpus = "all"                     # or NVML indices / UUIDs: [0, "GPU-..."]

    [serve.rapl]                     # RAPL energy counters (opt in)

The same socket also speaks upstream zeusd's HTTP API (:mod:`zeus_core.daemon.api`);
``tcp = "127.0.0.1:4938"`` serves it over TCP too, ``auth = true`` requires
signed tokens (``zeus daemon token issue``), ``enable`` lists the API groups
served (``["gpu-read", "cpu-read"]``: monitor only), ``tls_cert`` and
``tls_key`` put TLS on the TCP listener. ``[overrides]`` runs setters as the
commands a site allows (``sudo nvidia-smi ...``; :mod:`zeus_core.daemon.overrides`).

A service is served only when its ``[serve.<name>]`` table is present; its
keys are the options of the plugin's service.
"""

from __future__ import annotations

import grp
import importlib.metadata
import ipaddress
import os
import pwd
import tomllib
from pathlib import Path
from typing import Any

import attrs

from zeus_core import catalog
from zeus_core.daemon.overrides import problems as override_problems
from zeus_core.engine.tomllines import line_index
from zeus_core.engine.validation import JobError, Problem, structure, suggest

DEFAULT_SOCKET = "/run/zeus/daemon.sock"
DEFAULT_JOURNAL_DIR = "/var/lib/zeus-daemon"


def _absolute(_inst: Any, attribute: Any, value: Any) -> None:
    if not os.path.isabs(value):
        raise ValueError(f"{attribute.name} must be an absolute path (the daemon's working folder is not yours), got {value!r}")


def _log(_inst: Any, attribute: Any, value: Any) -> None:
    if value not in ("stderr", "none") and not os.path.isabs(value):
        raise ValueError(
            f'{attribute.name} must be "stderr" (systemd\'s journal picks it up), "none", or an absolute file path, got {value!r}'
        )


def _max_clients(_inst: Any, attribute: Any, value: Any) -> None:
    if not 1 <= value <= 4096:
        raise ValueError(f"{attribute.name} must be between 1 and 4096 (one thread each), got {value}")


#: the API groups of upstream zeusd's HTTP API (``enable``); monitor-only is the two read groups
API_GROUPS = ("gpu-read", "gpu-control", "cpu-read", "cpu-control")


def _enable(_inst: Any, attribute: Any, value: Any) -> None:
    bad = [g for g in value if g not in API_GROUPS]
    if bad:
        raise ValueError(f"{attribute.name} lists unknown API groups {bad}; the groups are {', '.join(API_GROUPS)}")


def _tcp(_inst: Any, attribute: Any, value: Any) -> None:
    if value is not None:
        parse_host_port(value)


def _optional_absolute(_inst: Any, attribute: Any, value: Any) -> None:
    if value is not None:
        _absolute(_inst, attribute, value)


def parse_host_port(value: str) -> tuple[str, int]:
    """``"HOST:PORT"`` (``"[::1]:4938"`` for IPv6) as (host, port); ValueError naming the form."""
    host, sep, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(
            f'tcp must be "HOST:PORT" with a port up to 65535 (0: one the kernel picks, logged), e.g. "127.0.0.1:4938", got {value!r}'
        )
    return host, int(port)


def _interval(_inst: Any, attribute: Any, value: Any) -> None:
    if not 0.01 <= value <= 60:
        raise ValueError(f"{attribute.name} must be between 0.01 and 60 seconds, got {value}")


def _first_frame(_inst: Any, attribute: Any, value: Any) -> None:
    if not 0.1 <= value <= 600:
        raise ValueError(f"{attribute.name} must be between 0.1 and 600 seconds, got {value}")


@attrs.define
class DaemonConfig:
    """The keys of the daemon's TOML file.

    ``socket``: the Unix socket clients connect to. ``socket_owner`` /
    ``socket_group``: its owner and group (names or numeric ids; default the
    daemon's own). ``socket_mode``: its permissions, an octal string such as
    ``"0660"``. ``allow_users`` / ``allow_groups``: who is served (names or
    ids; a user is allowed when listed or in a listed group, primary or
    supplementary; root is always allowed). ``log``: ``"stderr"``, ``"none"``
    or a file; every change is logged. ``journal_dir``: where the original
    settings are journaled (restored at the next start after a SIGKILL).
    ``plugins``: the zeus entry points to load (default every installed one;
    name only those that serve, so the root process imports nothing else).
    ``max_clients``: connections served at once; ``max_clients_per_user``: of
    them, how many one user (uid) may hold (at most ``max_clients``), so that one user's idle connections
    cannot lock the others out; ``first_frame_timeout_s``: how long a new
    connection may wait before its first request (a client sends ``hello`` at once;
    after it, a connection may stay idle for as long as its training runs).
    ``serve``: one table per service to serve, holding that service's options.

    The HTTP API (upstream zeusd's, :mod:`zeus_core.daemon.api`): ``tcp``:
    ``"HOST:PORT"`` to serve it over TCP as well (absent: the Unix socket only); an address
    other than loopback is refused unless ``auth`` is on. ``auth``: require a signed token
    (``Authorization: Bearer``) on every route but ``/discover`` and ``/time``.
    ``auth_secret_file``: the signing secret (default ``<journal_dir>/auth.secret``),
    created with mode 0600 when missing. ``enable``: the API groups served (``gpu-read``,
    ``gpu-control``, ``cpu-read``, ``cpu-control``; monitor-only is the read groups alone;
    the private protocol's setters follow ``gpu-control`` too). ``tls_cert`` /
    ``tls_key``: a PEM certificate and key for the TCP listener (TLS when set).
    ``stream_interval_s``: how often a power stream polls the devices while a client listens.

    ``overrides``: setter name -> the command (argv list, placeholders such as ``{index}``
    and ``{watts}``) run instead of the vendor library (:mod:`zeus_core.daemon.overrides`);
    ``override_timeout_s``: how long one may run; ``override_service``: the served service
    whose GPUs the commands drive (``nvidia-smi`` drives NVIDIA GPUs only; required when
    more than one service is served, else that one).
    """

    socket: str = attrs.field(default=DEFAULT_SOCKET, validator=_absolute)
    socket_owner: Any = None
    socket_group: Any = None
    socket_mode: Any = "0660"
    allow_users: list[Any] = attrs.field(factory=list)
    allow_groups: list[Any] = attrs.field(factory=list)
    log: str = attrs.field(default="stderr", validator=_log)
    journal_dir: str = attrs.field(default=DEFAULT_JOURNAL_DIR, validator=_absolute)
    plugins: list[str] | None = None
    max_clients: int = attrs.field(default=64, validator=_max_clients)
    max_clients_per_user: int = attrs.field(default=16, validator=_max_clients)
    first_frame_timeout_s: float = attrs.field(default=10.0, validator=_first_frame)
    serve: dict[str, Any] = attrs.field(factory=dict)
    tcp: str | None = attrs.field(default=None, validator=_tcp)
    auth: bool = False
    auth_secret_file: str | None = attrs.field(default=None, validator=_optional_absolute)
    enable: list[str] = attrs.field(factory=lambda: list(API_GROUPS), validator=_enable)
    tls_cert: str | None = attrs.field(default=None, validator=_optional_absolute)
    tls_key: str | None = attrs.field(default=None, validator=_optional_absolute)
    stream_interval_s: float = attrs.field(default=0.1, validator=_interval)
    overrides: dict[str, Any] = attrs.field(factory=dict)
    override_timeout_s: float = attrs.field(default=30.0, validator=_first_frame)  # the same bounds
    override_service: str | None = None

    @property
    def secret_path(self) -> Path:
        return Path(self.auth_secret_file or os.path.join(self.journal_dir, "auth.secret"))


@attrs.frozen
class ResolvedConfig:
    """The configuration with names resolved to ids and each service's options structured."""

    path: Path
    raw: DaemonConfig
    socket_uid: int
    socket_gid: int
    socket_mode: int
    allowed_uids: frozenset[int]
    allowed_gids: frozenset[int]
    services: dict[str, Any]  # service name -> its options instance
    lines: dict[tuple, int]

    @property
    def journal_path(self) -> Path:
        return Path(self.raw.journal_dir) / "journal.sqlite"


def _override_service_problems(cfg: DaemonConfig) -> list[Problem]:
    """``override_service`` names a served service; with overrides and several services, it must be given."""
    served = sorted(cfg.serve) if isinstance(cfg.serve, dict) else []
    if cfg.override_service is not None:
        if cfg.override_service not in served:
            return [
                Problem(
                    ("override_service",),
                    f"override_service = {cfg.override_service!r} is not served here; the served services are "
                    f"{', '.join(served) or 'none'} (a [serve.<name>] table each)",
                )
            ]
        return []
    if cfg.overrides and len(served) > 1:
        return [
            Problem(
                ("overrides",),
                f"[overrides] with several services served ({', '.join(served)}): say whose GPUs its commands drive, "
                f'e.g. override_service = "{served[0]}" (a command such as nvidia-smi drives one vendor\'s GPUs only)',
            )
        ]
    return []


class ConfigError(JobError):
    """The daemon's configuration is invalid; ``problems`` lists every error."""


def _account(value: Any, kind: str) -> tuple[int | None, str]:
    """(id, error) for a user (``kind="user"``) or group name or numeric id."""
    noun, id_name = ("user", "uid") if kind == "user" else ("group", "gid")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None, f"expected a {noun} name or numeric {id_name}, got {type(value).__name__} {value!r}"
    if isinstance(value, int) or value.isdigit():
        return int(value), ""
    try:
        return (pwd.getpwnam(value).pw_uid if kind == "user" else grp.getgrnam(value).gr_gid), ""
    except KeyError:
        create = "create it" if kind == "user" else f"create it (`groupadd {value}`)"
        database = "passwd" if kind == "user" else "group"
        return None, f"no {noun} named {value!r} on this machine (`getent {database} {value}`); {create} or give a numeric {id_name}"


def _mode(value: Any) -> tuple[int | None, str]:
    if isinstance(value, int) and not isinstance(value, bool):
        mode = value
    elif isinstance(value, str):
        try:
            mode = int(value, 8)
        except ValueError:
            mode = -1
    else:
        mode = -1
    if not 0 <= mode <= 0o777:
        return None, f'socket_mode must be octal permissions such as "0660" (owner and group may connect), got {value!r}'
    if not mode & 0o200:
        return None, f"socket_mode {value!r} ({mode:04o}) does not let the owner write: connecting to a socket needs write permission"
    return mode, ""


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _http_problems(cfg: DaemonConfig) -> list[Problem]:
    """The HTTP keys that do not fit together: another address than loopback without tokens, half a TLS pair."""
    problems = []
    if cfg.tcp is not None:
        host, _ = parse_host_port(cfg.tcp)
        if not is_loopback(host) and not cfg.auth:
            problems.append(
                Problem(
                    ("tcp",),
                    f"tcp = {cfg.tcp!r} would serve the devices to every host that reaches it without a token; "
                    'set auth = true (and issue tokens with `zeus daemon token issue`) or bind to "127.0.0.1:PORT"',
                )
            )
    if (cfg.tls_cert is None) != (cfg.tls_key is None):
        problems.append(
            Problem(("tls_key" if cfg.tls_key is None else "tls_cert",), "tls_cert and tls_key go together: set both or neither")
        )
    for key in ("tls_cert", "tls_key"):
        value = getattr(cfg, key)
        if value is not None and not os.path.isfile(value):
            problems.append(
                Problem((key,), f"{value} is not a readable file (a PEM {'certificate' if key == 'tls_cert' else 'private key'})")
            )
    if (cfg.tls_cert is not None) and cfg.tcp is None:
        problems.append(
            Problem(("tls_cert",), "TLS applies to the TCP listener, and there is none: set tcp too, or remove tls_cert and tls_key")
        )
    return problems


def installed_entry_points() -> list[str]:
    """Names of the installed ``zeus`` entry points (without importing them)."""
    return sorted({ep.name for ep in importlib.metadata.entry_points(group="zeus")})


def read_config(path: str | os.PathLike[str]) -> tuple[DaemonConfig | None, list[Problem], dict[tuple, int], dict]:
    """Parse and structure the file: (config or None, problems, line index, raw dict)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        fix = "write one (contrib/zeus-daemon.toml is an example) or pass --config PATH"
        return None, [Problem((), f"cannot read the daemon's configuration: {e.strerror or e}; {fix}")], {}, {}
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return None, [Problem((), f"invalid TOML: {e}")], {}, {}
    lines = line_index(text)
    problems: list[Problem] = []
    cfg = structure(DaemonConfig, raw, (), problems)
    plugins = raw.get("plugins")
    if isinstance(plugins, list):
        known = installed_entry_points()
        for i, name in enumerate(plugins):
            if isinstance(name, str) and name not in known:
                problems.append(
                    Problem(
                        ("plugins", i),
                        f"no installed zeus plugin named {name!r}{suggest(name, known)}; installed: {', '.join(known) or 'none'}",
                    )
                )
    return (cfg if not problems else None), problems, lines, raw


def resolve(cfg: DaemonConfig, service_options: dict[str, type], path: Path, lines: dict[tuple, int]) -> ResolvedConfig:
    """Resolve names and structure the ``[serve.*]`` tables; ConfigError with every problem."""
    problems: list[Problem] = []
    uids: set[int] = set()
    gids: set[int] = set()
    for key, kind, ids in (("allow_users", "user", uids), ("allow_groups", "group", gids)):
        for i, name in enumerate(getattr(cfg, key)):
            got, err = _account(name, kind)
            if err:
                problems.append(Problem((key, i), err))
            else:
                ids.add(got)  # type: ignore[arg-type]
    if not cfg.allow_users and not cfg.allow_groups:
        problems.append(
            Problem(
                ("allow_groups",),
                "allow_users and allow_groups are both empty, so only root could use the "
                'daemon; allow the training users, e.g. allow_groups = ["zeus"]',
            )
        )
    owner, gid_sock = os.geteuid(), os.getegid()
    if cfg.socket_owner is not None:
        uid, err = _account(cfg.socket_owner, "user")
        if uid is not None:
            owner = uid
        if err:
            problems.append(Problem(("socket_owner",), err))
    if cfg.socket_group is not None:
        gid, err = _account(cfg.socket_group, "group")
        if gid is not None:
            gid_sock = gid
        if err:
            problems.append(Problem(("socket_group",), err))
    problems.extend(_http_problems(cfg))
    problems.extend(override_problems(cfg.overrides))
    mode, err = _mode(cfg.socket_mode)
    if err:
        problems.append(Problem(("socket_mode",), err))
    services: dict[str, Any] = {}
    if not isinstance(cfg.serve, dict) or not cfg.serve:
        names = ", ".join(sorted(service_options)) or f"none (install a device plugin, e.g. {catalog.hint('service', 'nvml')})"
        problems.append(
            Problem(("serve",), f"the daemon serves nothing: add a [serve.<name>] table per service to serve; installed services: {names}")
        )
    else:
        for name, table in cfg.serve.items():
            if name not in service_options:
                hint = suggest(name, service_options)
                installed = ", ".join(sorted(service_options)) or "none"
                problems.append(
                    Problem(
                        ("serve", name),
                        f"unknown service {name!r}{hint}; installed services: {installed} (from the plugins loaded: see the plugins key)",
                    )
                )
                continue
            opts = structure(service_options[name], table, ("serve", name), problems)
            if opts is not None:
                services[name] = opts
    problems.extend(_override_service_problems(cfg))
    if problems:
        raise ConfigError(str(path), problems, lines)
    return ResolvedConfig(path, cfg, owner, gid_sock, mode, frozenset(uids), frozenset(gids), services, lines)  # type: ignore[arg-type]

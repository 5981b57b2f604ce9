"""The client side of ``zeus daemon``: what a device plugin uses when its process lacks the privilege.

One :class:`DaemonClient` is one connection, and one connection is one
*session* for the daemon: whatever the session changed is put back when the
connection closes, whether by :meth:`DaemonClient.close`, process exit, or
SIGKILL (the kernel closes the socket). So a device keeps its client open for
as long as its settings must hold, and closing the device closes the client.

The socket comes from the device's ``daemon_socket`` option or, failing
that, ``$ZEUS_DAEMON_SOCKET`` (or upstream Zeus's ``$ZEUSD_SOCK_PATH``; :func:`socket_path`).
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
from typing import Any

from zeus_core.daemon.protocol import PROTOCOL_VERSION, FrameError, decode, encode, read_frame
from zeus_core.errors import DeviceError

ENV = "ZEUS_DAEMON_SOCKET"
#: Upstream Zeus's name for the same variable (zeusd), read when ``ENV`` is unset.
UPSTREAM_ENV = "ZEUSD_SOCK_PATH"
CAP_SYS_ADMIN = 21

DAEMON_HELP = "README: Running without root"


def socket_path(option: str | None = None) -> str | None:
    """The daemon socket a device should use: its option, else ``$ZEUS_DAEMON_SOCKET``, else
    ``$ZEUSD_SOCK_PATH`` (upstream's name), else None."""
    if option:
        return option
    return os.environ.get(ENV) or os.environ.get(UPSTREAM_ENV) or None


def has_capability(bit: int = CAP_SYS_ADMIN) -> bool:
    """Whether this process holds capability ``bit`` in its effective set (Linux ``/proc``);
    elsewhere, whether it runs as root. Root in a container without ``--cap-add
    SYS_ADMIN`` does not hold CAP_SYS_ADMIN, which is what NVML's setters check."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError):
        pass
    return os.geteuid() == 0


class DaemonError(DeviceError):
    """The daemon refused or failed a request, or cannot be reached. ``code`` is the
    protocol's error code (``unreachable`` when there is no connection)."""

    def __init__(self, message: str, code: str = "failed", detail: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.detail = detail or {}


class DaemonClient:
    """A connection to ``zeus daemon`` at ``path``, opened on the first call. Thread-safe.

    ``call(op, **args)`` returns the operation's result or raises
    :class:`DaemonError` with the daemon's message. If the connection drops
    (the daemon restarted: it restored this session's settings as it went),
    the call raises and the next call opens a new session.
    """

    def __init__(self, path: str, timeout_s: float = 60.0) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.server: dict[str, Any] = {}

    def _connect(self) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout_s)
        try:
            s.connect(self.path)
        except OSError as e:
            s.close()
            why = e.strerror or type(e).__name__
            if isinstance(e, PermissionError):
                fix = "your user may not open it: ask for the socket's group (socket_group in the daemon's config)"
            else:
                fix = "start it as root (`sudo zeus daemon --config /etc/zeus/daemon.toml`, or `systemctl start zeus-daemon`)"
            raise DaemonError(
                f"cannot reach the zeus daemon at {self.path} ({why}): {fix}; the socket comes from daemon_socket "
                f"in [device] or ${ENV} ({DAEMON_HELP})",
                code="unreachable",
            ) from None
        self._sock = s
        try:
            self.server = self._exchange("hello", {"protocol": PROTOCOL_VERSION})
        except BaseException:
            self._drop()
            raise
        return s

    def _drop(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._sock = None

    def _exchange(self, op: str, args: dict[str, Any]) -> Any:
        assert self._sock is not None
        req_id = next(self._ids)
        try:
            try:
                self._sock.sendall(encode({"id": req_id, "op": op, "args": args}))
            except OSError:
                # The daemon may have refused this connection (forbidden, busy) and closed it
                # before the request went out: its parting reply is still there to read.
                self._sock.settimeout(1.0)
            body = read_frame(self._sock, self.timeout_s)
            reply = None if body is None else decode(body)
        except (OSError, FrameError) as e:
            self._drop()
            raise DaemonError(
                f"lost the connection to the zeus daemon at {self.path} during {op} ({e}); a daemon that is still "
                "running puts back the settings of a client that disconnects, and one that died puts them back "
                "when it starts again (systemctl restart zeus-daemon, or start `zeus daemon` as root): until then "
                "the devices keep what was set",
                code="unreachable",
            ) from None
        if reply is None:
            self._drop()
            raise DaemonError(f"the zeus daemon at {self.path} closed the connection during {op}", code="unreachable")
        if reply.get("ok"):
            if reply.get("id") != req_id:
                self._drop()
                raise DaemonError(f"the zeus daemon at {self.path} answered request {reply.get('id')!r}, expected {req_id}")
            return reply.get("result")
        err = reply.get("error") or {}
        code = str(err.get("code", "failed"))
        if code in ("forbidden", "busy", "bad_frame"):
            self._drop()  # the daemon closes these connections
        message = str(err.get("message", "no message"))
        raise DaemonError(f"zeus daemon ({self.path}): {message}", code=code, detail=err.get("detail") or {})

    def call(self, op: str, **args: Any) -> Any:
        """Run operation ``op`` (``"<service>.<operation>"``) with ``args``; its result."""
        with self._lock:
            if self._sock is None:
                self._connect()
            return self._exchange(op, args)

    def hello(self) -> dict[str, Any]:
        """What the daemon says about itself: protocol, version, operations, this client's credentials."""
        with self._lock:
            if self._sock is None:
                self._connect()
            return dict(self.server)

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def close(self) -> None:
        """End the session: the daemon puts back every setting this client still holds."""
        with self._lock:
            self._drop()

    def __enter__(self) -> DaemonClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

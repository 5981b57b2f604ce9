"""How the ``nvml`` device changes GPU settings: in this process, or through ``zeus daemon``.

``local``: NVML's setters are called here, each change journaled first in the
machine-wide journal (:class:`~zeus_core.journal.SettingsGuard`).
``daemon``: the change is asked of ``zeus daemon`` over its socket; the daemon
journals it and puts it back when this process closes the device, exits or
dies. Reads (power, energy, limits, clocks) stay local on both paths: NVML
answers them without privilege, and a window edge must not wait on a socket.

The path starts as ``daemon`` when a socket is configured (``daemon_socket``
or ``$ZEUS_DAEMON_SOCKET``) and the process lacks CAP_SYS_ADMIN, ``local``
otherwise; a local setter that NVML refuses (NoPermission) with a socket
configured moves the group to the daemon for good and is retried there.
"""

from __future__ import annotations

from typing import Any

from zeus_core import SettingsGuard
from zeus_core.daemon import DaemonClient, DaemonError, has_capability, socket_path
from zeus_core.journal import RestoreError
from zeus_plugins_nvml.control import DAEMON_OPS, OWNER, apply, daemon_args, key_for, restore_setting


class GpuSettings:
    """The setting changes of one device group, on whichever path they take."""

    def __init__(self, nvml: Any, socket_option: str | None) -> None:
        self._nvml = nvml
        self.socket = socket_path(socket_option)
        self.path = "daemon" if self.socket and not has_capability() else "local"
        self.guard = SettingsGuard(OWNER, restore_setting)
        self._client: DaemonClient | None = None
        self._held: dict[str, tuple[str, str]] = {}  # key -> (uuid, setting) held through the daemon

    def holds(self, uuid: str, setting: str) -> bool:
        """Whether this group changed ``setting`` of GPU ``uuid`` and has not put it back."""
        key = key_for(uuid, setting)
        return key in self.guard.pending or key in self._held

    def change(self, uuid: str, handle: Any, setting: str, original: Any, value: Any) -> None:
        """Set ``setting`` to ``value`` (``original``: what it is now, journaled first). NVML errors propagate."""
        if self.path == "local":
            try:
                with self.guard.changing(key_for(uuid, setting), original):
                    apply(self._nvml, handle, setting, value)
                return
            except self._nvml.NVMLError_NoPermission:
                if not self.socket:
                    raise
                self.path = "daemon"
        self._call(DAEMON_OPS[setting][0], gpu=uuid, **daemon_args(setting, value))
        self._held[key_for(uuid, setting)] = (uuid, setting)

    def reset(self, uuid: str, handle: Any, setting: str, only_if_changed: bool = False) -> None:
        """Put ``setting`` back: to the journaled original if this group changed it, else (unless
        ``only_if_changed``) to the driver's default."""
        key = key_for(uuid, setting)
        if key in self.guard.pending:
            self.guard.restore(key)
            return
        if key in self._held or (self.path == "daemon" and not only_if_changed):
            self._call(DAEMON_OPS[setting][1], gpu=uuid)
            self._held.pop(key, None)
            return
        if only_if_changed:
            return
        try:
            apply(self._nvml, handle, setting, None)
        except self._nvml.NVMLError_NoPermission:
            if not self.socket:
                raise
            self.path = "daemon"
            self._call(DAEMON_OPS[setting][1], gpu=uuid)

    def _call(self, op: str, **args: Any) -> Any:
        """A daemon operation; an NVML failure in the daemon is raised as the same NVML error here."""
        if self._client is None:
            assert self.socket is not None
            self._client = DaemonClient(self.socket)
        try:
            return self._client.call(op, **args)
        except DaemonError as e:
            code = e.detail.get("nvml_error")
            if e.code == "failed" and isinstance(code, int):
                raise self._nvml.NVMLError(code) from None
            if e.code == "unreachable":
                self._held.clear()  # no longer ours: the daemon puts them back (now, or when it starts again)
            raise

    def close(self) -> None:
        """Put back everything this group changed, on both paths; then end the daemon session."""
        errors = []
        for key, (uuid, setting) in list(self._held.items()):
            try:
                self._call(DAEMON_OPS[setting][1], gpu=uuid)
                self._held.pop(key, None)
            except Exception as e:  # noqa: BLE001 - try the others; the daemon restores at disconnect anyway
                errors.append(f"{key}: {e}")
        try:
            self.guard.close()
        finally:
            if self._client is not None:
                self._client.close()  # the daemon restores whatever is still held
                self._client = None
                self._held.clear()
        if errors:
            raise RestoreError("zeus daemon could not restore " + "; ".join(errors))

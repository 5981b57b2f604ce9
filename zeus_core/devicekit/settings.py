"""Where a device group's setting changes go: this process, journaled first, or ``zeus daemon``.

``local``: the vendor's setter is called here, the original value journaled
first in the machine-wide journal (:class:`~zeus_core.journal.SettingsGuard`),
so it comes back on close, at exit, on SIGTERM, or at the next ``zeus`` start
after a SIGKILL. ``daemon``: the change is asked of ``zeus daemon`` over its
socket; the daemon journals it and puts it back when this process closes the
device, exits or dies. Reads stay local on both paths: drivers answer them
without privilege, and a window edge must not wait on a socket.

The path starts as ``daemon`` when a socket is configured (the device's
``daemon_socket`` option or ``$ZEUS_DAEMON_SOCKET``) and the process lacks the
capability the vendor's setters check, ``local`` otherwise; a local change the
driver refuses (no permission) with a socket configured moves the group to the
daemon for good and is retried there. :attr:`SettingsPath.access` says what
``zeus monitor`` and ``zeus env`` show (:class:`~zeus_core.device.ControlPaths`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zeus_core.daemon import DaemonClient, DaemonError, has_capability, socket_path
from zeus_core.devicekit.drivers import DriverErrors
from zeus_core.journal import RestoreError, SettingsGuard

#: The Linux capability that writes root-owned files (an AMD GPU's power cap under sysfs). NVML's
#: setters check CAP_SYS_ADMIN instead (:data:`zeus_core.daemon.CAP_SYS_ADMIN`).
CAP_DAC_OVERRIDE = 1

#: An operation of a daemon service with its arguments: ``("nvml.reset_power_limit", {"gpu": uuid})``.
DaemonCall = tuple[str, dict[str, Any]]


class SettingsPath:
    """The setting changes of one device group, on whichever path they take.

    ``owner`` and ``restorer`` are the journal's (the restorer registered through
    ``zeus_register_restorers``); ``capability`` is the Linux capability bit the vendor's
    setters check (CAP_SYS_ADMIN for NVML, CAP_DAC_OVERRIDE for a root-owned sysfs file);
    ``errors`` tells the driver's refusals apart and turns a daemon failure back into the
    driver's exception.
    """

    def __init__(
        self, owner: str, restorer: Callable[[str, Any], Any], socket_option: str | None, capability: int, errors: DriverErrors
    ) -> None:
        self.socket = socket_path(socket_option)
        self.privileged = has_capability(capability)
        #: ``local`` or ``daemon``: where the next change goes
        self.path = "daemon" if self.socket and not self.privileged else "local"
        self.guard = SettingsGuard(owner, restorer)
        self._errors = errors
        self._client: DaemonClient | None = None
        self._held: dict[str, DaemonCall] = {}  # key -> the call that puts it back, for changes the daemon holds
        self._proven = False  # a local change succeeded: whatever the capability says, this process may

    @property
    def access(self) -> str:
        """What :class:`~zeus_core.device.ControlPaths` says: ``daemon``, ``local``, or ``local,
        read-only`` where the process lacks the capability, no daemon is configured and no local
        change has succeeded yet."""
        if self.path == "daemon":
            return "daemon"
        return "local" if self.privileged or self._proven else "local, read-only"

    def holds(self, key: str) -> bool:
        """Whether this group changed ``key`` and has not put it back."""
        return key in self.guard.pending or key in self._held

    def change(self, key: str, original: Any, apply: Callable[[], None], daemon: DaemonCall, undo: DaemonCall) -> None:
        """Make a change: ``apply()`` here with ``original`` journaled first, or ``daemon`` through the
        daemon (``undo`` puts it back there). The driver's errors propagate as its exceptions."""

        def journaled() -> None:
            with self.guard.changing(key, original):
                apply()

        if self.path == "local" and self._here(journaled):
            self._proven = True
            return
        self.call(*daemon)
        self._held[key] = undo

    def _here(self, action: Callable[[], None]) -> bool:
        """Run ``action`` in this process: True once done; False where the driver refused for want of
        privilege and a daemon socket is configured (the group then takes the daemon path for good)."""
        try:
            action()
            return True
        except self._errors.exception as e:
            if not self.socket or not self._errors.no_permission(e):
                raise
            self.path = "daemon"
            return False

    def restore(self, key: str) -> bool:
        """Put back ``key`` if this group changed it (through the journal or the daemon); False otherwise."""
        if self.guard.restore(key):
            return True
        undo = self._held.get(key)
        if undo is None:
            return False
        self.call(*undo)
        self._held.pop(key, None)
        return True

    def reset(self, key: str, apply_default: Callable[[], None], undo: DaemonCall) -> None:
        """Put ``key`` back if this group changed it, else reset it to the driver's default: here
        (``apply_default()``) or, on the daemon path or when the driver refuses, through ``undo``."""
        if self.restore(key) or (self.path == "local" and self._here(apply_default)):
            return
        self.call(*undo)

    def call(self, op: str, args: dict[str, Any]) -> Any:
        """A daemon operation; a driver failure in the daemon is raised as the same driver exception here."""
        if self._client is None:
            assert self.socket is not None
            self._client = DaemonClient(self.socket)
        try:
            return self._client.call(op, **args)
        except DaemonError as e:
            driver = self._errors.from_daemon(e)
            if driver is not None:
                raise driver from None
            if e.code == "unreachable":
                self._held.clear()  # no longer ours: the daemon puts them back (now, or when it starts again)
            raise

    def close(self) -> None:
        """Put back everything this group changed, on both paths; then end the daemon session."""
        errors = []
        for key, undo in list(self._held.items()):
            try:
                self.call(*undo)
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

"""How the ``amdsmi`` device changes power caps: in this process, or through ``zeus daemon``.

``local``: ``amdsmi_set_power_cap`` is called here, the original cap journaled
first in the machine-wide journal (:class:`zeus_core.SettingsGuard`), so it
comes back on close, at exit, on SIGTERM, or at the next ``zeus`` start after a
SIGKILL. ``daemon``: ``zeus daemon``'s ``amdsmi`` service sets it, journals it
and puts it back when this process closes the device, exits or dies. Reads
(energy, power, caps) stay local on both paths: amdsmi answers them without
privilege.

The path starts as ``daemon`` when a socket is configured (``daemon_socket`` or
``$ZEUS_DAEMON_SOCKET``) and this process cannot write root-owned files
(no CAP_DAC_OVERRIDE), ``local`` otherwise; a local cap that amdsmi refuses
(``AMDSMI_STATUS_NO_PERM``) with a socket configured moves the group to the
daemon for good and is retried there.
"""

from __future__ import annotations

from typing import Any

from zeus_core import SettingsGuard
from zeus_core.daemon import DaemonClient, DaemonError, has_capability, socket_path
from zeus_core.journal import RestoreError
from zeus_plugins_amdsmi.control import CAP_DAC_OVERRIDE, OWNER, STATUS_NO_PERM, key_for, restore_setting, set_cap


class CapSettings:
    """The power-cap changes of one device group, on whichever path they take."""

    def __init__(self, smi: Any, socket_option: str | None) -> None:
        self._smi = smi
        self.socket = socket_path(socket_option)
        self.path = "daemon" if self.socket and not has_capability(CAP_DAC_OVERRIDE) else "local"
        self.guard = SettingsGuard(OWNER, restore_setting)
        self._client: DaemonClient | None = None
        self._daemon_holds: set[str] = set()  # UUIDs whose cap the daemon holds for this group

    def change(self, uuid: str, handle: Any, original_uw: int, microwatts: int) -> None:
        """Set a GPU's cap (``original_uw``: what it is now, journaled first); amdsmi errors propagate."""
        if self.path == "local":
            try:
                with self.guard.changing(key_for(uuid), original_uw):
                    set_cap(self._smi, handle, microwatts)
                return
            except self._smi.AmdSmiLibraryException as e:
                if e.get_error_code() != STATUS_NO_PERM or not self.socket:
                    raise
                self.path = "daemon"
        self._call("amdsmi.set_power_cap", gpu=uuid, microwatts=int(microwatts))
        self._daemon_holds.add(uuid)

    def restore(self, uuid: str) -> None:
        """Put back the cap this group found on GPU ``uuid`` (nothing if it changed none)."""
        if self.guard.restore(key_for(uuid)):
            return
        if uuid in self._daemon_holds:
            self._call("amdsmi.reset_power_cap", gpu=uuid)
            self._daemon_holds.discard(uuid)

    def _call(self, op: str, **args: Any) -> Any:
        """A daemon operation; an amdsmi failure in the daemon is raised as the same amdsmi error here."""
        if self._client is None:
            assert self.socket is not None
            self._client = DaemonClient(self.socket)
        try:
            return self._client.call(op, **args)
        except DaemonError as e:
            code = e.detail.get("amdsmi_error")
            if e.code == "failed" and isinstance(code, int):
                raise self._smi.AmdSmiLibraryException(code) from None
            if e.code == "unreachable":
                self._daemon_holds.clear()  # the daemon puts them back (now, or when it starts again)
            raise

    def close(self) -> None:
        """Put back every cap this group changed, on both paths; then end the daemon session."""
        errors = []
        for uuid in sorted(self._daemon_holds):
            try:
                self.restore(uuid)
            except Exception as e:  # noqa: BLE001 - try the others; the daemon restores at disconnect anyway
                errors.append(f"{uuid}: {e}")
        try:
            self.guard.close()
        finally:
            if self._client is not None:
                self._client.close()  # the daemon restores whatever is still held
                self._client = None
                self._daemon_holds.clear()
        if errors:
            raise RestoreError("zeus daemon could not restore the power caps of " + "; ".join(errors))

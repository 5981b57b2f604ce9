"""Which path device settings take from this process: what ``zeus plugins`` and ``zeus monitor`` show.

``local``: the process changes settings itself (it holds CAP_SYS_ADMIN, or no
daemon is configured). ``daemon``: a device plugin hands its setters to
``zeus daemon`` at ``$ZEUS_DAEMON_SOCKET`` (or its ``daemon_socket`` option);
reads stay local either way. Devices say per device which path they use in
their optional ``control_paths`` attribute (``{"gpu0": "daemon"}``).
"""

from __future__ import annotations

from zeus_core.daemon.client import ENV, DaemonClient, DaemonError, has_capability, socket_path
from zeus_core.engine.registry import Registry, privileged_operations


def privileged_path_note(reg: Registry, probe_timeout_s: float = 2.0) -> str | None:
    """One line on how this process would change device settings, or None when no plugin offers privileged services."""
    ops = privileged_operations(reg.services)
    if not ops:
        return None
    plugins = ", ".join(sorted({r.plugin for r in reg.services.values()}))
    sock = socket_path()
    if has_capability():
        tail = f"; {ENV}={sock} is used only where a driver still refuses" if sock else ""
        return f"device settings ({plugins}): local: this process holds CAP_SYS_ADMIN{tail}"
    if not sock:
        return (
            f"device settings ({plugins}): local, read-only: this process lacks CAP_SYS_ADMIN and {ENV} is unset, "
            "so power limits and clocks cannot be changed (README: Running without root)"
        )
    try:
        with DaemonClient(sock, timeout_s=probe_timeout_s) as client:
            hello = client.hello()
    except DaemonError as e:
        return f"device settings ({plugins}): daemon, but {e}"
    served = ", ".join(hello.get("operations", [])) or "nothing"
    return f"device settings ({plugins}): daemon at {sock} (pid {hello.get('pid')}, serves {served})"

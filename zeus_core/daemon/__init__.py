"""``zeus daemon``: the one small process on a node that holds the privilege to change devices.

Training processes that lack root or CAP_SYS_ADMIN ask it, over a Unix socket,
for an allow-listed set of operations that device plugins register
(``zeus_register_privileged_operations``): set and reset GPU power limits,
lock and reset clocks, read RAPL counters. The daemon checks the peer's
credentials, the arguments and the device's constraints, journals every
original setting, and puts it back when the client goes away.

* :mod:`~zeus_core.daemon.protocol`: the wire format (length-prefixed JSON frames);
* :mod:`zeus_core.privileged` (re-exported here): what a plugin writes (``@operation``, ``Refused``);
* :mod:`~zeus_core.daemon.client`: :class:`DaemonClient`, what a device uses;
* :mod:`~zeus_core.daemon.config` and :mod:`~zeus_core.daemon.server`: the daemon itself;
* :mod:`~zeus_core.daemon.api` (the routes), :mod:`~zeus_core.daemon.http`,
  :mod:`~zeus_core.daemon.tokens` and :mod:`~zeus_core.daemon.streams`: upstream zeusd's
  HTTP API on the same socket and, when configured, TCP (the ``daemon`` extra).
* :mod:`~zeus_core.daemon.nodeclient`: a client of that API, one node or a fleet of them
  (``zeus monitor --node``, zeus-compat's ``zeus.utils.zeusd``); the standard library only.

This package's top level stays light (no registry, no job loading): device
plugins import the client from it in every process. Its names load on first use.
"""

from typing import TYPE_CHECKING

from zeus_core.loading import lazy_exports

if TYPE_CHECKING:  # loaded on first use (lazy_exports reads this list)
    from zeus_core.daemon.client import CAP_SYS_ADMIN, ENV, DaemonClient, DaemonError, has_capability, socket_path
    from zeus_core.privileged import (
        ClientSession,
        Connection,
        NoArgs,
        OperationFailed,
        Refused,
        ServiceConfigError,
        ServiceContext,
        operation,
    )

__all__ = [
    "CAP_SYS_ADMIN",
    "ENV",
    "ClientSession",
    "Connection",
    "DaemonClient",
    "DaemonError",
    "NoArgs",
    "OperationFailed",
    "Refused",
    "ServiceConfigError",
    "ServiceContext",
    "has_capability",
    "operation",
    "socket_path",
]
__getattr__ = lazy_exports(__name__)

"""What a device plugin writes to let ``zeus daemon`` act for unprivileged clients.

A *privileged service* is a class a plugin registers through the
``zeus_register_privileged_operations`` hook::

    @attrs.define
    class SetLimit:                       # the arguments of one operation, checked by cattrs
        gpu: str
        milliwatts: int

    class GpuService:
        def __init__(self, options, ctx):  # options: its [serve.<name>] table; ctx: ServiceContext
            ...                            # open the driver, resolve the devices it serves
        @operation(SetLimit)
        def set_power_limit(self, args, client):
            ...                            # validate against the device, then:
            client.change("nvml", key, original, lambda: driver_set(...))
        def close(self): ...               # optional

    @hookimpl
    def zeus_register_privileged_operations(register):
        register("nvml", GpuService, options=ServeOptions)

Clients then call ``nvml.set_power_limit``. The daemon only ever runs methods
marked with :func:`operation`, only for peers in its allow-list, and only after
the arguments were structured into the operation's attrs class (unknown keys,
wrong types and failed validators are refused with their field paths before
the method runs). What the method still checks is what depends on the
device: is it served, is the value inside its constraints.

Why a class per service rather than a function per operation: the operations
of one device share what the daemon opened at start (the driver, the served
devices resolved once from the configuration), and one table of the
daemon's configuration. A bad table, or a device named there that does not
exist, stops the daemon at start with the field's path
(:class:`ServiceConfigError`), not at a client's first request.

Settings are changed through ``client.change(owner, key, original, apply)``:
the daemon journals ``original`` (with :mod:`zeus_core.journal`, under the
restorer ``owner`` the plugin registered with ``zeus_register_restorers``)
before ``apply()`` runs, remembers that this client holds the setting, and
puts the setting back when the last client holding it disconnects or dies,
when the daemon exits, or at the daemon's next start after a SIGKILL.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import attrs

from zeus_core.errors import BadInput, ZeusError


class Refused(ZeusError):
    """A well-formed request the daemon will not carry out (a device not served, a
    value outside the device's constraints, a setting another client holds)."""


class OperationFailed(ZeusError):
    """The device or its driver failed the operation; ``detail`` (JSON) reaches the client."""

    def __init__(self, message: str, detail: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.detail = detail or {}


class ServiceConfigError(BadInput):
    """A service's configuration table is wrong; ``field`` is the path inside the table."""

    def __init__(self, message: str, field: tuple = ()) -> None:
        super().__init__(message)
        self.field = tuple(field)


@attrs.define
class NoArgs:
    """Arguments of an operation that takes none."""


@attrs.frozen
class Operation:
    """One operation of a service: the method to call and the attrs class of its arguments."""

    name: str
    method: str
    args: type
    help: str = ""
    changes: bool = True


def operation(args: type | None = None, *, name: str | None = None, changes: bool = True, help: str = "") -> Callable[[Callable], Callable]:
    """Mark a service method as an operation clients may call (``<service>.<name>``).

    ``changes=False`` marks a read (RAPL counters): the daemon logs it at debug
    level instead of logging every call as a change.
    """
    arg_cls = args or NoArgs
    if not attrs.has(arg_cls):
        raise TypeError(f"the arguments of an operation must be an attrs class, got {arg_cls!r}")

    def mark(fn: Callable) -> Callable:
        doc = help or ((fn.__doc__ or "").strip().splitlines() or [""])[0]
        fn._zeus_operation = Operation(name or fn.__name__, fn.__name__, arg_cls, doc, changes)  # type: ignore[attr-defined]
        return fn

    return mark


def operations_of(cls: Any) -> dict[str, Operation]:
    """The operations a service class declares, by name (without the service prefix)."""
    out: dict[str, Operation] = {}
    for attr in dir(cls):
        op = getattr(getattr(cls, attr, None), "_zeus_operation", None)
        if isinstance(op, Operation):
            out[op.name] = op
    return out


class Connection(Protocol):
    """The client connection a request came from, as an operation sees it.

    ``pid``/``uid``/``gid`` come from the kernel (``SO_PEERCRED``), not from the
    client. ``change`` journals and applies a setting for this client;
    ``release`` ends this client's hold on it (the original comes back when no
    other client holds it; a setting nobody holds is left to ``reset``, called
    when given); ``holds`` says whether this client holds it.
    """

    pid: int
    uid: int
    gid: int
    user: str

    def change(self, owner: str, key: str, original: Any, apply: Callable[[], Any]) -> None: ...

    def release(self, owner: str, key: str, reset: Callable[[], Any] | None = None) -> str: ...

    def holds(self, owner: str, key: str) -> bool: ...


#: :class:`Connection`'s earlier name, kept for plugins that import it.
ClientSession = Connection


@attrs.define
class ServiceContext:
    """What a service's factory gets besides its options: the daemon's logger."""

    log: logging.Logger

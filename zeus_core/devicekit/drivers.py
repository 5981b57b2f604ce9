"""A vendor library's failures, said once: in a device's messages, through ``zeus daemon`` and back.

A device plugin calls its vendor's library (NVML, amdsmi), whose failures are
exceptions carrying a status code. :class:`DriverErrors` describes them for
the plugin: which exceptions are the library's, the code each carries, which
mean "no permission" and "not supported", and the key under which ``zeus
daemon`` sends the code back to a client (so the client raises the same
exception a local call would have). :class:`DriverDevice` words them for the
user: a :class:`~zeus_core.errors.DeviceError` that names the device, what
was being done and the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from zeus_core.daemon import DaemonError, OperationFailed
from zeus_core.errors import DeviceError


@attrs.frozen
class DriverErrors:
    """The failures of one vendor library.

    ``library`` names it in messages (``"NVML"``); ``exception`` is the class (or tuple
    of classes) of its failures; ``code(e)`` the status code of one, and ``rebuild(code)``
    the exception for a code (what a client raises for a failure in the daemon);
    ``status(e)`` the status in words; ``no_permission(e)`` / ``not_supported(e)`` tell
    those two apart; ``detail_key`` is where a daemon reply carries the code
    (``"nvml_error"``); ``permission_fix`` is the sentence a refused change ends with.
    """

    library: str
    exception: Any
    code: Callable[[Any], int]
    rebuild: Callable[[int], BaseException]
    status: Callable[[Any], str]
    no_permission: Callable[[Any], bool]
    not_supported: Callable[[Any], bool]
    detail_key: str
    permission_fix: str

    @contextmanager
    def served(self, action: str, what: str) -> Iterator[None]:
        """In a ``zeus daemon`` service: a library failure in the body becomes the daemon's
        :class:`~zeus_core.daemon.OperationFailed`, carrying the code under ``detail_key``."""
        try:
            yield
        except self.exception as e:
            raise OperationFailed(f"cannot {action} of {what}: {self.library}: {self.status(e)}", {self.detail_key: self.code(e)}) from None

    def from_daemon(self, e: DaemonError) -> BaseException | None:
        """In a client: the library exception a daemon failure stands for (None: not a library failure)."""
        code = e.detail.get(self.detail_key)
        return self.rebuild(code) if e.code == "failed" and isinstance(code, int) else None


class DriverDevice:
    """One device behind a vendor library, for messages: ``name``, ``model`` and ``uuid`` name it
    (:attr:`label`); :meth:`call` runs a library function and words its failure
    (:meth:`explain`). Subclasses set those attributes and ``driver_errors``."""

    name: str
    model: str
    uuid: str
    driver_errors: DriverErrors

    @property
    def label(self) -> str:
        return f"{self.name} ({self.model}, {self.uuid})"

    def call(self, action: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``; a library failure becomes the :class:`DeviceError` of :meth:`explain`."""
        try:
            return fn(*args)
        except self.driver_errors.exception as e:
            raise self.explain(action, e) from None

    def explain(self, action: str, e: Any) -> DeviceError:
        """A library failure while doing ``action`` ("set the power limit"), as a message naming
        this device and, where the library refused for want of privilege, the fix."""
        d = self.driver_errors
        if d.no_permission(e):
            return DeviceError(f"cannot {action} of {self.label}: {d.library} refused ({d.status(e)}). {d.permission_fix}")
        if d.not_supported(e):
            return DeviceError(f"{self.label} does not support this: cannot {action} ({d.library}: {d.status(e)})")
        return DeviceError(f"cannot {action} of {self.label}: {d.library} error: {d.status(e)}")

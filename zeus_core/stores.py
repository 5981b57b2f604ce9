"""Where a job's state lives: the store protocol, and opening a store by location.

``job.store`` is a path (a SQLite file, the embedded default) or a URL whose
scheme names a backend registered through ``zeus_register_stores``
(``postgresql://user:secret@db/zeus`` with ``zeus-plugins-postgres``). Every
backend keeps the same promises as the SQLite one (:mod:`zeus_core.store`):
opening writes nothing and refuses a store it cannot trust; a transaction
commits all or nothing; a store records the identity of the job it learned.
Credentials in a URL never appear in a message (:func:`mask`).
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import SplitResult, urlsplit

from zeus_core.store import StoreError, StoreInfo

if TYPE_CHECKING:  # annotations only
    from zeus_core.registry import Registry
    from zeus_core.results import TryRecord

#: ``scheme://user:password@`` anywhere in a text (a message may quote the location).
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*:)(?P<password>[^@/\s]*)(?P<at>@)")
_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")
#: Query parameters that carry a secret (libpq's ``password``/``sslpassword``, a service token).
_SECRET_PARAMS = re.compile(r"(?P<head>[?&](?:password|sslpassword|token|secret)=)(?P<value>[^&#]*)", re.IGNORECASE)


class StoreTransaction(Protocol):
    """Reads and writes that commit together or not at all."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def set(self, key: str, value: Any) -> None: ...

    def identity(self) -> dict[str, Any] | None: ...

    def set_identity(self, identity: dict[str, Any]) -> None: ...

    def add_try(self, record: TryRecord) -> int: ...

    def clear(self) -> None: ...


@runtime_checkable
class JobStore(Protocol):
    """A job's store, whatever holds it.

    ``location`` names it in messages (credentials masked); ``info`` is what it
    held when opened (:class:`zeus_core.store.StoreInfo`). ``transaction()``
    is one atomic unit, safe against concurrent runners of the job (each
    transaction sees the latest committed state, as ``BEGIN IMMEDIATE`` does).
    Reads outside a transaction are consistent snapshots; before the first
    write they return nothing.

    Example::

        with store.transaction() as tx:
            state = tx.get("runner", {})
            tx.set("runner", {**state, "next_recurrence": 2})
    """

    location: str
    info: StoreInfo

    def transaction(self) -> AbstractContextManager[StoreTransaction]: ...

    def get(self, key: str, default: Any = None) -> Any: ...

    def identity(self) -> dict[str, Any] | None: ...

    def state_items(self) -> dict[str, Any]: ...

    def tries(self) -> list[TryRecord]: ...

    def close(self) -> None: ...


def mask(location: str) -> str:
    """``location`` with the secrets of a URL replaced by ``***`` (for every message and output):
    the password of ``scheme://user:password@host``, and ``password=``, ``sslpassword=``,
    ``token=`` or ``secret=`` query parameters. Works on a message that contains URLs too."""
    text = _URL_PASSWORD.sub(lambda m: f"{m.group('head')}***{m.group('at')}", str(location))
    return _SECRET_PARAMS.sub(lambda m: f"{m.group('head')}***", text)


def parse_url(url: str) -> SplitResult:
    """``urllib.parse.urlsplit(url)`` with every part checked, so a URL a plugin reads fails where it
    is read: a ValueError saying what is wrong (an unclosed ``[`` of an IPv6 host, a port that is
    not a number in 0..65535) with the secrets masked, instead of one raised later from ``.port``."""
    try:
        parts = urlsplit(str(url))
        parts.port  # noqa: B018 - urlsplit checks the port only when it is read
    except ValueError as e:
        raise ValueError(f"{mask(url)} is not a valid URL ({e})") from None
    return parts


def scheme_of(location: str) -> str | None:
    """The URL scheme of ``location`` (``postgresql``), or None for a path."""
    m = _URL.match(str(location))
    return m.group("scheme").lower() if m else None


def resolve_location(store: str, job_dir: Path, default: Path) -> str:
    """``job.store`` as a location: a URL as it is, a path relative to the job file's folder,
    ``default`` (``.zeus/<name>.sqlite``) when empty."""
    if not store:
        return str(default)
    if scheme_of(store):
        return store
    p = Path(store).expanduser()
    return str(p if p.is_absolute() else job_dir / p)


def open_store(
    location: str | Path, registry: Registry | None = None, timeout_s: float = 60.0, *, job: str | None = None
) -> JobStore:
    """The store at ``location`` (a path: SQLite; a URL: the backend its scheme names) of
    the job named ``job``.

    A SQLite file holds one job; a server (``postgresql://``, ``http://`` with
    ``zeus serve``) holds many, told apart by ``job``, which such backends need.
    Raises :class:`~zeus_core.store.StoreError` for a scheme no installed plugin
    serves, or whatever the backend refuses, with credentials masked.
    """
    location = str(location)
    scheme = scheme_of(location) or "sqlite"
    if registry is None:
        from zeus_core.registry import get_registry

        registry = get_registry()
    backend = registry.stores.get(scheme)
    if backend is None:
        known = ", ".join(sorted(registry.stores)) or "none"
        hint = " (pip install zeus-plugins-postgres)" if scheme in ("postgresql", "postgres") else ""
        raise StoreError(f"job.store {mask(location)}: no installed plugin serves {scheme}:// stores{hint}; installed: {known}")
    try:
        return backend.opener(location, timeout_s, job=job)
    except StoreError as e:
        raise type(e)(mask(str(e))) from None


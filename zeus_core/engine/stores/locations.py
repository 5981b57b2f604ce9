"""Opening a job's store by its location, and keeping secrets out of messages.

``job.store`` is a path (a SQLite file, the embedded default) or a URL whose
scheme names a backend registered through ``zeus_register_stores``
(``postgresql://user:secret@db/zeus`` with ``zeus-plugins-postgres``).
Credentials in a URL never appear in a message (:func:`mask`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, urlsplit

from zeus_core import catalog
from zeus_core.backends import JobStore, StoreError
from zeus_core.job import URL_SCHEME

if TYPE_CHECKING:  # annotations only
    from zeus_core.registrations import PluginRegistry

#: ``scheme://user:password@`` anywhere in a text (a message may quote the location).
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*:)(?P<password>[^@/\s]*)(?P<at>@)")
#: Query parameters that carry a secret (libpq's ``password``/``sslpassword``, a service token).
_SECRET_PARAMS = re.compile(r"(?P<head>[?&](?:password|sslpassword|token|secret)=)(?P<value>[^&#]*)", re.IGNORECASE)


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
    m = URL_SCHEME.match(str(location))
    return m.group("scheme").lower() if m else None


def open_store(
    location: str | Path,
    registry: PluginRegistry,
    timeout_s: float = 60.0,
    *,
    job: str | None = None,
    read_only: bool = False,
) -> JobStore:
    """The store at ``location`` (a path: SQLite; a URL: the backend its scheme names) of
    the job named ``job``.

    A SQLite file holds one job; a server (``postgresql://``, ``http://`` with
    ``zeus serve``) holds many, told apart by ``job``, which such backends need.
    ``registry`` holds the backends (``zeus_register_stores``). Raises
    :class:`~zeus_core.engine.stores.StoreError` for a scheme no installed plugin
    serves, or whatever the backend refuses, with credentials masked. ``read_only``: the caller
    only reads (``zeus store check|export``, ``zeus report``): a SQLite file is then opened so
    that nothing is written to it, and one on read-only media is read (other backends write
    nothing until a transaction anyway).
    """
    location = str(location)
    scheme = scheme_of(location) or "sqlite"
    backend = registry.stores.get(scheme)
    if backend is None:
        known = ", ".join(sorted(registry.stores)) or "none"
        command = catalog.hint("store", scheme)
        hint = f" ({command})" if command else ""
        raise StoreError(f"job.store {mask(location)}: no installed plugin serves {scheme}:// stores{hint}; installed: {known}")
    try:
        if read_only and scheme == "sqlite":
            return backend.opener(location, timeout_s, job=job, read_only=True)
        return backend.opener(location, timeout_s, job=job)
    except StoreError as e:
        raise type(e)(mask(str(e))) from None

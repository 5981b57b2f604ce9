"""The core's own hook implementations, registered as plugin ``zeus-core`` through the same
hooks as any plugin's: the ``sqlite`` store backend. What they open loads when a job opens it,
so that every ``zeus`` command, which loads the registry, does not import the store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core.hookspecs import RegisterStore, hookimpl

if TYPE_CHECKING:
    from zeus_core.engine.stores.sqlite import Store


def open_sqlite(location: str, timeout_s: float = 60.0, job: str | None = None, read_only: bool = False) -> Store:
    """The ``sqlite`` store backend: a path, or a ``sqlite:///path`` URL (:func:`zeus_core.engine.stores.sqlite.open_sqlite`)."""
    from zeus_core.engine.stores.sqlite import open_sqlite

    return open_sqlite(location, timeout_s=timeout_s, job=job, read_only=read_only)


@hookimpl
def zeus_register_stores(register: RegisterStore) -> None:
    register("sqlite", open_sqlite, help="A SQLite file (the default: a job.store without a scheme is a path).")

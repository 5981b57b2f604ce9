"""Registers the ``postgresql`` (and ``postgres``) store schemes.

Only this module loads with every ``zeus`` command; psycopg is imported when a
job opens its store.
"""

from __future__ import annotations

from zeus_core import hookimpl
from zeus_core.hookspecs import RegisterStore


def open_postgres(location: str, timeout_s: float = 60.0, job: str | None = None):
    """The job ``job``'s store in the PostgreSQL database at ``location``."""
    from zeus_plugins_postgres.store import PostgresStore

    return PostgresStore(location, job=job, timeout_s=timeout_s)


@hookimpl
def zeus_register_stores(register: RegisterStore) -> None:
    help = "Jobs' state in a PostgreSQL database that many jobs and machines share (psycopg 3)."
    register("postgresql", open_postgres, help=help)
    register("postgres", open_postgres, help=help)

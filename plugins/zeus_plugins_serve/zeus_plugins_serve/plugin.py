"""Registers ``zeus serve`` and the ``http``/``https`` store schemes (its clients).

Only this module loads with every ``zeus`` command: FastAPI, uvicorn and httpx
are imported when the command runs or a job opens its store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core import hookimpl
from zeus_core.hookspecs import RegisterStore

if TYPE_CHECKING:  # annotations only
    import click


def open_service(location: str, timeout_s: float = 60.0, job: str | None = None):
    """The job ``job``'s store behind ``zeus serve`` at ``location``."""
    from zeus_plugins_serve.client import ServiceStore

    return ServiceStore(location, job=job, timeout_s=timeout_s)


@hookimpl
def zeus_register_stores(register: RegisterStore) -> None:
    help = "zeus serve: the service keeps the job's history and runs its batch-size policy (ZEUS_SERVE_TOKEN: its token)."
    register("http", open_service, help=help)
    register("https", open_service, help=help)


@hookimpl
def zeus_register_commands(cli: click.Group) -> None:
    from zeus_plugins_serve.command import serve_command

    cli.add_command(serve_command)

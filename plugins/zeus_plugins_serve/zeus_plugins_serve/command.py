"""``zeus serve``: the optimizer service, bound to loopback unless given a token.

Exit status: 0 stopped by SIGINT/SIGTERM, 1 a failure while serving or a store
server that cannot be reached at start, 2 bad input (options, token, a store
that is not a zeus store, an address in use).

How much it logs: ``-v`` / ``-q`` (or ``ZEUS_LOG_LEVEL``, as every ``zeus`` command), warnings
and errors by default; ``-v`` (info) adds uvicorn's request lines, as ``--access-log`` does at
any level.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from zeus_core.cli.consoles import requested_level, verbosity_options
from zeus_core.exposure import is_loopback, token_problem  # the rule zeus perseus serve follows too
from zeus_core.logs import level_name

err = Console(stderr=True, soft_wrap=True)


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {escape(message)}")
    sys.exit(code)


def read_token(token_file: Path | None) -> str | None:
    """The token: --token-file, else ZEUS_SERVE_TOKEN, else none (never a command-line value: ps shows those)."""
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as e:
            _fail(f"--token-file {token_file}: cannot read it ({e.strerror or e})")
        source = f"--token-file {token_file}"
    else:
        token = os.environ.get("ZEUS_SERVE_TOKEN", "").strip()
        source = "ZEUS_SERVE_TOKEN"
        if not token:
            return None
    problem = token_problem(token)
    if problem is not None:
        _fail(f"{source}: {problem}")
    return token


def _check_store(store: str) -> str:
    """The store location: a URL some installed plugin serves (opened read-only once), or a folder."""
    from zeus_core.backends import StoreError, StoreUnavailable
    from zeus_core.engine import get_registry, mask_secrets, open_store

    if "://" in store:
        scheme = store.split("://", 1)[0].lower()
        reg = get_registry()
        if scheme not in reg.stores:
            hint = " (pip install zeus-plugins-postgres)" if scheme in ("postgresql", "postgres") else ""
            _fail(
                f"--store {mask_secrets(store)}: no installed plugin serves {scheme}:// stores{hint}; "
                f"installed: {', '.join(sorted(reg.stores))}"
            )
        if scheme in ("http", "https"):
            _fail(f"--store {mask_secrets(store)}: a service in front of another service; give the database's URL or a folder")
        try:
            open_store(store, reg, job="zeus-serve-check").close()  # reads what the store is; writes nothing
        except StoreUnavailable as e:
            _fail(str(e), 1)
        except StoreError as e:
            _fail(str(e))
        return store
    folder = Path(store).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        _fail(f"--store {folder}: cannot make the folder ({e.strerror or e}); give a folder you can write, or a URL")
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        _fail(f"--store {folder}: not a folder this user can write; give another folder, or a store URL")
    return str(folder.resolve())


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted connections inherit it: no 40 ms stalls
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        _fail(f"cannot listen on {host}:{port}: {e.strerror or e}; choose another --port (0: any free one)")
    sock.listen(512)
    return sock


@click.command("serve")
@click.option(
    "--store",
    default=".zeus",
    show_default=True,
    metavar="URL|FOLDER",
    help="Where jobs' state lives: a store URL many jobs share (postgresql://...), or a folder of SQLite files, "
    "one per job (<folder>/<job>.sqlite, as zeus run's default).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on; any other than loopback needs a token.")
@click.option("--port", default=8020, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free one, printed).")
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A file holding the bearer token clients must send (default: $ZEUS_SERVE_TOKEN; none: no token).",
)
@click.option(
    "--max-body",
    default=1 << 20,
    show_default=True,
    type=click.IntRange(1024, 1 << 30),
    help="Largest request body in bytes (larger: 413).",
)
@click.option(
    "--lease-s",
    default=10.0,
    show_default=True,
    type=click.FloatRange(0.1, 3600),
    help="How long a client's transaction over a part's state holds the job without a request (a killed client's ends then).",
)
@click.option("--access-log", is_flag=True, help="Log every request (as -v does, at any level).")
@verbosity_options
def serve_command(store: str, host: str, port: int, token_file: Path | None, max_body: int, lease_s: float, access_log: bool) -> None:
    """Serve jobs' tries over HTTP: jobs register, ask for their next try, report results, read their history.

    Clients: `zeus run` with job.store = "http://HOST:PORT" (and ZEUS_SERVE_TOKEN), or a script's optimizer
    with the same URL. The API (OpenAPI) is at /openapi.json, its pages at /docs.
    """
    from importlib.metadata import version

    from zeus_core.engine import mask_secrets

    level = requested_level(click.get_current_context())
    token = read_token(token_file)
    if token is None and not is_loopback(host):
        _fail(
            f"refusing to listen on {host} without a token: anyone who reaches it could read and change every "
            "job's history. Set ZEUS_SERVE_TOKEN (or --token-file) to a secret, and the same on the clients; "
            "or listen on 127.0.0.1"
        )
    location = _check_store(store)
    sock = _bind(host, port)
    bound = sock.getsockname()[1]

    import uvicorn

    from zeus_plugins_serve.server import create_app

    app = create_app(location, token=token, max_body=max_body, version=version("zeus-plugins-serve"), lease_s=lease_s)
    shown = f"[{host}]" if ":" in host else host
    # where it listens is what this command gives (the port --port 0 chose): printed at any level
    err.print(
        f"zeus serve: listening on http://{shown}:{bound} (store {escape(mask_secrets(location))}; "
        f"{'bearer token required' if token else 'no token: loopback only'})",
        highlight=False,
    )
    config = uvicorn.Config(
        app,
        log_level=level_name(level),
        access_log=access_log or level <= logging.INFO,
        timeout_keep_alive=30,
        timeout_graceful_shutdown=10,
    )
    if access_log:  # its records are info: shown whatever the level of the rest
        logging.getLogger("uvicorn.access").setLevel(min(level, logging.INFO))
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    if not server.started:
        sys.exit(1)

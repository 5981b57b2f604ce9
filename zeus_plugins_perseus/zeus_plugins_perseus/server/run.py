"""Starting the plan server on uvicorn, and the rule for when it needs a token.

The rule is ``zeus serve``'s, from the core (:mod:`zeus_core.exposure`): on a loopback address
only processes of this machine can connect, so no token is needed (one given is still
enforced); any other address exposes plans and the upload endpoint to the network, and the
server refuses to start without a token there. A token, wherever given, is at least
:data:`~zeus_core.exposure.MIN_TOKEN` printable ASCII characters without spaces.

The server binds its socket itself (:func:`bind`) before uvicorn starts, so the start line
names the port it listens on, the one the system chose for ``--port 0`` included.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from zeus_core.exposure import is_loopback, token_problem

TOKEN_ENV = "ZEUS_PERSEUS_TOKEN"


def resolve_token(token_file: str | Path | None = None, environ: dict | None = None) -> str | None:
    """The token from ``token_file`` (first line) or ``$ZEUS_PERSEUS_TOKEN``; never from the command line,
    where other users could read it in the process list. A token that breaks the rule is a ValueError
    naming where it came from."""
    if token_file is not None:
        text = Path(token_file).read_text().strip().splitlines()
        if not text or not text[0].strip():
            raise ValueError(f"token file {token_file} is empty; write the token on its first line")
        token, source = text[0].strip(), f"--token-file {token_file}"
    else:
        token, source = (environ if environ is not None else os.environ).get(TOKEN_ENV, "").strip(), f"${TOKEN_ENV}"
        if not token:
            return None
    problem = token_problem(token)
    if problem is not None:
        raise ValueError(f"{source}: {problem}")
    return token


def check_exposure(host: str, token: str | None) -> None:
    """Raise ValueError when ``host`` is reachable from other machines and no token is set, or when
    the token set is one ``zeus serve`` would refuse (too short, spaces, not printable ASCII)."""
    if token is not None:
        problem = token_problem(token)
        if problem is not None:
            raise ValueError(f"the bearer token: {problem}")
    elif not is_loopback(host):
        raise ValueError(
            f"--host {host} is reachable from other machines: set a bearer token with --token-file FILE or "
            f"${TOKEN_ENV}, or bind to 127.0.0.1"
        )


def bind(host: str = "127.0.0.1", port: int = 7787) -> socket.socket:
    """A listening socket on ``host:port`` (``port`` 0: one the system chooses; ``getsockname()`` says
    which); an OSError when the address cannot be bound."""
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except BaseException:
        sock.close()
        raise
    return sock


def serve(
    app, host: str = "127.0.0.1", port: int = 7787, token: str | None = None, log_level: str = "info", sock: socket.socket | None = None
) -> None:
    """Run ``app`` on uvicorn until interrupted (SIGINT / SIGTERM end it cleanly), on ``sock`` when given
    (bound by :func:`bind`), else on a socket bound to ``host:port`` here; exit 1 when it cannot start."""
    import uvicorn

    check_exposure(host, token)
    own = sock is None
    listening = bind(host, port) if sock is None else sock
    server = uvicorn.Server(uvicorn.Config(app, log_level=log_level))
    try:
        server.run(sockets=[listening])
    finally:
        if own:
            listening.close()
    if not server.started:  # its startup failed (uvicorn logged why), as uvicorn.run ends then
        raise SystemExit(1)

"""Starting the plan server on uvicorn, and the rule for when it needs a token.

On a loopback address only processes of this machine can connect, so no token
is needed (one given is still enforced). Any other address exposes plans and
the upload endpoint to the network: the server refuses to start without a
token there.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

TOKEN_ENV = "ZEUS_PERSEUS_TOKEN"


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IPs (127.0.0.0/8, ::1); False for 0.0.0.0, :: and everything else."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def resolve_token(token_file: str | Path | None = None, environ: dict | None = None) -> str | None:
    """The token from ``token_file`` (first line) or ``$ZEUS_PERSEUS_TOKEN``; never from the command line,
    where other users could read it in the process list."""
    if token_file is not None:
        text = Path(token_file).read_text().strip().splitlines()
        if not text or not text[0].strip():
            raise ValueError(f"token file {token_file} is empty; write the token on its first line")
        return text[0].strip()
    value = (environ if environ is not None else os.environ).get(TOKEN_ENV, "").strip()
    return value or None


def check_exposure(host: str, token: str | None) -> None:
    """Raise ValueError when ``host`` is reachable from other machines and no token is set."""
    if token is None and not is_loopback(host):
        raise ValueError(
            f"--host {host} is reachable from other machines: set a bearer token with --token-file FILE or "
            f"${TOKEN_ENV}, or bind to 127.0.0.1"
        )


def serve(app, host: str = "127.0.0.1", port: int = 7787, token: str | None = None, log_level: str = "info") -> None:
    """Run ``app`` on uvicorn until interrupted (SIGINT / SIGTERM end it cleanly)."""
    import uvicorn

    check_exposure(host, token)
    uvicorn.run(app, host=host, port=port, log_level=log_level)

"""Who may reach a server a ``zeus`` command starts: one rule for its address and its bearer token.

``zeus serve`` (zeus-plugins-serve) and ``zeus perseus serve`` (zeus-plugins-perseus) both
follow it, so a token one of them accepts the other accepts too:

* on a loopback address (:func:`is_loopback`) only this machine's processes can connect, and no
  token is needed; on any other address (``0.0.0.0``, a host name, an interface's address) the
  server refuses to start without one;
* a token, wherever it is given, is at least :data:`MIN_TOKEN` printable ASCII characters without
  spaces (:func:`token_problem`): anything shorter can be guessed.
"""

from __future__ import annotations

import ipaddress

#: The shortest token accepted: anything shorter is guessable.
MIN_TOKEN = 16


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IPs (127.0.0.0/8, ``::1``, also as ``[::1]``); False for
    ``0.0.0.0``, ``::``, any other address and any other host name (it may resolve to any interface)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_problem(token: str) -> str | None:
    """Why ``token`` is refused (the message names the fix), or None when it is a good one."""
    if len(token) < MIN_TOKEN or not token.isascii() or not token.isprintable() or " " in token:
        return (
            f"a token is at least {MIN_TOKEN} printable ASCII characters without spaces; make one with "
            "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
        )
    return None


__all__ = ["MIN_TOKEN", "is_loopback", "token_problem"]

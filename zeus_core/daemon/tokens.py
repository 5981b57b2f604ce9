"""Signed tokens for ``zeus daemon``'s HTTP API: who may call which API groups, until when.

A token is a JWT signed with HMAC-SHA256 (PyJWT) under the daemon's secret
(``auth_secret_file``), holding ``sub`` (who), ``scopes`` (the API groups it may
call: ``gpu-read``, ``gpu-control``, ``cpu-read``, ``cpu-control``) and, unless it
never expires, ``exp`` (Unix seconds) -- the claims upstream zeusd's tokens hold,
so a token either daemon issues reads the same. The secret is 32 random bytes
written hex-encoded with mode 0600 the first time the daemon (or ``zeus daemon
token issue``) needs it; anyone who can read it can mint tokens, so it stays
root's.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path
from typing import Any

import attrs

from zeus_core.daemon.config import API_GROUPS
from zeus_core.errors import BadInput

ALGORITHM = "HS256"
_DURATION = re.compile(r"^(\d+)\s*(s|m|h|d|w)$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class TokenError(Exception):
    """A token that does not authenticate (missing, malformed, badly signed, expired): HTTP 401."""


@attrs.frozen
class Claims:
    """What a verified token says."""

    sub: str
    scopes: tuple[str, ...]
    exp: int | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sub": self.sub, "scopes": list(self.scopes)}
        if self.exp is not None:
            out["exp"] = self.exp
        return out


def load_secret(path: Path, create: bool = True) -> bytes:
    """The signing secret at ``path``, created (0600, its folder 0700) when missing and ``create``."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        if not create:
            raise
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        text = secrets.token_hex(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never readable by others, not even briefly
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
        return text.encode()
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise BadInput(
            f"the signing secret {path} is readable by others (mode {mode:04o}): anyone who reads it can mint tokens; chmod 600 {path}"
        )
    if len(text) < 32:
        raise BadInput(
            f"the signing secret in {path} is {len(text)} characters; it needs at least 32 (delete the file to have a new one made)"
        )
    return text.encode()


def parse_expiry(text: str, now: float | None = None) -> int | None:
    """``--expires``: ``"never"`` (None) or a duration such as ``30m``, ``12h``, ``7d``, ``2w``; the Unix second it ends."""
    t = text.strip().lower()
    if t in ("never", "0"):
        return None
    m = _DURATION.match(t)
    if not m or int(m.group(1)) == 0:
        raise BadInput(f"--expires {text!r}: give a duration such as 30m, 12h, 7d or 2w, or 'never'")
    return int((time.time() if now is None else now) + int(m.group(1)) * _UNIT_S[m.group(2)])


def parse_scopes(text: str) -> tuple[str, ...]:
    """``--scope gpu-read,cpu-read`` as a tuple; BadInput naming the groups for anything else."""
    scopes = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [s for s in scopes if s not in API_GROUPS]
    if not scopes or bad:
        raise BadInput(f"--scope {text!r}: give one or more of {', '.join(API_GROUPS)}, comma-separated")
    return scopes


def issue(secret: bytes, subject: str, scopes: tuple[str, ...], exp: int | None) -> str:
    import jwt

    claims: dict[str, Any] = {"sub": subject, "scopes": list(scopes)}
    if exp is not None:
        claims["exp"] = exp
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


def verify(secret: bytes, token: str) -> Claims:
    """The claims of ``token``; :class:`TokenError` saying why it does not authenticate."""
    import jwt

    try:
        data = jwt.decode(token, secret, algorithms=[ALGORITHM], options={"require": ["sub"]})
    except jwt.ExpiredSignatureError:
        raise TokenError("Token has expired.") from None
    except jwt.InvalidTokenError as e:
        raise TokenError(f"Invalid token: {e}") from None
    scopes = data.get("scopes")
    if not isinstance(data.get("sub"), str) or not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise TokenError("Invalid token: it needs a string sub and a list of scopes")
    exp = data.get("exp")
    return Claims(data["sub"], tuple(scopes), exp if isinstance(exp, int) else None)

"""The wire format between ``zeus daemon`` and its clients: length-prefixed JSON frames.

A frame is a 4-byte big-endian unsigned length ``N`` followed by ``N`` bytes of
UTF-8 JSON holding one object. ``N`` is at least 1 and at most
:data:`MAX_FRAME` (64 KiB): every real request is a few hundred bytes, so the
bound costs nothing and keeps a hostile or broken client from making the root
process allocate without limit.

Request::

    {"id": 7, "op": "nvml.set_power_limit", "args": {"gpu": "GPU-...", "milliwatts": 250000}}

``id`` (optional, an integer or a short string) is echoed in the reply; ``args``
(optional) is an object. Reply::

    {"id": 7, "ok": true, "result": ...}
    {"id": 7, "ok": false, "error": {"code": "refused", "message": "...", "detail": {...}}}

Error codes (:data:`ERROR_CODES`): ``bad_frame`` (not a JSON object, bad
UTF-8, empty; oversized and truncated frames close the connection),
``bad_request`` (no ``op``, ``args`` not an object), ``unknown_operation``,
``invalid_arguments`` (``detail.problems`` lists each field path and what is
wrong), ``refused`` (a device not served, a value outside the device's
constraints, a setting another client holds), ``failed`` (the driver said no;
``detail`` may carry the driver's error), ``forbidden`` (the peer's user is not
in the allow-list: sent once, then the connection closes) and ``busy`` (too
many clients).

The same socket also speaks HTTP, upstream zeusd's API (:mod:`zeus_core.daemon.http`;
a frame's first byte is zero, a request's a letter). The framing stays for the
engine's own clients: one connection is one session, and whatever it changed
goes back when it closes -- the hold that a training process needs and that
stateless HTTP requests do not give.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

from zeus_core.errors import ZeusError

PROTOCOL_VERSION = 1
MAX_FRAME = 64 * 1024
_HEADER = struct.Struct(">I")

ERROR_CODES = (
    "bad_frame",
    "bad_request",
    "unknown_operation",
    "invalid_arguments",
    "refused",
    "failed",
    "forbidden",
    "busy",
)


class FrameError(ZeusError):
    """A frame that cannot be read. ``fatal``: the stream cannot be resynchronised (close it)."""

    def __init__(self, message: str, fatal: bool) -> None:
        super().__init__(message)
        self.fatal = fatal


def encode(obj: Any) -> bytes:
    """One frame holding ``obj`` (a JSON object); ValueError if it would exceed :data:`MAX_FRAME`."""
    body = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()
    if not 0 < len(body) <= MAX_FRAME:
        raise ValueError(f"a frame of {len(body)} bytes exceeds the maximum of {MAX_FRAME}")
    return _HEADER.pack(len(body)) + body


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    """``n`` bytes, or None at a clean end of stream before the first byte."""
    chunks = []
    got = 0
    while got < n:
        chunk = sock.recv(min(n - got, 65536))
        if not chunk:
            if got == 0:
                return None
            raise FrameError(f"the stream ended {n - got} bytes short of a complete frame", fatal=True)
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket, body_timeout_s: float | None = None) -> bytes | None:
    """The body of the next frame, or None when the peer closed the stream between frames.

    The wait for a frame's first byte is unbounded (an idle client is legitimate:
    it holds its settings for the whole training run); once a frame has begun,
    its remaining bytes must arrive within ``body_timeout_s`` (a stalled half
    frame is an error, not a reason to tie up a thread forever).
    """
    first = _recv_exact(sock, 1)
    if first is None:
        return None
    previous = sock.gettimeout()
    sock.settimeout(body_timeout_s)
    try:
        rest = _recv_exact(sock, _HEADER.size - 1)
        if rest is None:
            raise FrameError("the stream ended inside a frame header", fatal=True)
        (size,) = _HEADER.unpack(first + rest)
        if size == 0:
            raise FrameError("empty frame (length 0)", fatal=False)
        if size > MAX_FRAME:
            raise FrameError(f"a frame of {size} bytes exceeds the maximum of {MAX_FRAME}", fatal=True)
        body = _recv_exact(sock, size)
        if body is None:
            raise FrameError("the stream ended inside a frame", fatal=True)
        return body
    except TimeoutError:
        raise FrameError(f"a frame did not arrive within {body_timeout_s} s of its first byte", fatal=True) from None
    finally:
        sock.settimeout(previous)


def decode(body: bytes) -> dict[str, Any]:
    """The JSON object of a frame body; FrameError (not fatal) if it is not one."""
    try:
        obj = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise FrameError(f"the frame is not UTF-8 ({e.reason} at byte {e.start})", fatal=False) from None
    except (ValueError, RecursionError) as e:
        raise FrameError(f"the frame is not JSON ({type(e).__name__}: {str(e)[:200]})", fatal=False) from None
    if not isinstance(obj, dict):
        raise FrameError(f"a frame must hold a JSON object, got {type(obj).__name__}", fatal=False)
    return obj


def error_reply(req_id: Any, code: str, message: str, detail: dict[str, Any] | None = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if detail:
        err["detail"] = detail
    return {"id": req_id, "ok": False, "error": err}


def ok_reply(req_id: Any, result: Any) -> dict[str, Any]:
    return {"id": req_id, "ok": True, "result": result}

"""Running ``zeus`` as from a terminal: its stdout and stderr a pseudo-terminal, whatever the test runner has."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path


def in_terminal(args: list[str], cwd: Path, columns: int = 200) -> str:
    """What ``python -m zeus_core.cli ARGS`` writes to a pseudo-terminal (stdout and stderr), to its end;
    it must exit 0."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "xterm"}
    env.pop("ZEUS_LOG_LEVEL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "zeus_core.cli", *args], cwd=cwd, env=env, stdin=follower, stdout=follower, stderr=follower
    )
    os.close(follower)
    out = b""
    try:
        while chunk := _read(leader):
            out += chunk
    finally:
        os.close(leader)
        assert proc.wait(timeout=180) == 0, out.decode(errors="replace")
    return out.decode(errors="replace")


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # the other end closed (Linux: EIO)
        return b""

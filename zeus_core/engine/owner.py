"""Which process began a recurrence, and whether that process is gone.

A recurrence is *open* from the moment a runner takes its number until a try reaches the
target or the runner gives it up (:mod:`zeus_core.engine.history`). A runner that is
killed (SIGKILL, a lost machine) cannot say that it gave up, so the recurrence records its
*owner*: the host, the process id and the process's start (the kernel's start time and
boot id, so that a pid the kernel gave to another process later does not pass for the
owner). Any runner of the job on the same host can then tell that the owner is gone and
record the recurrence as abandoned; an owner on another host is left to that host's
runners (this one cannot see its processes).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from functools import cache
from pathlib import Path
from typing import Any


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _start_ticks(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (``/proc/PID/stat`` field 22),
    None where there is no ``/proc`` or no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:  # the command name (field 2) may hold spaces and parentheses: count from the last ')'
        return int(text[text.rindex(")") + 2 :].split()[19])
    except (ValueError, IndexError):
        return None


@cache
def _host() -> str:
    return socket.gethostname()


def this_process() -> dict[str, Any]:
    """The owner record of this process: ``host``, ``pid`` and, where the kernel tells them,
    ``boot`` (the boot id) and ``start`` (the start time in ticks)."""
    pid = os.getpid()
    owner: dict[str, Any] = {"host": _host(), "pid": pid}
    boot, start = _boot_id(), _start_ticks(pid)
    if boot is not None and start is not None:
        owner.update(boot=boot, start=start)
    return owner


def is_gone(owner: Any) -> bool:
    """Whether the process ``owner`` (:func:`this_process` of the runner) names has certainly
    ended: it ran on this host, and the host rebooted since, or no process with its pid and
    start time runs. False when that cannot be told (another host, an owner record without
    these fields)."""
    if not isinstance(owner, dict) or owner.get("host") != _host():
        return False
    pid = owner.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    boot, start = owner.get("boot"), owner.get("start")
    if boot is not None and start is not None:
        now = _boot_id()
        if now is not None and now != boot:
            return True  # the machine restarted: every process of the last boot is gone
        ticks = _start_ticks(pid)
        if ticks is not None:
            return ticks != start
        if now is not None:  # /proc is there and the pid is not
            return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # it exists, as another user
        return False
    return False


def history_mark(by: dict[str, Any] | None = None) -> dict[str, Any]:
    """The mark of a history started over now (:data:`~zeus_core.engine.statekeys.HISTORY_KEY`):
    a new id, when, and by which process (``by``, default this one)."""
    return {"id": uuid.uuid4().hex, "at": round(time.time(), 3), "by": this_process() if by is None else by}


def describe(owner: Any) -> str:
    """``pid 123 on host`` of an owner record (what a message names)."""
    if not isinstance(owner, dict):
        return "an unknown process"
    return f"pid {owner.get('pid')} on {owner.get('host')}"

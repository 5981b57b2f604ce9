"""Real file systems that fail as a user's do: a small one that fills up, and a read-only one.

Each is a tmpfs mounted for the test (root only: the project's CI runs as root). Where mounting is
not allowed (a developer's unprivileged shell) the test is skipped with the reason, unless
ZEUS_REQUIRE_SERVERS is set (CI), where it fails: the check must run somewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount(args: list[str]) -> None:
    r = subprocess.run(["mount", *args], capture_output=True, text=True)
    if r.returncode != 0:
        why = f"cannot mount a test file system ({r.stderr.strip() or r.returncode}): run as root"
        if os.environ.get("ZEUS_REQUIRE_SERVERS"):
            pytest.fail(why)
        pytest.skip(why)


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@contextmanager
def small_fs(size: str = "256k") -> Iterator[Path]:
    """A folder on a tmpfs of ``size`` (mount's syntax: 64k, 1m): writes past it fail with ENOSPC."""
    root = Path(tempfile.mkdtemp(prefix="zeus-small-fs-"))
    try:
        _mount(["-t", "tmpfs", "-o", f"size={size},mode=0777", "tmpfs", str(root)])
        try:
            yield root
        finally:
            _umount(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def fill(folder: Path, leave: int = 0) -> None:
    """Fill the file system of ``folder`` until at most ``leave`` bytes are free."""
    block = b"\0" * 4096
    with open(folder / ".filler", "ab") as f:
        while True:
            free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
            if free <= leave:
                break
            try:
                f.write(block[: max(1, min(len(block), free - leave))])
                f.flush()
            except OSError:
                break


def free_space(folder: Path) -> None:
    """Undo :func:`fill`."""
    (folder / ".filler").unlink(missing_ok=True)


@contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """``folder`` (already filled with what the test needs) remounted read-only in place: even
    root's writes fail with EROFS, as on read-only media."""
    _mount(["--bind", str(folder), str(folder)])
    try:
        _mount(["-o", "remount,bind,ro", str(folder)])
        yield folder
    finally:
        _umount(folder)

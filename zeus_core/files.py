"""Files: writing outputs so that a reader never sees half of one, and checking the files a job reads.

Every file ``zeus`` or a plugin writes for the user (``summary.json``, CSVs,
plots, plans, profiles) goes through :func:`write_atomic` or
:func:`atomic_path`: the content is written to a temporary file in the same
folder, flushed to disk, given the permissions a plain ``open()`` would have
given it (``0o666`` less the process umask, not ``mkstemp``'s private
``0o600``), and renamed over the target in one step. A process killed midway
leaves the old file (or none) and at most a hidden temporary file.

When the disk is full, read-only or failing, the ``OSError`` they raise names the file
meant (its ``filename`` is the target, never the temporary one, which is removed), and
:func:`cannot_write` turns it into the message a command prints before it exits 1:
what happened to which file, that nothing was written to it, and what to do.

The SQLite files that several processes share (job stores, the settings journal)
are opened with :func:`connect_shared`.
"""

from __future__ import annotations

import errno
import os
import random
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def is_busy(e: sqlite3.OperationalError) -> bool:
    """SQLite's answer while another connection holds the lock it needs."""
    text = str(e).lower()
    return "locked" in text or "busy" in text


def connect_shared(path: Path, timeout_s: float, setup: Callable[[sqlite3.Connection], object]) -> sqlite3.Connection:
    """A connection to the SQLite file ``path`` (made, with its folder, where missing) that other
    processes use at the same time: autocommit (transactions are the caller's ``BEGIN``), a busy
    wait of ``timeout_s``, WAL so that readers never block the writer, then ``setup(conn)``.

    Switching a new file to WAL needs an exclusive lock, and SQLite answers "database is locked"
    at once (no busy wait) when another process opens the same new file at that moment (two
    ranks journaling their first setting): that is tried again until ``timeout_s``. Any other
    error (and ``setup``'s) closes the connection and propagates.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        conn = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=timeout_s, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            setup(conn)
            return conn
        except BaseException as e:
            if conn is not None:
                conn.close()
            if isinstance(e, sqlite3.OperationalError) and is_busy(e) and time.monotonic() < deadline:
                time.sleep(random.uniform(0.005, 0.05))
                continue
            raise


def _umask() -> int:
    # There is no way to read the umask without setting it; set it straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path to write the whole of ``path`` to; renamed over ``path`` on success.

    The temporary name keeps ``path``'s suffix, so tools that pick a format by
    extension (matplotlib's ``savefig``) write the right one. On an exception the
    temporary file is removed and ``path`` is left as it was; an ``OSError`` (disk
    full, read-only, I/O error) comes out naming ``path`` as its ``filename`` where it
    named the temporary file or none (:func:`cannot_write` says it to the user).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)  # an error names the folder that cannot be made
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix or ".tmp")
    except OSError as e:  # it names the temporary file it could not make: name the file meant
        e.filename, e.filename2 = str(path), None
        raise
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            _name_target(e, path, tmp)
        raise


def _name_target(e: OSError, path: Path, tmp: str | None) -> None:
    """Make ``e`` name ``path`` where it names the temporary file or no file (a failed write or fsync)."""
    if e.filename is None or (tmp is not None and os.fspath(e.filename) == tmp):
        e.filename = str(path)
        e.filename2 = None


#: What to do about a write that failed, by errno (others: the generic advice).
_WRITE_ADVICE = {
    errno.ENOSPC: "the disk is full: free space on it, or give a path on another disk",
    errno.EDQUOT: "the disk quota is used up: free space in it, or give a path on another disk",
    errno.EROFS: "that file system is read-only: give a path on a writable one",
    errno.EACCES: "give a path in a folder you may write to",
    errno.EPERM: "give a path in a folder you may write to",
    errno.EIO: "the disk reported an I/O error: check it, or give a path on another disk",
}


def cannot_write(e: OSError, what: str | os.PathLike[str] | None = None) -> str:
    """The message for a write of :func:`write_atomic` or :func:`atomic_path` that failed with ``e``:
    the file (``what``, e.g. ``"--csv samples.csv"``; else the file ``e`` names), why, that nothing
    was written to it (the temporary file is gone), and the fix."""
    name = os.fspath(what) if what is not None else (os.fspath(e.filename) if e.filename is not None else "the file")
    why = e.strerror or str(e) or type(e).__name__
    advice = _WRITE_ADVICE.get(e.errno or 0, "give a path in a folder that exists and you may write to")
    return f"{name}: cannot write it ({why}); nothing was written to it: {advice}"


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically; returns the path."""
    path = Path(path)
    with atomic_path(path) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            with open(tmp, "w", encoding="utf-8", newline="") as f:
                f.write(data)
    return path


class FileChecks:
    """What ``zeus validate`` hands an options class that reads files (:class:`zeus_core.parts.ChecksFiles`).

    ``path(field, p)`` resolves ``p`` against the job file's folder and returns it
    to be opened and checked now, or None when an earlier part of the same job
    writes it (a profiler's ``save_to`` read by an allocator): that use is noted
    as deferred, to be checked when the job runs. ``problem(field, message)``
    reports a bad file at the option's path (``field`` is a key, or a tuple of
    keys and indices, inside the part's table). ``options(section)`` is another
    part's validated options, or the ``[job]`` options for ``"job"`` (None for a
    section the job lacks), for a file whose name or content depends on them.
    """

    def __init__(self, section: str, job_dir: Path, written: dict[Path, str], others: dict[str, Any]) -> None:
        self.section = section
        self.job_dir = job_dir
        self.written = written
        self.others = others
        self.problems: list[tuple[tuple, str]] = []
        self.deferred: list[tuple[tuple, str]] = []

    def _key(self, field: str | tuple) -> tuple:
        return (self.section, *((field,) if isinstance(field, str) else field))

    def resolve(self, p: str | Path) -> Path:
        p = Path(p).expanduser()
        return p if p.is_absolute() else self.job_dir / p

    def path(self, field: str | tuple, p: str | Path) -> Path | None:
        resolved = self.resolve(p)
        writer = self.written.get(resolved.resolve())
        if writer is not None:
            self.deferred.append((self._key(field), f"{resolved} is written by {writer} earlier in this job; checked when it runs"))
            return None
        return resolved

    def problem(self, field: str | tuple, message: str) -> None:
        self.problems.append((self._key(field), message))

    def options(self, section: str) -> Any:
        return self.others.get(section)

    def callable_file(self, field: str | tuple, spec: str) -> None:
        """A ``"file.py:function"`` option names a file that exists (the function itself runs only
        when the job runs); a ``"package.module:function"`` is left to the run."""
        target = str(spec).partition(":")[0]
        if target.endswith(".py"):
            path = self.path(field, target)
            if path is not None and not path.is_file():
                self.problem(field, f"{field if isinstance(field, str) else field[-1]} file {path} not found")


__all__ = ["FileChecks", "write_atomic", "atomic_path", "cannot_write", "is_busy", "connect_shared"]

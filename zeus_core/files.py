"""Writing output files so that a reader never sees half of one.

Every file ``zeus`` or a plugin writes for the user (``summary.json``, CSVs,
plots, plans, profiles) goes through :func:`write_atomic` or
:func:`atomic_path`: the content is written to a temporary file in the same
folder, flushed to disk, given the permissions a plain ``open()`` would have
given it (``0o666`` less the process umask, not ``mkstemp``'s private
``0o600``), and renamed over the target in one step. A process killed midway
leaves the old file (or none) and at most a hidden temporary file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
    temporary file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix or ".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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

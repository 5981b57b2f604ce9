"""What ``zeus validate`` hands an options class that reads files (:class:`zeus_core.parts.ChecksFiles`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


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

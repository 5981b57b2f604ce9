"""A job's output folder, written the same way by every way in (``zeus run``, ``zeus report``, the
torch API's ``run_job``): ``recurrences.csv``, the parts' files and ``summary.json`` with the
provenance of the run, last, recording every file written.

What zeus wrote in an output folder is recorded in its summary.json (provenance ``outputs``: paths
relative to the folder), so that a fresh start (``zeus run --fresh``) removes the files an earlier
run wrote there and this one did not (a previous run's extra ``plans/NNNNN.json``), and nothing
else: a file no zeus command recorded (the user's own, or outputs written before the record
existed) is never removed.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from zeus_core.engine.lifecycle import SIGNAL_EXIT
from zeus_core.engine.provenance import KEY as PROVENANCE
from zeus_core.engine.provenance import provenance
from zeus_core.files import write_atomic
from zeus_core.parts import WritesOutputs
from zeus_core.results import JobSummary, try_columns

if TYPE_CHECKING:
    from datetime import datetime

    from zeus_core.engine.runner import Runner

#: The signals held (blocked) while summary.json is written, so that it is never half-written: those that stop a run.
HELD_SIGNALS = tuple(SIGNAL_EXIT)


def write_outputs(runner: Runner, summary: JobSummary, out: Path, *, command: str, started: datetime, fresh: bool = False) -> list[Path]:
    """Write a job's outputs to ``out``: recurrences.csv, summary.json (with the provenance of ``command``,
    such as ``zeus run``, begun at ``started``) and the parts' files. ``fresh``: then the files an earlier run recorded here and this one
    did not write are removed (see the module). summary.json is written last, since it records the
    others, and also when a part's files fail; a signal while it is written waits for it. Raises the
    :class:`OSError` of a file that cannot be written (after summary.json records what was)."""
    out.mkdir(parents=True, exist_ok=True)
    earlier = recorded_outputs(out)
    written = []
    if "workload" in runner.parts:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=try_columns(summary.records), lineterminator="\n")
        w.writeheader()
        for r in summary.records:
            w.writerow(r.row())
        write_atomic(out / "recurrences.csv", buf.getvalue())
        written.append(out / "recurrences.csv")
    stamp = _stamp(out)
    parts_wrote: list[Path] = []
    done = False
    try:
        for part in runner.parts.values():
            if isinstance(part, WritesOutputs):
                parts_wrote.extend(Path(p) for p in part.write_outputs(out, summary) or ())
        done = True
    finally:
        # a part stopped before it said what it wrote (a signal, a full disk): every file written here since
        # the stamp is recorded, so that a later fresh start knows them
        mine = _files_written(out, [*written, out / "summary.json", *(parts_wrote if done else [out])], stamp)
        kept = set() if fresh and done else {f for f in earlier if (out / f).is_file()}  # removed below, or still there
        body = summary.to_json()
        body[PROVENANCE] = provenance(
            runner.registry,
            command=command,
            started=started,
            device_spec=runner.spec.parts.get("device"),
            device=runner.parts.get("device"),
            outputs=sorted(mine | kept),
        )
        with signals_held():  # a signal meanwhile is taken once summary.json is whole
            write_atomic(out / "summary.json", json.dumps(body, indent=2, allow_nan=False, default=str) + "\n")
    written.append(out / "summary.json")
    if fresh:
        _remove_outputs(out, earlier - mine)
    return written + parts_wrote


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait (blocked) for the block to end; one that came meanwhile is delivered then."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def recorded_outputs(out: Path) -> set[str]:
    """The files the summary.json in ``out`` records as written by zeus (none where it records none)."""
    try:
        recorded = json.loads((out / "summary.json").read_text())[PROVENANCE]["outputs"]
    except (OSError, ValueError, TypeError, KeyError):
        return set()
    return {f for f in recorded if isinstance(f, str)} if isinstance(recorded, list) else set()


def _stamp(out: Path) -> int:
    """The file system's time now, as it stamps files it writes under ``out`` (a probe file's mtime)."""
    probe = out / f".zeus-stamp-{os.getpid()}"
    probe.write_bytes(b"")
    try:
        return probe.stat().st_mtime_ns
    finally:
        probe.unlink()


def _written_since(f: Path, stamp: int) -> bool:
    try:
        return f.is_file() and f.stat().st_mtime_ns >= stamp
    except OSError:  # gone meanwhile (a temporary file renamed into place)
        return False


def _files_written(out: Path, paths: list[Path], stamp: int) -> set[str]:
    """The files of ``paths`` under ``out``, relative to it; a folder counts for the files in it written since ``stamp``."""
    root = out.resolve()
    mine: set[str] = set()
    for p in paths:
        files = [f for f in p.rglob("*") if _written_since(f, stamp)] if p.is_dir() else [p]
        for f in files:
            try:
                mine.add(f.resolve().relative_to(root).as_posix())
            except ValueError:  # written outside --output: not this folder's to record
                continue
    return mine


def _remove_outputs(out: Path, stale: set[str]) -> None:
    """Remove the recorded files ``stale`` (each a regular file inside ``out``), then the folders that leaves empty."""
    root = out.resolve()
    emptied: set[Path] = set()
    for rel in sorted(stale):
        path = out / rel
        try:
            path.resolve().relative_to(root)  # ValueError: outside the folder (a "..", a linked folder)
            if not stat.S_ISREG(path.lstat().st_mode):  # a link or a folder: not a file zeus wrote
                continue
            path.unlink()
        except (OSError, ValueError):  # gone already, outside the folder, or not ours to remove
            continue
        emptied.update(a for a in path.parents if a != out and out in a.parents)
    for folder in sorted(emptied, key=lambda f: -len(f.parts)):
        try:
            folder.rmdir()  # only where nothing else is left
        except OSError:
            continue

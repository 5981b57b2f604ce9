"""``zeus store check|export|import``: verify a job store, dump it to JSON, rebuild it from JSON.

STORE arguments are locations as in ``job.store``: a path (SQLite) or a URL (a plugin's backend).

A store is a SQLite file, but a user should never need ``sqlite3`` to trust or
move one. ``check`` says what a store is (schema, the job it learned, how many
results) or why it cannot be used; ``export`` writes everything it holds as
JSON (identity, policy state, every try); ``import`` builds a new store from
such a file, in one transaction, refusing to overwrite an existing one.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import attrs
import click
from rich.markup import escape

from zeus_core.backends import JobStore, StoreError, StoreWriteFailed
from zeus_core.cli.consoles import make_console
from zeus_core.engine.registry import get_registry
from zeus_core.engine.stores.locations import open_store, scheme_of
from zeus_core.engine.stores.sqlite import Store
from zeus_core.files import write_atomic
from zeus_core.results import TryRecord

#: What ``export`` writes (and ``import`` reads): extend, never rename.
EXPORT_FORMAT = "zeus-store"
EXPORT_VERSION = 1

console = make_console()
err_console = make_console(stderr=True)


def _fail(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {escape(message)}")
    sys.exit(2)


def _store_failed(e: StoreError) -> None:
    """Exit with a store's error: 1 for a server that cannot be reached or a disk that refused a write
    (nothing wrong with the store), 2 for a store that cannot be used."""
    err_console.print(f"[bold red]error:[/] {escape(str(e))}")
    sys.exit(e.exit_code)


def _open(location: str, must_exist: bool = True, job: str | None = None, read_only: bool = False) -> JobStore:
    """The store at ``location`` (a path or a URL) of job ``job`` (for a store many jobs share),
    or exit 2 saying why not (1 for a store server that cannot be reached). ``read_only``: for a
    command that only reads (a SQLite file is opened so that nothing is written, and is read on
    read-only media)."""
    if must_exist and scheme_of(location) is None and not Path(location).exists():
        _fail(f"{location}: no such store")
    try:
        return open_store(location, get_registry(), job=job, read_only=read_only)
    except StoreError as e:
        _store_failed(e)
        raise  # unreachable: _store_failed exits


def _not_empty(store: str, version: int) -> None:
    """An empty file is no store yet, as a missing one is (the rule of
    :func:`zeus_core.engine.stores.sqlite.is_empty`): nothing to check or export, exit 2."""
    if scheme_of(store) is None and version == 0:
        _fail(
            f"{store}: an empty file, which is no store yet (a job's first write makes it one, as for a path with no "
            "file): nothing to check; point at the job's store"
        )


#: ``--job``: which job, in a store that holds many (a database, ``zeus serve``).
_job_option = click.option(
    "--job",
    "job",
    metavar="NAME",
    help="The job's name (job.name), for a store many jobs share (postgresql://..., http://... of zeus serve).",
)


def export_store(store: JobStore) -> dict[str, Any]:
    """Everything a store holds, as JSON-able data."""
    from zeus_core.engine.stores.sqlite import SCHEMA_VERSION

    with contextlib.closing(store) as s:
        return {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "schema": SCHEMA_VERSION,
            "identity": s.identity(),
            "state": s.state_items(),
            "tries": [attrs.asdict(t) for t in s.tries()],
        }


def _records(data: Any, source: str) -> tuple[dict | None, dict, list[TryRecord]]:
    """Check an export file's content; every problem names where it is."""
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        raise ValueError(f'{source}: not a `zeus store export` file (no "format": "{EXPORT_FORMAT}")')
    if data.get("version") != EXPORT_VERSION:
        raise ValueError(f"{source}: export version {data.get('version')!r}; this zeus-core reads version {EXPORT_VERSION}")
    identity, state, tries = data.get("identity"), data.get("state", {}), data.get("tries", [])
    if identity is not None and not isinstance(identity, dict):
        raise ValueError(f"{source}: $.identity must be an object or null")
    if not isinstance(state, dict) or not isinstance(tries, list):
        raise ValueError(f"{source}: $.state must be an object and $.tries a list")
    fields = {f.name for f in attrs.fields(TryRecord)}
    out = []
    for i, t in enumerate(tries):
        if not isinstance(t, dict) or set(t) - fields:
            raise ValueError(f"{source}: $.tries[{i}] is not a try (keys: {', '.join(sorted(fields))})")
        try:
            r = TryRecord(**t)
        except TypeError as e:
            raise ValueError(f"{source}: $.tries[{i}]: {e}") from None
        for key in ("time_s", "energy_j", "cost"):
            v = getattr(r, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{source}: $.tries[{i}].{key} must be a finite number >= 0, got {v!r}")
        out.append(r)
    return identity, state, out


#: What an import the disk refused says: what happened, and the fix.
_IMPORT_REFUSED = {
    "full": ("the disk is full", "free space on it and import again, or import to a path on another disk"),
    "read-only": ("its file system is read-only, or this user may not write there", "import to a writable path"),
    "io": ("the disk reported an I/O error", "check the disk, or import to a path on another disk"),
}


@click.group("store")
def store_group() -> None:
    """Check a job store, export it to JSON, or rebuild one from an export."""


@store_group.command("check")
@click.argument("store")
@_job_option
def check_cmd(store: str, job: str | None) -> None:
    """Say what STORE (a path or URL) is: schema, the job it learned, its results; or why it cannot be used (exit 2)."""
    from zeus_core.engine.history import ledger
    from zeus_core.engine.stores.sqlite import SCHEMA_VERSION

    opened = _open(store, job=job, read_only=True)
    info = opened.info
    try:
        account = ledger(opened) if info.version else None
    except StoreError as e:
        _store_failed(e)
    finally:
        opened.close()
    _not_empty(store, info.version)
    older = scheme_of(store) is None and info.version < SCHEMA_VERSION  # the SQLite schema this core writes
    console.print(
        f"[green]ok[/] {escape(opened.location)}: zeus store, schema {info.version}"
        f"{' (migrated to ' + str(SCHEMA_VERSION) + ' at its next write)' if older else ''}, "
        f"{info.tries} tries, integrity and contents checked"
    )
    if account is not None and account.begun:
        console.print(
            f"recurrences: {account.begun} begun, {len(account.abandoned)} abandoned, {len(account.open)} open"
            + "".join(f"\n  abandoned {n}: {escape(str(a.get('reason')))}" for n, a in list(account.abandoned.items())[-10:]),
            highlight=False,
            soft_wrap=True,
        )
    if info.identity is None:
        if info.tries or (account is not None and account.begun):
            console.print(
                f"identity: none recorded: the store was written by a zeus-core from before stores recorded "
                f"the job's identity, so which setup (GPU, options) its {info.tries} tries are of cannot be "
                "checked; the job's next run records its own, with a warning",
                highlight=False,
                soft_wrap=True,
            )
        else:
            console.print("identity: none recorded (no recurrence has run)")
        return
    console.print("identity (what the store learned):")
    for section, values in sorted(info.identity.items()):
        console.print(f"  {escape(section)}: {escape(json.dumps(values, sort_keys=True))}", highlight=False, soft_wrap=True)


@store_group.command("export")
@click.argument("store")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), help="Write here instead of stdout.")
@_job_option
def export_cmd(store: str, output: Path | None, job: str | None) -> None:
    """Write everything STORE (a path or URL) holds (identity, policy state, every try) as JSON."""
    opened = _open(store, job=job, read_only=True)
    _not_empty(store, opened.info.version)
    try:
        data = export_store(opened)
    except StoreError as e:
        _store_failed(e)
    text = json.dumps(data, indent=1, allow_nan=False) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        try:
            write_atomic(output, text)
        except OSError as e:
            _fail(
                f"--output {output}: cannot write it ({e.strerror or e}); nothing was written: give a path in a "
                "folder that exists and you may write to"
            )
        err_console.print(f"wrote {escape(str(output))} ({len(data['tries'])} tries)")


@store_group.command("import")
@click.argument("export_file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.argument("store")
@_job_option
def import_cmd(export_file: Path, store: str, job: str | None) -> None:
    """Build a new STORE (a path or URL) from EXPORT_FILE (written by `zeus store export`), in one transaction."""
    if scheme_of(store) is None and Path(store).exists() and Path(store).stat().st_size > 0:
        _fail(f"{store} exists; import builds a new store: choose another path, or move this one aside first")
    try:
        data = json.loads(export_file.read_text())
        identity, state, tries = _records(data, str(export_file))
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
        _fail(str(e))
    target = _open(store, must_exist=False, job=job)
    if target.info.tries or target.info.identity is not None:
        target.close()
        _fail(f"{target.location} already holds a job; import builds a new store: choose another")
    try:
        with contextlib.closing(target) as s, s.transaction() as tx:
            if identity is not None:
                tx.set_identity(identity)
            for key, value in state.items():
                tx.set(key, value)
            for r in tries:
                tx.add_try(r)
    except (StoreError, ValueError) as e:
        if isinstance(target, Store):  # a file this import made holds nothing: no stub is left
            target.remove_if_created()
        if isinstance(e, StoreWriteFailed):
            what = _IMPORT_REFUSED.get(e.kind, _IMPORT_REFUSED["io"])
            err_console.print(
                f"[bold red]error:[/] {escape(target.location)}: cannot import into it: {what[0]} "
                f"({escape(e.detail)}); nothing was imported, and no file is left behind: {what[1]}"
            )
            sys.exit(e.exit_code)
        if isinstance(e, StoreError):
            _store_failed(e)
        _fail(str(e))
    console.print(f"[green]imported[/] {len(tries)} tries and {len(state)} state values into {escape(target.location)}")

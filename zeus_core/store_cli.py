"""``zeus store check|export|import``: verify a job store, dump it to JSON, rebuild it from JSON.

A store is a SQLite file, but a user should never need ``sqlite3`` to trust or
move one. ``check`` says what a store is (schema, the job it learned, how many
results) or why it cannot be used; ``export`` writes everything it holds as
JSON (identity, policy state, every try); ``import`` builds a new store from
such a file, in one transaction, refusing to overwrite an existing one.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import attrs
import click
from rich.console import Console
from rich.markup import escape

from zeus_core.files import write_atomic
from zeus_core.results import TryRecord
from zeus_core.store import SCHEMA_VERSION, Store, StoreError, inspect_store

#: What ``export`` writes (and ``import`` reads): extend, never rename.
EXPORT_FORMAT = "zeus-store"
EXPORT_VERSION = 1

console = Console()
err_console = Console(stderr=True, soft_wrap=True)


def _fail(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {escape(message)}")
    sys.exit(2)


def export_store(path: Path) -> dict[str, Any]:
    """Everything a store holds, as JSON-able data."""
    with Store(path) as s:
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
        raise ValueError(f"{source}: not a `zeus store export` file (no \"format\": \"{EXPORT_FORMAT}\")")
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


@click.group("store")
def store_group() -> None:
    """Check a job store, export it to JSON, or rebuild one from an export."""


@store_group.command("check")
@click.argument("store", type=click.Path(path_type=Path))
def check_cmd(store: Path) -> None:
    """Say what STORE is (schema, the job it learned, its results), or why it cannot be used (exit 2)."""
    if not store.exists():
        _fail(f"{store}: no such store")
    try:
        info = inspect_store(store)
    except StoreError as e:
        _fail(str(e))
    console.print(f"[green]ok[/] {escape(str(store))}: zeus store, schema {info.version}"
                  f"{' (migrated to ' + str(SCHEMA_VERSION) + ' at its next write)' if info.version < SCHEMA_VERSION else ''}, "
                  f"{info.tries} tries, PRAGMA quick_check ok")
    if info.identity is None:
        console.print("identity: none recorded (no recurrence has run)")
        return
    console.print("identity (what the store learned):")
    for section, values in sorted(info.identity.items()):
        console.print(f"  {escape(section)}: {escape(json.dumps(values, sort_keys=True))}", highlight=False, soft_wrap=True)


@store_group.command("export")
@click.argument("store", type=click.Path(path_type=Path))
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), help="Write here instead of stdout.")
def export_cmd(store: Path, output: Path | None) -> None:
    """Write everything STORE holds (identity, policy state, every try) as JSON."""
    if not store.exists():
        _fail(f"{store}: no such store")
    try:
        data = export_store(store)
    except StoreError as e:
        _fail(str(e))
    text = json.dumps(data, indent=1, allow_nan=False) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        write_atomic(output, text)
        err_console.print(f"wrote {escape(str(output))} ({len(data['tries'])} tries)")


@store_group.command("import")
@click.argument("export_file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.argument("store", type=click.Path(path_type=Path))
def import_cmd(export_file: Path, store: Path) -> None:
    """Build a new STORE from EXPORT_FILE (written by `zeus store export`), in one transaction."""
    if store.exists() and store.stat().st_size > 0:
        _fail(f"{store} exists; import builds a new store: choose another path, or move this one aside first")
    try:
        data = json.loads(export_file.read_text())
        identity, state, tries = _records(data, str(export_file))
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
        _fail(str(e))
    try:
        with Store(store) as s, s.transaction() as tx:
            if identity is not None:
                tx.set_identity(identity)
            for key, value in state.items():
                tx.set(key, value)
            for r in tries:
                tx.add_try(r)
    except (StoreError, ValueError) as e:
        _fail(str(e))
    console.print(f"[green]imported[/] {len(tries)} tries and {len(state)} state values into {escape(str(store))}")

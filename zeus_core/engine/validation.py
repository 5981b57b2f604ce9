"""Reading and validating a job file: every problem at once, each with its line and path.

Each part section (``[device]``, ``[workload]``, ...) names its plugin with
``plugin = "name"``; the rest of the table is structured into that plugin's
attrs options class. Structuring goes field by field with a strict cattrs
converter so that *every* error is reported at once, each with its path and
line (``job.toml:12: expected float @ $.job.eta_knob``), misspelt keys and
plugin names get "did you mean", and an unknown plugin names the
distribution to install.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
import tomllib
import typing
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import cattrs

from zeus_core import catalog
from zeus_core.backends import JobStore, StoreError, StoreUnavailable
from zeus_core.engine.registry import SECTION_KIND, Registry
from zeus_core.engine.stores.locations import mask, open_store
from zeus_core.engine.tomllines import find_line, line_index
from zeus_core.errors import BadInput, PluginError
from zeus_core.files import FileChecks
from zeus_core.identity import IdentityMismatch, differences
from zeus_core.job import (
    CORE_SECTION,
    GRID_SECTION,
    PART_SECTIONS,
    PLAN_ORDER,
    RUN_ORDER,
    GridOptions,
    JobOptions,
    JobSpec,
    PartSpec,
    job_name,
)
from zeus_core.parts import ChecksFiles, WritesFiles

#: The largest job file read, in bytes: far beyond any real one, and refused before it is read.
MAX_JOB_BYTES = 1 << 20
#: How deep tables and arrays of a job file (or a ``--set`` value) may nest.
MAX_DEPTH = 32
#: The most values one array of a job file holds.
MAX_ARRAY = 10_000

# --------------------------------------------------------------------------- errors


@attrs.frozen
class Problem:
    """One validation error: where it is and what is wrong."""

    path: tuple
    message: str
    origin: str = "file"  # "file" or the --set text that introduced the value

    def jsonpath(self) -> str:
        out = "$"
        for p in self.path:
            out += f"[{p}]" if isinstance(p, int) else f".{p}"
        return out


class JobError(BadInput):
    """``job.toml`` is invalid. ``problems`` lists every error found."""

    def __init__(self, source: str, problems: list[Problem], lines: dict[tuple, int] | None = None) -> None:
        self.source = source
        self.problems = problems
        self.lines = lines or {}
        super().__init__("\n".join(self.format_lines()))

    def format_lines(self) -> list[str]:
        out = []
        for p in self.problems:
            if p.origin != "file":
                where = f"--set {mask(p.origin)}"  # an override may hold a store URL with its password
            else:
                where = f"{self.source}:{find_line(self.lines, p.path)}"
            out.append(f"{where}: {mask(p.message)} @ {p.jsonpath()}")
        return out


# --------------------------------------------------------------------------- structuring


def make_converter() -> cattrs.Converter:
    """A cattrs converter that refuses silent coercions (1.5 -> int, "3" -> float)."""
    conv = cattrs.Converter(forbid_extra_keys=True)

    def strict(kind: type, accept: type | tuple[type, ...]) -> Callable[[Any, Any], Any]:
        def hook(value: Any, _type: Any) -> Any:
            if isinstance(value, bool) and kind is not bool:
                raise TypeError(f"expected {kind.__name__}, got a boolean")
            if not isinstance(value, accept):
                raise TypeError(f"expected {kind.__name__}, got {type(value).__name__} {_short(value)}")
            if kind in (int, float) and isinstance(value, int) and not -(2**63) <= value < 2**63:
                raise TypeError(f"expected {kind.__name__}, got {_short(value)}, outside the 64-bit range of TOML integers")
            if kind is float and value != value:
                raise TypeError("expected float, got nan, which no option takes")
            return kind(value)

        return hook

    conv.register_structure_hook(int, strict(int, int))
    conv.register_structure_hook(float, strict(float, (int, float)))
    conv.register_structure_hook(str, strict(str, str))
    conv.register_structure_hook(bool, strict(bool, bool))
    return conv


_CONVERTER = make_converter()


def _short(value: Any) -> str:
    """``repr(value)``, cut to a length a message can show."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def suggest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _leaf_error(e: BaseException, tp: Any) -> str:
    msg = str(e)
    if isinstance(e, (TypeError, ValueError)) and msg.startswith("expected"):
        return msg
    if isinstance(e, cattrs.errors.BaseValidationError):
        subs = [s for s in e.exceptions]
        if subs:
            return _leaf_error(subs[0], tp)
    return f"invalid value, expected {_type_name(tp)}" + (f" ({msg})" if msg else "")


def structure(cls: type, data: Any, path: tuple, problems: list[Problem], conv: cattrs.Converter = _CONVERTER) -> Any:
    """Structure ``data`` into attrs class ``cls``, appending every problem found.

    Returns the instance, or None when there were problems.
    """
    if not isinstance(data, dict):
        problems.append(Problem(path, f"expected a table, got {type(data).__name__}"))
        return None
    attrs.resolve_types(cls)
    fields = {f.name: f for f in attrs.fields(cls)}
    start = len(problems)
    for key in data:
        if key not in fields:
            hint = suggest(key, fields) or (f"; allowed keys: {', '.join(sorted(fields))}" if fields else "; this table takes no keys")
            problems.append(Problem(path + (key,), f"unknown key {key!r}{hint}"))
    values: dict[str, Any] = {}
    for name, f in fields.items():
        if name not in data:
            if f.default is attrs.NOTHING:
                problems.append(Problem(path + (name,), f"required key {name!r} is missing"))
            continue
        value = _structure_value(f.type, data[name], path + (name,), problems, conv)
        if value is _FAILED:
            continue
        if f.validator is not None:
            try:
                f.validator(None, f, value)
            except (ValueError, TypeError) as e:
                problems.append(Problem(path + (name,), str(e)))
                continue
        values[f.alias or name] = value
    if len(problems) > start:
        return None
    try:
        return cls(**values)
    except (ValueError, TypeError) as e:  # cross-field checks in __attrs_post_init__
        problems.append(Problem(path, str(e)))
        return None


_FAILED = object()


def _structure_value(tp: Any, value: Any, path: tuple, problems: list[Problem], conv: cattrs.Converter) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if attrs.has(tp):
        got = structure(tp, value, path, problems, conv)
        return _FAILED if got is None else got
    if origin in (list, list) and args and attrs.has(args[0]):
        if not isinstance(value, list):
            problems.append(Problem(path, f"expected an array of tables, got {type(value).__name__}"))
            return _FAILED
        out, ok = [], True
        for i, item in enumerate(value):
            got = structure(args[0], item, path + (i,), problems, conv)
            ok = ok and got is not None
            out.append(got)
        return out if ok else _FAILED
    try:
        return conv.structure(value, tp)
    except Exception as e:  # noqa: BLE001 - every failure becomes a Problem
        problems.append(Problem(path, _leaf_error(e, tp)))
        return _FAILED


# --------------------------------------------------------------------------- overrides


def parse_override(text: str) -> tuple[tuple, Any]:
    """``a.b.c=value`` -> (("a","b","c"), value). Values are TOML (``3``, ``"x"``, ``[1,2]``);
    anything that is not valid TOML is taken as a string."""
    if "=" not in text:
        raise ValueError(f"--set {text!r}: expected dotted.key=value")
    key, _, value = text.partition("=")
    path = tuple(p.strip() for p in key.strip().split("."))
    if not path or any(not p for p in path):
        raise ValueError(f"--set {text!r}: expected dotted.key=value")
    try:
        parsed = tomllib.loads(f"v = {value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value.strip()
    except RecursionError:
        raise ValueError(f"--set {key.strip()}=...: the value nests more than {MAX_DEPTH} levels deep") from None
    return path, parsed


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[tuple, str]:
    """Apply ``--set`` overrides to ``raw`` in place; return {path: override text}."""
    applied: dict[tuple, str] = {}
    for text in overrides:
        path, value = parse_override(text)
        node = raw
        for p in path[:-1]:
            if isinstance(node, list):
                try:
                    node = node[int(p)]
                    continue
                except (ValueError, IndexError):
                    raise ValueError(f"--set {text!r}: no element {p!r} in that array") from None
            node = node.setdefault(p, {})
            if not isinstance(node, (dict, list)):
                raise ValueError(f"--set {text!r}: {p!r} is a value, not a table")
        node[path[-1]] = value
        applied[tuple(int(p) if p.isdigit() else p for p in path)] = text.strip()
    return applied


# --------------------------------------------------------------------------- the job


def _origin(overrides: dict[tuple, str], path: tuple) -> str:
    for n in range(len(path), 0, -1):
        if path[:n] in overrides:
            return overrides[path[:n]]
    return "file"


def load_job(path: str | Path, registry: Registry, overrides: Sequence[str] = (), *, keep: list[JobStore] | None = None) -> JobSpec:
    """Read, override and validate a job file. Raises :class:`JobError` with every problem.

    The job's store is inspected too (read-only): a store that cannot be used is a
    problem; one that learned another job is a note (:attr:`JobSpec.deferred`), since
    ``zeus run --fresh`` may start it over: the run checks it
    (:meth:`~zeus_core.engine.assembly.Assembly.check_identity`). ``keep``: a list that
    receives the store the check opened, left open for the run that follows (``zeus run``
    opens its store once); without it the store is closed after the check."""
    path = Path(path)
    source = str(path)
    try:
        data = read_bounded(path)
        text = data.decode("utf-8")
    except OSError as e:
        raise JobError(source, [Problem((), f"cannot read the job file: {e.strerror or e}")]) from e
    except UnicodeDecodeError as e:
        line = e.object.count(b"\n", 0, e.start) + 1
        raise JobError(
            source,
            [Problem((), f"byte {e.object[e.start]:#04x} is not UTF-8; a job file is TOML, which is UTF-8 text: save it as UTF-8")],
            {(): line},
        ) from None
    except ValueError as e:  # too large
        raise JobError(source, [Problem((), str(e))]) from None
    try:
        raw_file = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        lineno: int | None = getattr(e, "lineno", None)
        if lineno is None:
            m = re.search(r"line (\d+)", msg)
            lineno = int(m.group(1)) if m else 1
        line = lineno
        raise JobError(source, [Problem((), f"invalid TOML: {msg}")], {(): line}) from e
    except RecursionError:  # tables or arrays nested hundreds deep
        raise JobError(
            source, [Problem((), f"tables or arrays nested more than {MAX_DEPTH} levels deep; a job file nests at most {MAX_DEPTH}")]
        ) from None
    lines = line_index(text)
    shape = shape_problems(raw_file)
    if shape:
        raise JobError(source, shape, lines)
    raw = copy.deepcopy(raw_file)
    try:
        applied = apply_overrides(raw, list(overrides))
    except ValueError as e:
        raise JobError(source, [Problem((), str(e))], lines) from e
    shape = shape_problems(raw)
    if shape:
        raise JobError(source, [attrs.evolve(p, origin=_origin(applied, p.path)) for p in shape], lines)
    return validate(raw, registry, source=source, path=path, lines=lines, overrides=applied, raw_file=raw_file, keep=keep)


def read_bounded(path: Path, limit: int | None = None) -> bytes:
    """The bytes of ``path``, refused (ValueError) past ``limit`` (default :data:`MAX_JOB_BYTES`) before
    they are read: by its size when it is a regular file, else after ``limit + 1`` bytes (a pipe,
    ``/dev/zero``)."""
    limit = MAX_JOB_BYTES if limit is None else limit
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise ValueError(
                f"the file is {size:,} bytes; a job file is at most {limit:,} bytes (1 MiB): "
                "keep data (traces, profiles, arrays of values) in the files its options name"
            )
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"the file is more than {limit:,} bytes; a job file is at most {limit:,} bytes (1 MiB)")
    return data


def shape_problems(raw: dict[str, Any]) -> list[Problem]:
    """Tables or arrays nested deeper than :data:`MAX_DEPTH`, or arrays longer than :data:`MAX_ARRAY`
    (looked at without recursion, so that no shape makes a traceback)."""
    problems: list[Problem] = []
    stack: list[tuple[Any, tuple, int]] = [(raw, (), 0)]
    while stack and len(problems) < 20:
        node, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            problems.append(Problem(path, f"nested more than {MAX_DEPTH} levels deep; a job file nests at most {MAX_DEPTH}"))
            continue
        if isinstance(node, dict):
            stack.extend((v, path + (k,), depth + 1) for k, v in node.items())
        elif isinstance(node, list):
            if len(node) > MAX_ARRAY:
                problems.append(
                    Problem(
                        path,
                        f"an array of {len(node):,} values; a job file's arrays hold at most "
                        f"{MAX_ARRAY:,} (keep data in the files its options name)",
                    )
                )
                continue
            stack.extend((v, path + (i,), depth + 1) for i, v in enumerate(node))
    return problems


def validate(
    raw: dict[str, Any],
    registry: Registry,
    *,
    source: str = "job.toml",
    path: Path = Path("job.toml"),
    lines: dict[tuple, int] | None = None,
    overrides: dict[tuple, str] | None = None,
    raw_file: dict[str, Any] | None = None,
    keep: list[JobStore] | None = None,
) -> JobSpec:
    lines = lines or {}
    overrides = overrides or {}
    problems: list[Problem] = []
    known = (CORE_SECTION, GRID_SECTION) + PART_SECTIONS
    for key in raw:
        if key not in known:
            problems.append(Problem((key,), f"unknown section {key!r}{suggest(key, known)}; sections: {', '.join(known)}"))
    job = structure(JobOptions, raw.get(CORE_SECTION, {}), (CORE_SECTION,), problems)
    if job is not None and not job.name:
        try:
            job_name(None, None, path.stem)
            job.name = path.stem
        except ValueError as e:
            problems.append(Problem((CORE_SECTION, "name"), f"the job file's name is used as job.name, and its {e}"))
            job = None
    grid = None
    if GRID_SECTION in raw:  # the core's [grid]: its signals are opened as the run will open them
        grid = structure(GridOptions, raw[GRID_SECTION], (GRID_SECTION,), problems)
        if grid is not None:
            from zeus_core.engine.signals import grid_problems

            problems += [Problem((GRID_SECTION, key), message) for key, message in grid_problems(grid, registry, path.parent)]
    parts: dict[str, PartSpec] = {}
    for section in PART_SECTIONS:
        table = raw.get(section)
        if table is None:
            continue
        if not isinstance(table, dict):
            problems.append(Problem((section,), f"expected a table [{section}], got {type(table).__name__}"))
            continue
        kind = SECTION_KIND[section]
        name = table.get("plugin")
        if name is None:
            installed = ", ".join(registry.names(kind)) or "none"
            problems.append(Problem((section, "plugin"), f"required key 'plugin' is missing; installed: {installed}"))
            continue
        if not isinstance(name, str):
            problems.append(Problem((section, "plugin"), f"expected a plugin name (string), got {name!r}"))
            continue
        if name not in registry.parts[kind]:
            msg = f"unknown {section} plugin {name!r}{suggest(name, registry.names(kind))}"
            dist = catalog.provider(section, name)
            if dist:
                msg += f"; it is provided by the distribution {dist!r}: {catalog.install_command(dist)}"
            msg += f"; installed {section} plugins: {', '.join(registry.names(kind)) or 'none'}"
            problems.append(Problem((section, "plugin"), msg))
            continue
        reg = registry.get(kind, name)
        try:
            options_class = reg.options  # a plugin's options class loads with the first job that uses it
        except PluginError as e:
            problems.append(Problem((section, "plugin"), str(e)))
            continue
        body = {k: v for k, v in table.items() if k != "plugin"}
        opts = structure(options_class, body, (section,), problems)
        if opts is not None:
            parts[section] = PartSpec(section, name, opts, reg)
    default_power = registry.default(SECTION_KIND["power"])
    if "workload" in raw and "power" not in raw and default_power is not None:
        # A training job without [power] uses the power policy registered as the default.
        reg = registry.get(SECTION_KIND["power"], default_power)
        parts["power"] = PartSpec("power", default_power, reg.options(), reg)
    for needed in ("batch_size", "device"):
        if "workload" in raw and needed not in raw:
            installed = ", ".join(registry.names(SECTION_KIND[needed])) or "none installed"
            problems.append(Problem((needed,), f"a job with [workload] needs a [{needed}] table naming one of: {installed}"))
    if "workload" not in raw and not any(s in raw for s in PLAN_ORDER):
        has = [f"[{s}]" for s in PART_SECTIONS if s in raw]
        problems.append(
            Problem(
                ("workload",),
                (f"the job has {' and '.join(has)} but " if has else "the job has ") + "no [workload] and no planner: nothing to "
                "run. Add a [workload] table (with [device] and [batch_size]) naming what trains, or a planner "
                "section ([allocation], [frequency_plan], [profiler])",
            )
        )
    file_problems, deferred = _file_problems(parts, job, path.parent)  # of every part whose own options are valid
    problems += file_problems
    spec = None
    if job is not None:
        spec = JobSpec(
            path=path,
            job=job,
            parts=parts,
            raw=raw,
            overrides=overrides,
            lines=lines,
            raw_file=raw_file if raw_file is not None else raw,
            deferred=deferred,
            grid=grid,
        )
        problems += _store_problems(spec, registry, complete=not problems, keep=keep)
    problems = [attrs.evolve(p, origin=_origin(overrides, p.path)) for p in problems]
    if problems:
        raise JobError(source, problems, lines)
    assert spec is not None
    return spec


def _file_problems(parts: dict[str, PartSpec], job: JobOptions | None, job_dir: Path) -> tuple[list[Problem], list[str]]:
    """Open every file the job's options name, as their parts will (:class:`zeus_core.parts.ChecksFiles`).
    Returns the problems, and the uses deferred because an earlier part of the job writes the file."""
    written: dict[Path, str] = {}
    others: dict[str, Any] = {section: part.options for section, part in parts.items()}
    others[CORE_SECTION] = job
    problems: list[Problem] = []
    deferred: list[str] = []
    for section in RUN_ORDER:
        part = parts.get(section)
        if part is None:
            continue
        if isinstance(part.options, ChecksFiles):
            files = FileChecks(section, job_dir, written, others)
            part.options.check_files(files)
            problems += [Problem(where, message) for where, message in files.problems]
            deferred += [f"{Problem(where, '').jsonpath()}: {message}" for where, message in files.deferred]
        if isinstance(part.options, WritesFiles):
            for p in part.options.files_written():
                resolved = Path(p).expanduser()
                resolved = resolved if resolved.is_absolute() else job_dir / resolved
                written[resolved.resolve()] = f"[{section}] {part.plugin}"
    return problems, deferred


def _store_problems(spec: JobSpec, registry: Registry, complete: bool, keep: list[JobStore] | None = None) -> list[Problem]:
    """The job's store, read without changing it: a problem when it cannot be used; for a complete
    job, a note when it learned another job (``zeus run`` refuses it unless given ``--fresh``).
    ``keep``: receives the store, left open, when the job has no problem (else it is closed)."""
    where = (CORE_SECTION, "store") if spec.job.store else (CORE_SECTION, "name")
    try:
        store = open_store(spec.store_location(), registry, job=spec.job.name)
    except StoreUnavailable as e:  # a server that is down now is no mistake in the job
        spec.deferred.append(f"job.store: {e} (checked again when the job runs)")
        return []
    except StoreError as e:
        return [Problem(where, str(e))]
    stored = store.info.identity
    if keep is not None and complete:
        keep.append(store)
    else:
        store.close()
    if complete and stored is not None:
        diffs = differences(stored, spec.identity())
        if diffs:
            spec.deferred.append(f"{Problem(where, '').jsonpath()}: {IdentityMismatch(store.location, diffs)}")
    return []


def resolved_values(spec: JobSpec) -> list[tuple[str, Any, str, str | None]]:
    """Every resolved value as (jsonpath, value, provenance, what an unset default stands for or None), for
    ``--dry-run`` (:mod:`zeus_core.unset`)."""
    from zeus_core.unset import describe

    out: list[tuple[str, Any, str, str | None]] = []

    def walk(obj: Any, path: tuple, field: Any = None) -> None:
        if attrs.has(type(obj)):
            for f in attrs.fields(type(obj)):
                walk(getattr(obj, f.name), path + (f.name,), f)
        elif isinstance(obj, list) and obj and attrs.has(type(obj[0])):
            for i, item in enumerate(obj):
                walk(item, path + (i,))
        else:
            meaning = describe(field, obj, spec.job) if field is not None else None
            out.append((Problem(path, "").jsonpath(), obj, spec.provenance(path), meaning))

    walk(spec.job, (CORE_SECTION,))
    if spec.grid is not None:
        walk(spec.grid, (GRID_SECTION,))
    for section, part in spec.parts.items():
        out.append((f"$.{section}.plugin", part.plugin, spec.provenance((section, "plugin")), None))
        walk(part.options, (section,))
    return out

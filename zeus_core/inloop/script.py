"""What the in-loop objects share: a job driven from a user's script, put together by the engine's one path.

A script declares only what it knows about its job (:mod:`zeus_core.identity`):
``job`` with the knobs it was given, ``device`` as the monitor's ``[device]`` section,
and the section of each policy it runs. Its parts are built by
:class:`~zeus_core.engine.assembly.Assembly`, as ``zeus run`` builds a job file's,
so the same job run either way shares one store and one history.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from zeus_core.backends import ProcessGroup
from zeus_core.engine.assembly import Assembly, part_spec, script_spec
from zeus_core.engine.registry import Registry, get_registry
from zeus_core.identity import option_identity
from zeus_core.job import JobOptions

#: Fixes an :class:`~zeus_core.identity.IdentityMismatch` has from a script (the CLI's are ``--fresh`` and ``job.store``).
SCRIPT_FIXES = "pass fresh=True to start this job over (forgets what the store learned), or another job= name or store="


def registry_or_default(registry: Registry | None) -> Registry:
    return registry if registry is not None else get_registry()


def job_identity(job: JobOptions, keys: tuple[str, ...]) -> dict[str, Any]:
    """The ``job`` section a script declares: the knobs among ``keys`` (the ones it was given)."""
    full = option_identity(job)
    return {k: full[k] for k in keys if k in full}


def script_assembly(
    registry: Registry,
    job: JobOptions,
    section: str,
    plugin: Any,
    options: dict[str, Any] | None,
    *,
    arg: str,
    parts: dict[str, Any],
    identity: dict[str, Any],
    group: ProcessGroup,
    store: str | Path | None = None,
    fresh: bool = False,
    fit_fix: str = "",
    grid: Any = None,
) -> Assembly:
    """The assembly of a script's job with one policy, ``section`` = ``plugin`` with ``options`` (its
    ``job.toml`` table), built beside ``parts`` (the script's own device, its loop as the workload).
    ``arg`` names the argument in messages (``"policy"``); ``store``: where the job's state is kept
    (a path, relative to the current folder, or a URL; None: ``.zeus/<job>.sqlite``), for
    :meth:`~zeus_core.engine.assembly.Assembly.open_store`. The policy's section joins ``identity``; its
    factory sees ``grid`` (a bound :class:`~zeus_core.grid.Grid`, or None) as a job's sees ``[grid]``."""
    label = f"{arg}={plugin!r}"
    ps = part_spec(registry, section, plugin, options, what=label)
    spec = script_spec(job, {section: ps})
    if store is not None:
        spec.job.store = str(store)
    identity = {**identity, section: {"plugin": plugin, **option_identity(ps.options)}}
    assembly = Assembly(
        spec,
        registry,
        console=Console(stderr=True),
        parts=parts,
        identity=identity,
        group=group,
        fresh=fresh,
        fixes=SCRIPT_FIXES,
        labels={section: label},
        fit_fix=fit_fix,
    )
    assembly.context.grid = grid
    return assembly.build((section,))


def script_grid(table: Any, registry: Registry, devices: Any) -> Any:
    """A script's grid (``grid=`` of the in-loop objects): a ``[grid]`` table as a dict (relative paths
    from the current folder), or a :class:`~zeus_core.grid.Grid`; bound to ``devices``' clock.
    Raises :class:`~zeus_core.errors.BadInput` naming each bad key."""
    from zeus_core.engine.signals import open_grid
    from zeus_core.engine.validation import Problem, structure
    from zeus_core.errors import BadInput
    from zeus_core.grid import Grid
    from zeus_core.job import GRID_SECTION, GridOptions

    if isinstance(table, Grid):
        grid = table
    elif isinstance(table, dict):
        problems: list[Problem] = []
        options = structure(GridOptions, dict(table), (GRID_SECTION,), problems)
        if options is None:
            raise BadInput("grid: " + "; ".join(f"{p.message} @ {p.jsonpath()}" for p in problems))
        grid = open_grid(options, registry, Path.cwd())
    else:
        raise BadInput(
            f"grid must be a [grid] table (a dict such as {{'carbon_intensity': 'electricitymaps:DE'}}) or a "
            f"zeus_core.grid.Grid, got {type(table).__name__}"
        )
    try:
        grid.bind(devices)
    except ValueError as e:
        raise BadInput(f"grid: {e}") from None
    return grid

"""Opening a job's grid signals: its ``[grid]`` table, through the registered sources, becomes a
:class:`~zeus_core.grid.Grid` (the contract is :mod:`zeus_core.grid`).

``zeus validate`` opens them too (:func:`grid_problems`), so a CSV with a bad row, an
unknown time zone or a live source without its token is reported with the job's other
mistakes, at its ``[grid]`` key. Opening never asks a live service anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zeus_core import catalog
from zeus_core.errors import BadInput
from zeus_core.grid import CARBON, PRICE, Grid, SourceRequest, TimeSeries, parse_time, parse_zone, show_time, source_of
from zeus_core.job import GRID_SECTION, GridOptions
from zeus_core.registrations import PluginRegistry

#: The distribution that provides the first-party grid sources (``zeus validate`` names it).
_GRID_KEY = "grid_signal"


class GridError(BadInput):
    """A ``[grid]`` table that cannot be opened: ``problems`` lists (key, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"[{GRID_SECTION}] {key}: {message}" for key, message in problems))


def _install_hint(scheme: str) -> str:
    dist = catalog.provider(_GRID_KEY, scheme)
    return f"; it is provided by the distribution {dist!r}: {catalog.install_command(dist)}" if dist else ""


def open_grid(options: GridOptions, registry: PluginRegistry, job_dir: Path) -> Grid:
    """The job's signals, each opened by its registered source. Raises :class:`GridError` with
    every problem (each at its key)."""
    problems: list[tuple[str, str]] = []
    zone = None
    if options.timezone:
        try:
            zone = parse_zone(options.timezone)
        except ValueError as e:
            problems.append(("timezone", str(e)))
    start = None
    if options.start:
        try:
            start = parse_time(options.start, zone, what="start")
        except ValueError as e:
            problems.append(("start", str(e)))
    files = {suffix: g.scheme for g in registry.grid_sources.values() for suffix in g.suffixes}
    signals: dict[str, Any] = {}
    for quantity in (CARBON, PRICE):
        value = getattr(options, quantity)
        if value is None:
            continue
        try:
            scheme, spec = source_of(value, registry.grid_sources, files)
        except ValueError as e:
            hint = "" if registry.grid_sources else _install_hint("csv")
            problems.append((quantity, f"{e}{hint}"))
            continue
        source = registry.grid_sources.get(scheme)
        if source is None:  # "constant" (a number) with no source for it installed
            problems.append((quantity, f"no grid source {scheme!r} is installed to read {value!r}{_install_hint(scheme)}"))
            continue
        request = SourceRequest(
            quantity=quantity,
            job_dir=job_dir,
            zone=zone,
            currency=options.currency.upper(),
            max_gap_s=options.max_gap_s,
            timeout_s=options.timeout_s,
            refresh_s=options.refresh_s,
        )
        try:
            signals[quantity] = source.opener(spec, request)
        except (ValueError, OSError) as e:
            problems.append((quantity, str(e) if isinstance(e, ValueError) else f"cannot read {spec}: {e.strerror or e}"))
    if start is not None:
        for quantity, signal in signals.items():
            where = signal.source
            if isinstance(signal, TimeSeries):
                first, last = signal.span()
                if not first <= start < last:
                    problems.append(
                        (
                            "start",
                            f"{options.start} ({show_time(start)}) is outside {quantity}'s series "
                            f"{where} ({show_time(first)} to {show_time(last)})",
                        )
                    )
    if problems:
        raise GridError(problems)
    return Grid(carbon=signals.get(CARBON), price=signals.get(PRICE), currency=options.currency.upper(), start=start)


def grid_problems(options: GridOptions, registry: PluginRegistry, job_dir: Path) -> list[tuple[str, str]]:
    """What :func:`open_grid` would refuse, as (key, message) pairs (for ``zeus validate``)."""
    try:
        open_grid(options, registry, job_dir)
    except GridError as e:
        return e.problems
    return []


__all__ = ["GridError", "open_grid", "grid_problems"]

"""Registers the grid sources ``constant``, ``csv`` (files ending in ``.csv``) and ``electricitymaps``.

The sources (and numpy) load when a job opens one, not when ``zeus`` loads the plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core import hookimpl
from zeus_core.hookspecs import RegisterGridSignal

if TYPE_CHECKING:  # annotations only: zeus_core.grid loads with the job that reads [grid]
    from zeus_core.grid import SourceRequest


def open_constant(spec: str, request: SourceRequest):
    """A number from ``[grid]``: the same value at every time."""
    from zeus_plugins_grid.constant import Constant

    return Constant.parse(spec, request)


def open_csv(spec: str, request: SourceRequest):
    """A time series from a CSV file (the shared files' layout, or the general one of the README)."""
    from zeus_plugins_grid.series import read_csv

    return read_csv(spec, request)


def open_electricitymaps(spec: str, request: SourceRequest):
    """Electricity Maps' live API for a zone (``electricitymaps:DE``); token from ELECTRICITYMAPS_TOKEN."""
    from zeus_plugins_grid.electricitymaps import ElectricityMaps

    return ElectricityMaps.open(spec, request)


@hookimpl
def zeus_register_grid_signals(register: RegisterGridSignal) -> None:
    register("constant", open_constant, help="A number: the same intensity (or price) at every time.")
    register("csv", open_csv, suffixes=(".csv",), help="A time series from a CSV file, each row's value until the next row.")
    register(
        "electricitymaps",
        open_electricitymaps,
        help="Electricity Maps' live API (zone after the colon; token in ELECTRICITYMAPS_TOKEN), cached, "
        "holding its last value when the service is down.",
    )

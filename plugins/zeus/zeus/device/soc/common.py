"""SoC measurements and managers as upstream's ``zeus.device.soc.common`` names them (millijoules)."""

from __future__ import annotations

import abc
from dataclasses import dataclass, fields
from typing import Any

from zeus.device.common import DeprecatedAliasABCMeta, deprecated_alias
from zeus.device.exception import ZeusBaseSoCError


class ZeusSoCInitError(ZeusBaseSoCError):
    """No SoC could be opened here."""


def subtract_fields(later: Any, earlier: Any) -> Any:
    """``later - earlier`` field by field (numbers, or lists of numbers); a field None in both stays None."""
    if not isinstance(earlier, type(later)):
        raise TypeError(f"Subtraction is only supported between {type(later).__name__} instances.")
    result = type(later)()
    for f in fields(later):
        a, b = getattr(later, f.name), getattr(earlier, f.name)
        if a is None and b is None:
            continue
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            setattr(result, f.name, [x - y for x, y in zip(a, b)])
        elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, list):
            setattr(result, f.name, a - b)
        else:
            raise ValueError(f"Inconsistent field between two {type(later).__name__} objects: {f.name}")
    return result


@dataclass
class SoCMeasurement(abc.ABC, metaclass=DeprecatedAliasABCMeta):
    """Energy of a SoC's subsystems (mJ); which fields exist depends on the SoC (see the subclasses)."""

    @abc.abstractmethod
    def __sub__(self, other: Any) -> SoCMeasurement: ...

    @deprecated_alias("zeroAllFields")
    def zero_all_fields(self) -> None:
        """Every number to 0, every list to empty; fields the SoC lacks stay None."""
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, list):
                setattr(self, f.name, [])
            elif value is not None:
                setattr(self, f.name, type(value)(0))


class SoC(abc.ABC, metaclass=DeprecatedAliasABCMeta):
    """One SoC's energy: cumulative readings and named windows (mJ)."""

    @deprecated_alias("getAvailableMetrics")
    @abc.abstractmethod
    def get_available_metrics(self) -> set[str]:
        """The measurement fields this SoC reports."""

    @deprecated_alias("getTotalEnergyConsumption")
    @abc.abstractmethod
    def get_total_energy_consumption(self) -> SoCMeasurement:
        """Energy since a fixed point (the same one for the manager's lifetime). Units: mJ."""

    @deprecated_alias("beginWindow")
    @abc.abstractmethod
    def begin_window(self, key: str, restart: bool = False) -> None:
        """Start window ``key``; ``restart`` starts an open one again."""

    @deprecated_alias("endWindow")
    @abc.abstractmethod
    def end_window(self, key: str) -> SoCMeasurement:
        """End window ``key`` and return its energy. Units: mJ."""


class EmptySoC(SoC):
    """No SoC: every reading raises ``ValueError``."""

    def get_available_metrics(self) -> set[str]:
        return set()

    def get_total_energy_consumption(self) -> SoCMeasurement:
        raise ValueError("No SoC is available.")

    def begin_window(self, key: str, restart: bool = False) -> None:
        raise ValueError("No SoC is available.")

    def end_window(self, key: str) -> SoCMeasurement:
        raise ValueError("No SoC is available.")

"""Upstream's price monitor: the electricity cost of named windows, charged hour by hour on zeus's grid signals.

``EnergyCostMonitor(provider)`` measures windows as ``ZeusMonitor`` does and charges each
hour's energy at that hour's price per kWh. Upstream's provider is :class:`OpenEIClient`: a
utility's tariff from OpenEI's utility-rate database (a rate per tier, and for each month
and hour of weekdays and weekends the tier in force; hours are read in UTC, as upstream
does). The tariff becomes a :class:`zeus_core.grid.GridSignal` and the charging is zeus's
(:class:`zeus_core.grid.GridMeter`; see :mod:`zeus.monitor._grid`). A grid signal or a
``[grid]`` price value (``0.3``, ``"prices.csv"``) works too, with ``currency=``.
"""

from __future__ import annotations

import abc
import json
import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import requests

from zeus.exception import ZeusBaseError
from zeus.monitor._grid import ChargedWindows, Ledger, Op, open_grid_value, poll_windows
from zeus.monitor.energy import ZeusMonitor
from zeus_core.grid import PRICE, GridSignal, Step

logger = logging.getLogger(__name__)

#: OpenEI's utility-rate API and the key upstream sends.
OPENEI_URL = "https://api.openei.org/utility_rates"
OPENEI_KEY = "tJASWWgPhBRpiZCwfhtKV2A3gyNxbDfvQvdI5Wa7"
#: Seconds one request waits for an answer (upstream waits forever).
TIMEOUT_S = 30.0
HOUR = timedelta(hours=1)


def get_time_info() -> tuple[str, str, int]:
    """(month name, ``"Weekday"`` or ``"Weekend"``, hour) of the local time now."""
    now = datetime.now()
    return now.strftime("%B"), "Weekend" if now.weekday() >= 5 else "Weekday", now.hour


class ZeusElectricityPriceHTTPError(ZeusBaseError):
    """The request to the electricity price provider failed (no answer, refused, timed out)."""


class ZeusElectricityPriceNotFoundError(ZeusBaseError):
    """The provider has no rate for the place or the label."""


class ElectricityPriceProvider(abc.ABC):
    """Where electricity prices come from."""

    @abc.abstractmethod
    def get_current_electricity_prices(self) -> dict[str, list]:
        """The tariff: ``energy_rate_structure``, ``energy_weekday_schedule``, ``energy_weekend_schedule``."""


def _find(data: Any, key_name: str, target_value: Any, return_value: str) -> list[Any]:
    """Every ``return_value`` field (None where absent) of the objects in ``data`` whose ``key_name`` is ``target_value``."""
    found: list[Any] = []
    if isinstance(data, dict):
        if data.get(key_name, object()) == target_value:
            found.append(data.get(return_value))
        for value in data.values():
            found += _find(value, key_name, target_value, return_value)
    elif isinstance(data, list):
        for item in data:
            found += _find(item, key_name, target_value, return_value)
    return found


class OpenEIClient(ElectricityPriceProvider):
    """A utility rate from OpenEI's utility-rate database near (latitude, longitude).

    ``label``: the rate's OpenEI identifier; ``sector``: ``Residential``, ``Commercial``,
    ``Industrial`` or ``Lighting``; ``radius``: miles searched around the location.
    """

    def __init__(
        self,
        location: tuple[float, float],
        label: str,
        sector: Literal["Residential", "Commercial", "Industrial", "Lighting"] = "Residential",
        radius: int = 0,
    ) -> None:
        self.lat, self.long = location
        self.label = label
        self.sector = sector
        self.radius = radius

    def search_json(self, data: Any, key_name: str, target_value: Any, return_value: str) -> list[Any]:
        """Every ``return_value`` field of the (nested) objects whose ``key_name`` equals ``target_value``."""
        return _find(data, key_name, target_value, return_value)

    def get_current_electricity_prices(self) -> dict[str, list]:
        """The rate's tiers and schedules; :class:`ZeusElectricityPriceNotFoundError` when there is none."""
        url = (
            f"{OPENEI_URL}?version=latest&format=json&api_key={OPENEI_KEY}&lat={self.lat}&lon={self.long}"
            f"&radius={self.radius}&detail=full&sector={self.sector}"
        )
        try:
            data = requests.get(url, timeout=TIMEOUT_S).json()
        except requests.exceptions.RequestException as e:  # a body that is not JSON included
            raise ZeusElectricityPriceHTTPError(f"Failed to retrieve current electricity price measurement: {e}") from e
        if "label" not in json.dumps(data):
            raise ZeusElectricityPriceNotFoundError(f"No rates found for lat, lon: [{self.lat}, {self.long}].")
        fields = {
            name: self.search_json(data, "label", self.label, field)
            for name, field in (
                ("energy_rate_structure", "energyratestructure"),
                ("energy_weekday_schedule", "energyweekdayschedule"),
                ("energy_weekend_schedule", "energyweekendschedule"),
            )
        }
        if not all(found and found[0] for found in fields.values()):
            raise ZeusElectricityPriceNotFoundError(f"No rates found for the label: {self.label}.")
        return {name: found[0] for name, found in fields.items()}


class TariffSignal:
    """A tariff (rate tiers, and the tier of each month and hour of weekdays and weekends) as a grid
    signal in money per kWh: each hour (UTC) costs the first rate of its tier."""

    def __init__(self, source: str, tariff: dict[str, list]) -> None:
        self.source = source
        self.rates = tariff["energy_rate_structure"]
        self.weekday = tariff["energy_weekday_schedule"]
        self.weekend = tariff["energy_weekend_schedule"]

    def rate_at(self, t: float) -> float:
        at = datetime.fromtimestamp(t, UTC)
        schedule = self.weekend if at.weekday() >= 5 else self.weekday
        try:
            return float(self.rates[schedule[at.month - 1][at.hour]][0]["rate"])
        except (IndexError, KeyError, TypeError, ValueError):
            logger.error("%s: no rate for %s in the tariff", self.source, at.isoformat())
            return math.nan

    def steps(self, start: float, end: float) -> list[Step]:
        end = max(start, end)
        out, t = [], start
        while True:
            stop = min(end, (math.floor(t / 3600) + 1) * 3600)
            out.append(Step(t, stop, self.rate_at(t)))
            if stop >= end:
                return out
            t = stop


def _signal(source: Any, currency: str = "") -> GridSignal:
    """A provider's tariff (fetched now), a signal, or a ``[grid]`` price value, as a grid signal."""
    if isinstance(source, ElectricityPriceProvider):
        return TariffSignal(type(source).__name__, source.get_current_electricity_prices())
    if isinstance(source, GridSignal):
        return source
    return open_grid_value(source, PRICE, currency)


def _polling_process(
    command_q: Any, finished_q: Any, gpu_indices: list[int], cpu_indices: list[int], electricity_price_provider: Any
) -> None:
    """The window loop (upstream's name; a thread here): per hour readings, charged at each hour's price."""
    try:
        signal = _signal(electricity_price_provider)
    except Exception as e:  # noqa: BLE001 - as upstream: logged, and the loop ends (end_window raises)
        logger.error("Failed to retrieve electricity price: %s.", e)
        return
    monitor = ZeusMonitor(gpu_indices=gpu_indices, cpu_indices=cpu_indices)
    poll_windows(command_q, finished_q, monitor, Ledger(signal, PRICE, HOUR), lambda: datetime.now(UTC), HOUR)


@dataclass
class EnergyCostMeasurement:
    """One window: ``time`` (s), joules and cost per GPU, CPU package and DRAM (None where not measured)."""

    time: float
    gpu_energy: dict[int, float]
    gpu_energy_cost: dict[int, float]
    cpu_energy: dict[int, float] | None = None
    cpu_energy_cost: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    dram_energy_cost: dict[int, float] | None = None


class EnergyCostMonitor(ChargedWindows):
    """Time, energy and its cost of named windows (concurrent windows allowed).

    ``electricity_price_provider``: an :class:`OpenEIClient` (its tariff is fetched here,
    so a bad location or label raises now), another :class:`ElectricityPriceProvider`, a
    :class:`zeus_core.grid.GridSignal`, or a ``[grid]`` price value with ``currency``. The
    other arguments are ``ZeusMonitor``'s; short windows are measured with
    ``approx_instant_energy``, as upstream.
    """

    def __init__(
        self,
        electricity_price_provider: Any,
        gpu_indices: list[int] | None = None,
        cpu_indices: list[int] | None = None,
        sync_execution_with: Literal["torch", "jax", "cupy"] = "torch",
        currency: str = "",
    ) -> None:
        self.electricity_price_provider = electricity_price_provider
        self.signal = _signal(electricity_price_provider, currency)
        super().__init__(
            ZeusMonitor(
                gpu_indices=gpu_indices, cpu_indices=cpu_indices, sync_execution_with=sync_execution_with, approx_instant_energy=True
            )
        )

    def _loop(self) -> Any:
        return _polling_process

    def _loop_args(self) -> tuple:
        return self.zeus_monitor.gpu_indices, self.zeus_monitor.cpu_indices, self.signal

    def end_window(self, key: str, sync_execution: bool = True) -> EnergyCostMeasurement:
        """End window ``key``: its time, energy and cost."""
        m, (gpu, cpu, dram) = self._end(key, sync_execution)
        return EnergyCostMeasurement(
            time=m.time,
            gpu_energy=m.gpu_energy,
            gpu_energy_cost=gpu,
            cpu_energy=m.cpu_energy,
            cpu_energy_cost=cpu or None,
            dram_energy=m.dram_energy,
            dram_energy_cost=dram or None,
        )


__all__ = [
    "ElectricityPriceProvider",
    "EnergyCostMeasurement",
    "EnergyCostMonitor",
    "OpenEIClient",
    "Op",
    "ZeusElectricityPriceHTTPError",
    "ZeusElectricityPriceNotFoundError",
    "get_time_info",
]

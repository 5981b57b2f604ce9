"""Upstream's carbon monitor: the emissions of named windows, charged hour by hour on zeus's grid signals.

``CarbonEmissionMonitor(provider)`` measures windows as ``ZeusMonitor`` does and charges
each hour's energy at that hour's carbon intensity (gCO2eq/kWh): the provider's values
become a :class:`zeus_core.grid.GridSignal` and the charging is zeus's
(:class:`zeus_core.grid.GridMeter`; see :mod:`zeus.monitor._grid`). The provider is
upstream's :class:`ElectrictyMapsClient` (its spelling), any :class:`CarbonIntensityProvider`,
a grid signal, or a ``[grid]`` value opened by the installed grid sources (``420``,
``"intensity.csv"``, ``"electricitymaps:DE"``).
"""

from __future__ import annotations

import abc
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import requests
from dateutil import parser

from zeus.exception import ZeusBaseError
from zeus.monitor._grid import ChargedWindows, HourlySignal, Ledger, Op, open_grid_value, poll_windows
from zeus.monitor.energy import ZeusMonitor
from zeus_core.grid import CARBON, GridSignal

logger = logging.getLogger(__name__)

#: Electricity Maps' API (upstream's address); its token, when set, is sent as the ``auth-token`` header.
ELECTRICITY_MAPS_URL = "https://api.electricitymap.org"
TOKEN_ENV = "ELECTRICITYMAPS_TOKEN"
#: Seconds one request waits for an answer (upstream waits forever).
TIMEOUT_S = 30.0


class ZeusCarbonIntensityHTTPError(ZeusBaseError):
    """The request to the carbon intensity provider failed (no answer, refused, timed out)."""


class ZeusCarbonIntensityNotFoundError(ZeusBaseError):
    """The provider answered without a carbon intensity (no data for the place, a wrong token)."""


class CarbonIntensityProvider(abc.ABC):
    """Where carbon intensity comes from: the current value, the recent hours, and how long each holds."""

    @abc.abstractmethod
    def get_current_carbon_intensity(self) -> float:
        """The intensity now at the provider's location (gCO2eq/kWh)."""

    @abc.abstractmethod
    def get_recent_carbon_intensity(self) -> dict[datetime, float]:
        """The recent values: start of each period (aware datetime) -> gCO2eq/kWh."""

    @property
    @abc.abstractmethod
    def update_period(self) -> timedelta:
        """How long one value of the history holds."""

    @property
    @abc.abstractmethod
    def history_length(self) -> int:
        """How many values ``get_recent_carbon_intensity`` returns."""


class ElectrictyMapsClient(CarbonIntensityProvider):
    """Electricity Maps' carbon intensity at a (latitude, longitude), hourly, the last 24 hours.

    ``estimate``: accept the service's estimates where it has no measured value (the
    monitor needs it: some hours have only estimates); ``emission_factor_type``:
    ``"direct"`` or ``"lifecycle"`` emissions.
    """

    def __init__(
        self, location: tuple[float, float], estimate: bool = False, emission_factor_type: Literal["direct", "lifecycle"] = "direct"
    ) -> None:
        self.lat, self.long = location
        self.estimate = estimate
        self.emission_factor_type = emission_factor_type

    def _ask(self, what: str, which: str) -> tuple[Any, str]:
        url = (
            f"{ELECTRICITY_MAPS_URL}/v3/carbon-intensity/{what}?lat={self.lat}&lon={self.long}"
            f"&disableEstimations={not self.estimate}&emissionFactorType={self.emission_factor_type}"
        )
        token = os.environ.get(TOKEN_ENV, "").strip()
        try:
            resp = requests.get(url, headers={"auth-token": token} if token else {}, timeout=TIMEOUT_S)
        except requests.exceptions.RequestException as e:
            raise ZeusCarbonIntensityHTTPError(f"Failed to retrieve {which} carbon intensity measurement: {e}") from e
        try:
            return resp.json(), resp.text
        except ValueError:
            return None, resp.text

    def _not_found(self, which: str, text: str) -> ZeusCarbonIntensityNotFoundError:
        return ZeusCarbonIntensityNotFoundError(
            f"{which.capitalize()} carbon intensity measurement not found at `({self.lat}, {self.long})` with estimate set "
            f"to `{self.estimate}` and emission_factor_type set to `{self.emission_factor_type}`\nJSON Response: {text}"
        )

    def get_current_carbon_intensity(self) -> float:
        """The latest value; :class:`ZeusCarbonIntensityNotFoundError` when the service has none."""
        body, text = self._ask("latest", "current")
        try:
            return body["carbonIntensity"]
        except (KeyError, TypeError):
            raise self._not_found("current", text) from None

    def get_recent_carbon_intensity(self) -> dict[datetime, float]:
        """The last 24 hours: hour start -> value."""
        body, text = self._ask("history", "recent")
        try:
            return {parser.parse(item["datetime"]): item["carbonIntensity"] for item in body["history"]}
        except (KeyError, TypeError):
            raise self._not_found("recent", text) from None

    @property
    def update_period(self) -> timedelta:
        return timedelta(hours=1)

    @property
    def history_length(self) -> int:
        return 24


def provider_signal(provider: CarbonIntensityProvider) -> HourlySignal:
    """The provider's recent values as a grid signal (refreshed by the window loop)."""

    def fetch() -> dict[float, float]:
        return {dt.timestamp(): float(v) for dt, v in provider.get_recent_carbon_intensity().items()}

    return HourlySignal(type(provider).__name__, fetch, provider.update_period.total_seconds())


def _signal(source: Any) -> tuple[GridSignal, timedelta, int]:
    """(signal, period of the loop, periods between refreshes) of a provider, a signal or a ``[grid]`` value."""
    if isinstance(source, CarbonIntensityProvider):
        return provider_signal(source), source.update_period, max(source.history_length - 1, 1)
    if not isinstance(source, GridSignal):
        source = open_grid_value(source, CARBON)
    return source, timedelta(hours=1), 0


def _polling_process(
    command_q: Any, finished_q: Any, gpu_indices: list[int], cpu_indices: list[int], carbon_intensity_provider: Any
) -> None:
    """The window loop (upstream's name; a thread here): per hour readings, charged at each hour's intensity."""
    signal, period, refresh_every = _signal(carbon_intensity_provider)
    refresh = getattr(signal, "refresh", None)
    monitor = ZeusMonitor(gpu_indices=gpu_indices, cpu_indices=cpu_indices)
    poll_windows(command_q, finished_q, monitor, Ledger(signal, CARBON, period), lambda: datetime.now(UTC), period, refresh, refresh_every)


@dataclass
class CarbonEmissionMeasurement:
    """One window: ``time`` (s), joules and gCO2eq per GPU, CPU package and DRAM (None where not measured)."""

    time: float
    gpu_energy: dict[int, float]
    gpu_carbon_emission: dict[int, float]
    cpu_energy: dict[int, float] | None = None
    cpu_carbon_emission: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    dram_carbon_emission: dict[int, float] | None = None


class CarbonEmissionMonitor(ChargedWindows):
    """Time, energy and carbon emissions of named windows (concurrent windows allowed).

    ``carbon_intensity_provider``: an :class:`ElectrictyMapsClient` (with ``estimate=True``:
    some hours have only estimates), another :class:`CarbonIntensityProvider`, a
    :class:`zeus_core.grid.GridSignal`, or a ``[grid]`` value. The other arguments are
    ``ZeusMonitor``'s.
    """

    def __init__(
        self,
        carbon_intensity_provider: Any,
        gpu_indices: list[int] | None = None,
        cpu_indices: list[int] | None = None,
        sync_execution_with: Literal["torch", "jax", "cupy"] = "torch",
    ) -> None:
        if not isinstance(carbon_intensity_provider, (CarbonIntensityProvider, GridSignal)):
            carbon_intensity_provider = open_grid_value(carbon_intensity_provider, CARBON)
        self.carbon_intensity_provider = carbon_intensity_provider
        super().__init__(ZeusMonitor(gpu_indices=gpu_indices, cpu_indices=cpu_indices, sync_execution_with=sync_execution_with))

    def _loop(self) -> Any:
        return _polling_process

    def _loop_args(self) -> tuple:
        return self.zeus_monitor.gpu_indices, self.zeus_monitor.cpu_indices, self.carbon_intensity_provider

    def end_window(self, key: str, sync_execution: bool = True) -> CarbonEmissionMeasurement:
        """End window ``key``: its time, energy and emissions."""
        m, (gpu, cpu, dram) = self._end(key, sync_execution)
        return CarbonEmissionMeasurement(
            time=m.time,
            gpu_energy=m.gpu_energy,
            gpu_carbon_emission=gpu,
            cpu_energy=m.cpu_energy,
            cpu_carbon_emission=cpu or None,
            dram_energy=m.dram_energy,
            dram_carbon_emission=dram or None,
        )


__all__ = [
    "CarbonEmissionMeasurement",
    "CarbonEmissionMonitor",
    "CarbonIntensityProvider",
    "ElectrictyMapsClient",
    "Op",
    "ZeusCarbonIntensityHTTPError",
    "ZeusCarbonIntensityNotFoundError",
]

"""Apple Silicon (upstream's ``zeus.device.soc.apple``), read through zeus's ``apple-silicon`` plugin.

The plugin resolves the energy binding (``zeus_apple_silicon``, or its simulated driver where
``$ZEUS_FAKE_APPLE_SILICON`` names a state); its ``AppleEnergyMonitor`` gives the eleven fields of
``AppleSiliconMeasurement`` (integers in mJ, lists per core and cluster, None where the chip lacks one).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from zeus.device.soc.common import SoC, SoCMeasurement, ZeusSoCInitError, subtract_fields

PLUGIN = "apple-silicon"


class ZeusAppleInitError(ZeusSoCInitError):
    """The chip's energy channels could not be opened."""


@dataclass
class AppleSiliconMeasurement(SoCMeasurement):
    """Energy of an Apple chip's subsystems (mJ); None where the chip has no such channel."""

    cpu_total_mj: int | None = None
    efficiency_cores_mj: list[int] | None = None
    performance_cores_mj: list[int] | None = None
    efficiency_cluster_mj: list[int] | None = None
    performance_cluster_mj: list[int] | None = None
    efficiency_core_manager_mj: int | None = None
    performance_core_manager_mj: int | None = None
    dram_mj: int | None = None
    gpu_mj: int | None = None
    gpu_sram_mj: int | None = None
    ane_mj: int | None = None

    def __sub__(self, other: AppleSiliconMeasurement) -> AppleSiliconMeasurement:
        result: AppleSiliconMeasurement = subtract_fields(self, other)
        return result

    @classmethod
    def from_metrics(cls, metrics: Any) -> AppleSiliconMeasurement:
        """From the binding's ``AppleEnergyMetrics``."""
        return cls(**{f.name: getattr(metrics, f.name) for f in fields(cls)})


def _module() -> Any:
    from zeus.device.gpu.nvidia import _installed

    if not _installed(PLUGIN):
        raise ZeusAppleInitError("the apple-silicon device plugin is not installed: pip install zeus-plugins-apple-silicon")
    from zeus_plugins_apple_silicon.control import apple_module

    try:
        return apple_module()
    except Exception as e:  # noqa: BLE001 - no binding: not available
        raise ZeusAppleInitError(str(e)) from None


def apple_silicon_is_available() -> bool:
    """True where the ``apple-silicon`` plugin is installed and its energy binding imports."""
    try:
        _module()
    except ZeusAppleInitError:
        return False
    return True


class AppleSilicon(SoC):
    """The chip's energy channels; windows are the binding's (``RuntimeError`` for a window open
    twice without ``restart`` or ended without being begun, as upstream)."""

    def __init__(self) -> None:
        module = _module()
        try:
            self._monitor = module.AppleEnergyMonitor()
        except RuntimeError as e:
            raise ZeusAppleInitError(f"Failed to initialize `AppleEnergyMonitor`: {e}") from None
        self.available_metrics: set[str] | None = None

    def get_available_metrics(self) -> set[str]:
        if self.available_metrics is None:
            self.available_metrics = {k for k, v in asdict(self.get_total_energy_consumption()).items() if v is not None}
        return self.available_metrics

    def get_total_energy_consumption(self) -> AppleSiliconMeasurement:
        return AppleSiliconMeasurement.from_metrics(self._monitor.get_cumulative_energy())

    def begin_window(self, key: str, restart: bool = False) -> None:
        self._monitor.begin_window(key, restart=restart)

    def end_window(self, key: str) -> AppleSiliconMeasurement:
        return AppleSiliconMeasurement.from_metrics(self._monitor.end_window(key))

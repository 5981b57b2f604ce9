"""NVIDIA Jetson (upstream's ``zeus.device.soc.jetson``), measured by zeus's ``jetson`` device plugin.

The plugin polls the board's INA3221 rails and integrates their power; ``JetsonMeasurement`` adds
the rails by role: ``cpu_energy_mj`` (CPU rails), ``gpu_energy_mj`` (GPU rails, ``VDD_GPU_SOC`` and
``VDD_CPU_GPU_CV`` included), ``total_energy_mj`` (the module's input rail, which holds the others).
A role the board has no rail for is None.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from zeus.device.soc.common import SoC, SoCMeasurement, ZeusSoCInitError, subtract_fields

PLUGIN = "jetson"
_ROLES = {"cpu": "cpu_energy_mj", "gpu": "gpu_energy_mj", "total": "total_energy_mj"}


class ZeusJetsonInitError(ZeusSoCInitError):
    """The Jetson's power rails could not be opened."""


@dataclass
class JetsonMeasurement(SoCMeasurement):
    """Energy of a Jetson's CPU, GPU and whole module (mJ); None where the board has no such rail."""

    cpu_energy_mj: float | None = None
    gpu_energy_mj: float | None = None
    total_energy_mj: float | None = None

    def __sub__(self, other: JetsonMeasurement) -> JetsonMeasurement:
        result: JetsonMeasurement = subtract_fields(self, other)
        return result


def jetson_is_available(sysfs_root: str = "/sys") -> bool:
    """True where the ``jetson`` plugin is installed and ``sysfs_root`` has INA3221 power rails."""
    from zeus.device.gpu.nvidia import _installed

    if not _installed(PLUGIN):
        return False
    try:
        from zeus_plugins_jetson.rails import discover

        return bool(discover(Path(sysfs_root)))
    except Exception:  # noqa: BLE001 - no rails, no driver: not a Jetson
        return False


class Jetson(SoC):
    """A Jetson's rails, opened through the ``jetson`` plugin (``options``: its ``[device]`` options,
    e.g. ``{"sysfs_root": "/sys", "poll_interval_s": 0.05}``)."""

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        from rich.console import Console

        from zeus_core.engine import build_device, get_registry

        try:
            self.group, _ = build_device(get_registry(), PLUGIN, dict(options or {}), Console(stderr=True))
        except Exception as e:  # noqa: BLE001 - upstream raises its init error for every failure
            raise ZeusJetsonInitError(f"the Jetson's power rails cannot be opened: {e}") from None
        self.measurement_states: dict[str, JetsonMeasurement] = {}
        self.available_metrics: set[str] | None = None

    def get_available_metrics(self) -> set[str]:
        if self.available_metrics is None:
            self.available_metrics = {k for k, v in asdict(self.get_total_energy_consumption()).items() if v is not None}
        return self.available_metrics

    def get_total_energy_consumption(self) -> JetsonMeasurement:
        """Energy per role since the rails opened (mJ)."""
        joules = self.group.read_energy()
        out = JetsonMeasurement()
        for name, value in joules.items():
            field = _ROLES.get(self.group.rail_roles.get(name, ""))
            if field is not None:
                setattr(out, field, (getattr(out, field) or 0.0) + value * 1000.0)
        return out

    def begin_window(self, key: str, restart: bool = False) -> None:
        if key in self.measurement_states and not restart:
            raise KeyError(f"Measurement window '{key}' already exists")
        self.measurement_states[key] = self.get_total_energy_consumption()

    def end_window(self, key: str) -> JetsonMeasurement:
        try:
            start = self.measurement_states.pop(key)
        except KeyError:
            raise KeyError(f"Measurement window '{key}' does not exist") from None
        return self.get_total_energy_consumption() - start

    def close(self) -> None:
        self.group.close()

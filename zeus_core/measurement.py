"""What a measurement window measured: :class:`Measurement`.

Windows themselves (:class:`~zeus_core.windows.Monitor`) live in
:mod:`zeus_core.windows`; this module is what every part may import to read a
measurement.

Naming convention shared by device plugins (it is what lets users of upstream
Zeus's ``ZeusMonitor`` find ``gpu_energy[i]`` and ``cpu_energy[i]`` where they
expect them): a GPU is ``gpu<i>`` with ``i`` its CUDA-visible index, a CPU
package ``cpu<i>-package`` and its DRAM ``cpu<i>-dram``. Any other name is
counted in :attr:`Measurement.total_system_energy` only.
"""

from __future__ import annotations

import math
import re

import attrs

from zeus_core.attribution import Attribution
from zeus_core.errors import DeviceError

SOURCES = ("counter", "polling", "estimate")

_GPU = re.compile(r"gpu(\d+)$")
_CPU = re.compile(r"cpu(\d+)-package$")
_DRAM = re.compile(r"cpu(\d+)-dram$")


def _by_index(energy: dict[str, float], pattern: re.Pattern[str]) -> dict[int, float]:
    out = {}
    for name, joules in energy.items():
        m = pattern.match(name)
        if m:
            out[int(m.group(1))] = joules
    return out


@attrs.frozen(slots=False)  # a dict-backed frozen class builds faster: one per window
class Measurement:
    """What one window measured.

    ``time`` is wall (or virtual) seconds; ``energy`` maps each device name to
    joules; ``sources`` maps each device name to ``counter``, ``polling`` or
    ``estimate``.

    The ``ZeusMonitor`` names mean what they mean upstream: ``gpu_energy`` is
    keyed by CUDA-visible GPU index, ``cpu_energy``/``dram_energy`` by CPU
    package (``None`` when no CPU was measured), and ``total_energy`` sums the
    **GPUs only** (upstream's semantics, kept on purpose so ported code keeps
    its numbers). ``total_system_energy`` sums every device.
    """

    time: float
    energy: dict[str, float]
    sources: dict[str, str] = attrs.field(factory=dict)
    #: per device, its energy split among the processes on it (an estimate: :mod:`zeus_core.attribution`);
    #: empty where the device cannot say who ran on it or attribution is off
    attribution: dict[str, Attribution] = attrs.field(factory=dict, eq=False)

    @property
    def gpu_energy(self) -> dict[int, float]:
        return _by_index(self.energy, _GPU)

    @property
    def cpu_energy(self) -> dict[int, float] | None:
        return _by_index(self.energy, _CPU) or None

    @property
    def dram_energy(self) -> dict[int, float] | None:
        return _by_index(self.energy, _DRAM) or None

    @property
    def total_gpu_energy(self) -> float:
        """Joules summed over the GPUs (``gpu<i>`` names)."""
        return float(sum(self.gpu_energy.values()))

    @property
    def total_energy(self) -> float:
        """Joules summed over the GPUs only, as upstream ``ZeusMonitor``'s ``Measurement``."""
        return self.total_gpu_energy

    @property
    def total_system_energy(self) -> float:
        """Joules summed over every device of the window (GPUs, CPUs, DRAM, others)."""
        return float(sum(self.energy.values()))

    @property
    def estimated(self) -> list[str]:
        """Names of devices whose energy is an estimate, not a measurement."""
        return [n for n, s in self.sources.items() if s == "estimate"]


# --------------------------------------------------------------------------- helpers for device plugins


def format_joules(j: float) -> str:
    """Human units for tables: J, kJ, MJ."""
    if not math.isfinite(j):
        return str(j)
    for unit, scale in (("MJ", 1e6), ("kJ", 1e3)):
        if abs(j) >= scale:
            return f"{j / scale:.3f} {unit}"
    return f"{j:.3f} J"


__all__ = ["SOURCES", "DeviceError", "Measurement", "format_joules"]

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
from collections.abc import Iterable

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
    #: what each device's energy covers (:data:`zeus_core.device.SCOPES`: ``gpu``, ``module``, ...)
    scopes: dict[str, str] = attrs.field(factory=dict)
    #: a +/- bound (J) on each device's energy (:meth:`zeus_core.device.Precision.bound_j`); NaN: unknown
    errors: dict[str, float] = attrs.field(factory=dict)
    #: per device, its energy split among the processes on it (an estimate: :mod:`zeus_core.attribution`);
    #: empty where the device cannot say who ran on it, attribution is off, or the window was shorter
    #: than the monitor's ``attribute_min_s``
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
    def method(self) -> str:
        """How the window's devices were measured, in one word (:func:`energy_method`)."""
        return energy_method(self.sources.get(n, "") for n in self.energy)

    def error_j(self, names: Iterable[str] | None = None) -> float:
        """The +/- bound (J) on the energy of ``names`` summed (default: every device, the bound on
        :attr:`total_system_energy`); NaN where a device's bound is unknown."""
        return float(sum(self.errors.get(n, math.nan) for n in (self.energy if names is None else names)))

    @property
    def estimated(self) -> list[str]:
        """Names of devices whose energy is an estimate, not a measurement."""
        return [n for n, s in self.sources.items() if s == "estimate"]


def default_scope(name: str) -> str:
    """The scope a device's name implies where its group does not say (:data:`zeus_core.device.SCOPES`):
    ``gpu<i>`` a GPU, ``cpu<i>-package`` a CPU package, ``cpu<i>-dram`` DRAM, anything else ``device``."""
    if _GPU.match(name):
        return "gpu"
    if _CPU.match(name):
        return "cpu_package"
    if _DRAM.match(name):
        return "dram"
    return "device"


def energy_method(sources: Iterable[str]) -> str:
    """One word for how several devices (or windows) were measured: the method they share
    (``counter``, ``polling``, ``estimate``), ``mixed:`` and the methods sorted and joined by ``+``
    where they differ (``mixed:counter+polling``), or "" for none (``recurrences.csv``'s and
    ``summary.json``'s ``energy_method``). A ``mixed:`` figure given again is split into its methods."""
    seen: set[str] = set()
    for s in sources:
        seen.update(s.removeprefix("mixed:").split("+") if s else ())
    if len(seen) <= 1:
        return next(iter(seen), "")
    return "mixed:" + "+".join(sorted(seen))


def format_bound(joules: float, error_j: float) -> str:
    """An energy with its +/- bound, for tables: ``1.234 kJ ± 3 J`` (the bound to two significant
    figures; ``± ?`` where it is unknown)."""
    if not math.isfinite(error_j):
        return f"{format_joules(joules)} ± ?"
    for unit, scale in (("MJ", 1e6), ("kJ", 1e3), ("J", 1.0)):
        if abs(error_j) >= scale or unit == "J":
            return f"{format_joules(joules)} ± {error_j / scale:.2g} {unit}"
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------- helpers for device plugins


def format_joules(j: float) -> str:
    """Human units for tables: J, kJ, MJ."""
    if not math.isfinite(j):
        return str(j)
    for unit, scale in (("MJ", 1e6), ("kJ", 1e3)):
        if abs(j) >= scale:
            return f"{j / scale:.3f} {unit}"
    return f"{j:.3f} J"


__all__ = ["SOURCES", "DeviceError", "Measurement", "default_scope", "energy_method", "format_bound", "format_joules"]

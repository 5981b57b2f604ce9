"""The ``jetson`` device: an NVIDIA Jetson's INA3221 power rails, polled and integrated into energy.

The INA3221 reports power, not energy, so a thread reads every rail each
``poll_interval_s`` (all rails at one timestamp) and integrates by the
trapezoid rule; between the last sample and "now" the last power is held. A
thread, not a process: a sysfs read runs in the kernel without the GIL.

Each rail is one device name (:mod:`zeus_plugins_jetson.rails`); ``rail_roles``
says which is the module's input (``total``: it contains the others, so do not
add it to them), which feed the GPU, which the CPU. Temperatures come from the
board's thermal zones: the GPU zone for GPU rails, the CPU zone for CPU rails,
the junction (``tj``) zone for the input rail.

How a figure was measured: every rail is ``polling`` (power read and
integrated, ``energy_sources``); its scope is its rail (``rail_roles``:
``total`` is the module's input, CPU, GPU and memory together). The hwmon
driver says how often a reading is renewed (``update_interval``) and over how
many conversions it is averaged (``samples``): ``update_periods_s`` and
``averaging_samples``, per rail, where the driver gives them; ``current_steps_a``
the step a rail's current moves in (40 µV over its shunt resistor). A chip's
summation channel (``curr4_input``) is no rail: :meth:`JetsonRails.read_current_sums`
reads it as the total current it is. From these, each rail's bound
(``energy_precision``, :mod:`zeus_plugins_jetson.sensors`): polling's, with the
reading renewed every ``update_interval`` and covering its shunt's conversions
only (a sixth of it with three channels on).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import attrs

from zeus_core import DeviceError
from zeus_core.devicekit import ClosedOnExit, PowerIntegral, Sampler
from zeus_core.errors import DeviceAbsent
from zeus_plugins_jetson.options import JetsonOptions
from zeus_plugins_jetson.rails import Rail, board_model, current_sums, discover, read_number, thermal_zones
from zeus_plugins_jetson.sensors import rail_precision

#: thermal zone type prefix per rail role
_ZONE_OF_ROLE = {"gpu": ("gpu",), "cpu": ("cpu",), "total": ("tj", "tboard")}


class RailPoller:
    """Reads every rail each period (all at one timestamp) in a background thread and integrates
    each rail's power into its energy."""

    def __init__(self, rails: list[Rail], period_s: float) -> None:
        self.rails = rails
        self._energy = PowerIntegral()
        self._tick()  # at open: a tree that cannot be read fails here, with its file named
        self._sampler = Sampler(period_s, self._tick, "zeus-jetson-rails")

    def _tick(self) -> None:
        watts = {r.name: r.read_w() for r in self.rails}
        self._energy.add_all(time.monotonic(), watts)

    def energy(self) -> list[float]:
        """Joules per rail since open (the last power held from the last sample to now)."""
        if self._sampler.error is not None:
            raise DeviceError(f"reading the Jetson power rails failed: {self._sampler.error}")
        now = time.monotonic()
        return [self._energy.joules(r.name, now) for r in self.rails]

    def stop(self) -> None:
        self._sampler.stop()


class JetsonRails(ClosedOnExit):
    """The ``jetson`` device group: one name per INA3221 rail (``vdd_in``, ``vdd_gpu_soc``, ...).

    ``energy_includes`` (:class:`zeus_core.device.EnergyIncludes`) says that the module's input
    rail (role ``total``) holds every other rail, so a total counts it alone.
    """

    clock = staticmethod(time.monotonic)

    def __init__(self, options: JetsonOptions | None = None) -> None:
        self.options = options = options or JetsonOptions()
        root = Path(options.sysfs_root)
        try:
            rails = discover(root)
        except DeviceAbsent as e:
            if root == Path(str(attrs.fields(JetsonOptions).sysfs_root.default)):
                raise
            raise DeviceError(str(e)) from None  # a sysfs_root given on purpose that holds no INA3221: fix the option
        if options.rails is not None:
            rails = self._select(rails, options.rails)
        self.rails = rails
        self.names = [r.name for r in rails]
        self.rail_roles = {r.name: r.role for r in rails}
        self.rail_labels = {r.name: r.label for r in rails}
        inner = [r.name for r in rails if r.role != "total"]
        self.energy_includes = {r.name: list(inner) for r in rails if r.role == "total" and inner}
        self.energy_sources = dict.fromkeys(self.names, "polling")
        #: seconds between two readings of a rail as the INA3221 renews them (hwmon ``update_interval``);
        #: a rail polled faster reads the same conversion again. Only where the driver says (not iio)
        self.update_periods_s = {r.name: r.update_interval_s for r in rails if r.update_interval_s is not None}
        #: conversions averaged into one reading (hwmon ``samples``): 1 is a snapshot of one shunt conversion
        self.averaging_samples = {r.name: r.samples for r in rails if r.samples is not None}
        #: the smallest change of current a rail reports (A; hwmon, from ``shunt<i>_resistor``): times the
        #: bus voltage, the resolution of its power
        self.current_steps_a = {r.name: step for r in rails if (step := r.current_step_a) is not None}
        #: how each rail is measured and how sure it is (zeus_core.device.EnergyPrecision; NaN bound on the iio driver)
        self.energy_precision = {r.name: rail_precision(r, options.poll_interval_s, options.max_power_w) for r in rails}
        self._sums = current_sums(root)
        self.max_power_w = float(options.max_power_w or 0.0)
        self.model = board_model(root)
        zones = thermal_zones(root)
        self._zones = {r.name: z for r in rails if (z := _zone_for(r.role, zones)) is not None}
        self._poller = RailPoller(rails, options.poll_interval_s)
        self._closed = False

    @staticmethod
    def _select(rails: list[Rail], wanted: list[str]) -> list[Rail]:
        by_key = {k: r for r in rails for k in (r.name, r.label.lower())}
        missing = [w for w in wanted if w.lower() not in by_key]
        if missing:
            raise DeviceError(f"rails {missing} are not on this board; it has {', '.join(f'{r.label} ({r.name})' for r in rails)}")
        return list({id(r): r for r in (by_key[w.lower()] for w in wanted)}.values())

    # -- measurement --

    def read_energy(self) -> dict[str, float]:
        """Cumulative joules per rail since the device opened (polled power, integrated)."""
        return dict(zip(self.names, self._poller.energy()))

    def read_power(self) -> dict[str, float]:
        """Power (W) per rail, read now."""
        return {r.name: r.read_w() for r in self.rails}

    def read_current_sums(self) -> dict[str, float]:
        """Amperes per chip (``1-0040``) from its summation channel: the sum of the currents of the channels
        the device tree sums. A current over rails at different voltages, not a power: never added to
        energy. Chips without a summation now (ENODATA: their shunt resistors differ) are left out."""
        return {s.chip: a for s in self._sums if (a := s.read_a()) is not None}

    def read_temperatures(self) -> dict[str, float]:
        """°C per rail whose part has a thermal zone (GPU, CPU, the module's junction for the input rail)."""
        return {name: read_number(path) / 1000.0 for name, path in self._zones.items()}

    @property
    def device_models(self) -> dict[str, str]:
        """Each rail as "<label> rail of <board>" (:class:`zeus_core.device.DeviceModels`)."""
        board = self.model or "an NVIDIA Jetson"
        return {r.name: f"{r.label} rail of {board}" for r in self.rails}

    def identity(self) -> dict[str, Any]:
        """The board model and its rails (:class:`zeus_core.HasIdentity`): energy learned on one board
        means nothing on another."""
        return {"board_model": self.model, "rails": [r.label for r in self.rails]}

    # -- lifetime --

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._poller.stop()


def _zone_for(role: str, zones: dict[str, Path]) -> Path | None:
    for prefix in _ZONE_OF_ROLE.get(role, ()):
        for zone_type, path in zones.items():
            if zone_type.startswith(prefix):
                return path
    return None


def make_jetson(options: JetsonOptions, context: Any) -> JetsonRails:
    """NVIDIA Jetson power rails (INA3221 under sysfs), polled and integrated."""
    resolve = getattr(context, "resolve_path", None)
    if resolve is not None:
        options = attrs.evolve(options, sysfs_root=str(resolve(options.sysfs_root)))
    job = getattr(context, "job", None)
    if job is not None and options.max_power_w is None and job.eta_knob < 1:
        raise DeviceError(
            "a Jetson's rails have no power limit to weigh time by in the cost metric (eta_knob < 1): "
            "set max_power_w in [device] to the module's power budget (its nvpmodel mode, e.g. 15 W)"
        )
    return JetsonRails(options)

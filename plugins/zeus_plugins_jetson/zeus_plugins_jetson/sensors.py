"""What the INA3221 does: how a Jetson rail's energy is measured and how sure it is.

A rail's :class:`~zeus_core.device.Precision` (the ``jetson`` device's ``energy_precision``) is
polled power's, from what the mainline hwmon driver (Linux ``drivers/hwmon/ina3221.c``) says:

* the chip converts continuously, one channel after another, each a bus-voltage then a
  shunt-voltage conversion, ``samples`` times (averaging); a reading is renewed every
  ``update_interval`` (``ina3221_reg_to_interval_us``: enabled channels x samples x (bus + shunt
  conversion time); 7 ms at the reset configuration with three channels on), the
  :attr:`~zeus_core.device.Precision.sensor_period_s`;
* the current (what power is made of) comes from the shunt conversions only: of each
  ``update_interval`` a rail's shunt is converted for ``samples`` shunt conversion times. The
  driver sets the bus and shunt conversion times to one value (``ina3221_write_chip``,
  ``hwmon_chip_update_interval``: one conversion-time index for both), so that part is
  ``1 / (2 x enabled channels)`` of the interval (a sixth with three channels on): the reading's
  :attr:`~zeus_core.device.Precision.coverage`; a load that comes and goes within an interval is
  seen only in that part;
* the shunt-voltage register's full scale is 163.8 mV (4095 steps of 40 µV, ``ina3221_read_value``),
  so a rail draws at most 163.8 mV / its shunt resistor x its bus voltage as the chip can read it,
  the ``max_w`` where ``max_power_w`` (the module's budget) is not set.

The iio driver (``ina3221x``, older L4T) shows neither the interval nor the resistor (it converts
on each read while the chip idles in triggered mode, with conversion times NVIDIA's driver does not
export): its rails' bound is unknown (NaN), never guessed.

Not covered: each reading is rounded to the shunt register's 40 µV step (8 mA at a 5 mΩ shunt,
40 mW at 5 V), an error per reading that :class:`~zeus_core.device.Precision` has no term for.
"""

from __future__ import annotations

from pathlib import Path

from zeus_core import DeviceError
from zeus_core.device import Precision
from zeus_plugins_jetson.rails import RAIL_CHANNELS, SHUNT_STEP_UV, Rail, read_number

#: ina3221.c: the shunt-voltage register's largest reading (µV): 4095 steps of 40 µV
SHUNT_FULL_SCALE_UV = 4095 * SHUNT_STEP_UV


def enabled_channels(folder: Path) -> int:
    """How many of a hwmon chip's channels convert (``in<i>_enable`` 1; every one where the driver does not say)."""
    on = 0
    for idx in RAIL_CHANNELS:
        enable = folder / f"in{idx}_enable"
        on += 1 if not enable.exists() or read_number(enable) != 0 else 0
    return max(on, 1)


def rail_max_w(rail: Rail) -> float:
    """The most rail ``rail`` can draw as the chip reads it (W): the shunt register's full scale over its
    resistor, at the bus voltage read now; NaN where the driver does not say the resistor (iio)."""
    if not rail.shunt_uohm or rail.voltage_file is None:
        return float("nan")
    try:
        bus_v = read_number(rail.voltage_file) / 1000.0
    except DeviceError:
        return float("nan")
    return SHUNT_FULL_SCALE_UV / rail.shunt_uohm * bus_v


def rail_precision(rail: Rail, poll_s: float, max_w: float | None) -> Precision:
    """Rail ``rail`` polled every ``poll_s``: the reading renewed every ``update_interval``, covering its
    shunt's part of it; ``max_w`` (the module's budget) or the chip's full scale (:func:`rail_max_w`)."""
    most = max_w if max_w is not None else rail_max_w(rail)
    if rail.update_interval_s is None or rail.voltage_file is None:  # the iio driver: nothing to bound with
        return Precision("polling", "soc_rail", most, period_s=poll_s, sensor_period_s=float("nan"))
    return Precision(
        "polling",
        "soc_rail",
        most,
        period_s=poll_s,
        sensor_period_s=rail.update_interval_s,
        coverage=1.0 / (2 * enabled_channels(rail.voltage_file.parent)),
    )


__all__ = ["SHUNT_FULL_SCALE_UV", "enabled_channels", "rail_max_w", "rail_precision"]

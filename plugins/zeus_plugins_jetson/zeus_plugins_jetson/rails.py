"""The INA3221 power rails of an NVIDIA Jetson board, found under sysfs.

Every Jetson module carries at least one INA3221 (three channels, each a rail).
Its driver is registered under one of two names, with one of two layouts:

* ``ina3221x`` (older L4T, Jetson TX2/Xavier): an iio device,
  ``bus/i2c/drivers/ina3221x/<chip>/iio:deviceN/`` with ``rail_name_<i>``,
  ``in_power<i>_input`` (mW), ``in_voltage<i>_input`` (mV) and
  ``in_current<i>_input`` (mA), channels counted from 0;
* ``ina3221`` (the mainline hwmon driver, Orin and newer L4T):
  ``bus/i2c/drivers/ina3221/<chip>/hwmon/hwmonN/`` with ``in<i>_label``,
  ``in<i>_input`` (bus voltage, mV) and ``curr<i>_input`` (mA), channels counted
  from 1; power is voltage times current.

A rail is named after its label, lower-cased with every run of other
characters made ``_`` (``VDD_GPU_SOC`` is ``vdd_gpu_soc``), so a GPU rail's name
contains ``gpu``. Its role is ``total`` for the module's input rail
(``VDD_IN``, ``POM_5V_IN``, ``VIN_SYS_5V0``: the others are inside it), ``gpu`` for
a rail feeding the GPU (``VDD_GPU_SOC``, ``VDD_CPU_GPU_CV``, ``GPU``), ``cpu``
for one feeding the CPU only, ``other`` for the rest. Channels labelled ``NC``
(not connected) are skipped, as are channels switched off (``in<i>_enable`` 0).
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from zeus_core import DeviceError
from zeus_core.errors import DeviceAbsent

DRIVERS = ("ina3221x", "ina3221")
_CHIP = re.compile(r"\d+-[0-9a-fA-F]{4}")


def _role(label: str) -> str:
    up = label.upper()
    if up in ("VDD_IN", "SYS5V", "VIN") or up.endswith("_IN") or up.startswith("VIN_"):
        return "total"
    if "GPU" in up:
        return "gpu"
    if "CPU" in up:
        return "cpu"
    return "other"


def rail_name(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_") or "rail"


def read_number(path: Path) -> float:
    """A sysfs value, as a number; a clear :class:`DeviceError` naming the file otherwise."""
    try:
        text = path.read_text().strip()
    except PermissionError:
        raise DeviceError(f"cannot read {path}: permission denied. Run zeus as root or make the INA3221 files "
                          f"readable (sudo chmod o+r {path.parent}/*_input)") from None
    except OSError as e:
        raise DeviceError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        return float(text)
    except ValueError:
        raise DeviceError(f"{path} holds {text[:40]!r}, not a number: this INA3221 channel is not readable") from None


@attrs.frozen
class Rail:
    """One INA3221 channel: its files and how they give power."""

    name: str
    label: str
    role: str
    chip: str
    power_file: Path | None  # mW, where the driver reports power
    voltage_file: Path | None  # mV
    current_file: Path | None  # mA

    def read_w(self) -> float:
        if self.power_file is not None:
            return read_number(self.power_file) / 1000.0
        assert self.voltage_file is not None and self.current_file is not None
        return read_number(self.voltage_file) * read_number(self.current_file) / 1e6


def _label(path: Path) -> str:
    try:
        return path.read_text().strip().strip("\0")
    except OSError as e:
        raise DeviceError(f"cannot read the rail name {path}: {e.strerror or e}") from None


def _iio_rails(folder: Path, chip: str) -> list[Rail]:
    out = []
    for label_file in sorted(folder.glob("rail_name_*")):
        idx = label_file.name[len("rail_name_"):]
        label = _label(label_file)
        if not label or label.upper() == "NC":
            continue
        power = folder / f"in_power{idx}_input"
        volt, curr = folder / f"in_voltage{idx}_input", folder / f"in_current{idx}_input"
        if not power.exists() and not (volt.exists() and curr.exists()):
            raise DeviceError(f"rail {label} ({label_file}) has neither {power.name} nor both {volt.name} and {curr.name}: "
                              "the INA3221 driver exposes no reading for it")
        out.append(Rail(rail_name(label), label, _role(label), chip, power if power.exists() else None,
                        None if power.exists() else volt, None if power.exists() else curr))
    return out


def _hwmon_rails(folder: Path, chip: str) -> list[Rail]:
    out = []
    for label_file in sorted(folder.glob("in*_label")):
        idx = label_file.name[2:-len("_label")]
        if not idx.isdigit():
            continue
        label = _label(label_file)
        if not label or label.upper() == "NC":
            continue
        enable = folder / f"in{idx}_enable"
        if enable.exists() and read_number(enable) == 0:
            continue
        volt, curr = folder / f"in{idx}_input", folder / f"curr{idx}_input"
        missing = [p.name for p in (volt, curr) if not p.exists()]
        if missing:
            raise DeviceError(f"rail {label} ({label_file}) has no {' or '.join(missing)}: the INA3221 driver exposes no "
                              "reading for it")
        out.append(Rail(rail_name(label), label, _role(label), chip, None, volt, curr))
    return out


def discover(root: Path) -> list[Rail]:
    """Every rail under ``root`` (a sysfs folder), both drivers and both layouts. :class:`DeviceAbsent`
    where no INA3221 driver is there (not a Jetson), :class:`DeviceError` for a tree that cannot be read."""
    if not root.is_dir():
        raise DeviceError(f"sysfs_root {str(root)!r} is not a folder")
    drivers = root / "bus" / "i2c" / "drivers"
    found = [drivers / d for d in DRIVERS if (drivers / d).is_dir()]
    if not found:
        raise DeviceAbsent(
            f"no INA3221 power monitor under {drivers} (driver ina3221x or ina3221): this is not an NVIDIA Jetson, "
            "or its INA3221 driver is not loaded. On a Jetson, sysfs_root is /sys (or where a container mounts it)"
        )
    rails: list[Rail] = []
    for driver in found:
        for chip in sorted(p for p in driver.iterdir() if _CHIP.fullmatch(p.name) and p.is_dir()):
            for folder in sorted(chip.glob("iio:device*")):
                rails += _iio_rails(folder, chip.name)
            for folder in sorted([*chip.glob("hwmon/hwmon*"), *chip.glob("hwmon[0-9]*")]):
                rails += _hwmon_rails(folder, chip.name)
    if not rails:
        raise DeviceError(f"the INA3221 driver in {', '.join(map(str, found))} lists no connected rail "
                          "(no rail_name_<i> or in<i>_label other than NC)")
    names = [r.name for r in rails]
    return [attrs.evolve(r, name=f"{r.name}_{r.chip.replace('-', '_')}") if names.count(r.name) > 1 else r for r in rails]


def board_model(root: Path) -> str | None:
    """The board's name from the device tree (``firmware/devicetree/base/model``), where present."""
    try:
        return (root / "firmware" / "devicetree" / "base" / "model").read_text().strip("\0\n ") or None
    except OSError:
        return None


def thermal_zones(root: Path) -> dict[str, Path]:
    """Thermal zone type (lower case) -> its ``temp`` file (m°C)."""
    out = {}
    for zone in sorted((root / "class" / "thermal").glob("thermal_zone*")):
        try:
            out[(zone / "type").read_text().strip().lower()] = zone / "temp"
        except OSError:
            continue
    return out

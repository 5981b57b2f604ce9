"""The INA3221 power rails of an NVIDIA Jetson board, found under sysfs.

Every Jetson module carries at least one INA3221 (three channels, each a rail).
Its driver is registered under one of two names, with one of two layouts:

* ``ina3221x`` (older L4T, Jetson TX2/Xavier): an iio device,
  ``bus/i2c/drivers/ina3221x/<chip>/iio:deviceN/`` with ``rail_name_<i>``,
  ``in_power<i>_input`` (mW), ``in_voltage<i>_input`` (mV) and
  ``in_current<i>_input`` (mA), channels counted from 0;
* ``ina3221`` (the mainline hwmon driver, Linux ``drivers/hwmon/ina3221.c``, Orin
  and newer L4T): ``bus/i2c/drivers/ina3221/<chip>/hwmon/hwmonN/`` with
  ``in<i>_label``, ``in<i>_enable``, ``in<i>_input`` (bus voltage, mV) and
  ``curr<i>_input`` (mA) for the rail channels 1-3; power is voltage times
  current. ``in4``-``in6`` are the same channels' shunt voltages (µV), not rails.

The hwmon driver adds a **summation channel** (``ina3221_info``, channel 7 of
``in`` and 4 of ``curr``): ``in7_label`` is ``sum of shunt voltages``,
``in7_input`` their sum (µV) and ``curr4_input`` the matching current (mA); there
is no ``curr7_input`` and no ``in7_enable``. It is no rail and is never measured
as one: it is a current, not a power (the summed rails sit at different bus
voltages), it sums the module's input with the rails inside it (Orin Nano:
``VDD_IN`` + ``VDD_CPU_GPU_CV`` + ``VDD_SOC``), which channels it sums is set by
the device tree (``ti,summation-disable``, Linux 6.7; AGX Orin leaves
``VIN_SYS_5V0`` out) and shows in debugfs only, and the driver answers
``ENODATA`` when the summed channels' shunt resistors differ
(``ina3221_summation_shunt_resistor``). :func:`current_sums` reads it as the
total current it is.

The hwmon driver also gives ``update_interval`` (ms) and ``samples`` per chip:
a reading is the last conversion, ``samples`` conversions of each enabled
channel averaged, renewed every ``update_interval`` (channels x samples x (bus
+ shunt conversion time), ``ina3221_reg_to_interval_us``; 7 ms on an Orin with
the reset configuration: 3 channels, 1 sample, 1.1 ms + 1.1 ms), of which each
rail's shunt is sampled for ``samples`` shunt conversion times (1.1 ms each at
reset): a sixth of the interval with three channels on. The iio driver shows
neither (it converts on each read while the chip idles in triggered mode).

A rail is named after its label, lower-cased with every run of other
characters made ``_`` (``VDD_GPU_SOC`` is ``vdd_gpu_soc``), so a GPU rail's name
contains ``gpu``. Its role is ``total`` for the module's input rail
(``VDD_IN``, ``POM_5V_IN``, ``VIN_SYS_5V0``, ``SYS5V``: the others are inside it), ``gpu`` for
a rail feeding the GPU (``VDD_GPU_SOC``, ``VDD_CPU_GPU_CV``, ``GPU``), ``cpu``
for one feeding the CPU only, ``other`` for the rest. (Open question, issue 37:
NVIDIA's sources say the AGX boards monitor no input rail: AGX Xavier's
``SYS5V`` is its 5 V system supply, fed from SYS_VIN_MV while GPU, CPU, SoC, CV
and DDR are fed from SYS_VIN_HV, AGX Xavier design guide DG-09840-001 "Power
Monitor", and AGX Orin's ``VIN_SYS_5V0`` its 5 V I/O rail, jetson_stats issue
344; their module power would then be the sum of the rails. The roles stay as
they are until zeus-compat's ``get_soc``, which reads ``total`` as upstream's
total, follows.) Channels labelled ``NC``
(not connected) are skipped, as are channels switched off (``in<i>_enable`` 0;
the driver answers ``ENODATA`` to a read of their input) and, in the iio
driver, channels the device tree names none (``rail_name_<i>`` reads
``(null)``: no shunt resistor either, so no reading). A hwmon channel the
device tree does not label (the driver then hides ``in<i>_label``) but that is
switched on is a rail named ``in<i>``.
"""

from __future__ import annotations

import errno
import re
from pathlib import Path

import attrs

from zeus_core import DeviceError
from zeus_core.errors import DeviceAbsent

DRIVERS = ("ina3221x", "ina3221")
_CHIP = re.compile(r"\d+-[0-9a-fA-F]{4}")
#: ina3221.c ``ina3221_info``: ``in`` channels 1-3 are the rails (bus voltage, with label and enable),
#: 4-6 their shunt voltages, 7 the sum of the shunt voltages; ``curr`` 1-3 the rails, 4 the sum
RAIL_CHANNELS = (1, 2, 3)
SUM_IN_CHANNEL, SUM_CURR_CHANNEL = 7, 4
#: ina3221.c ``ina3221_read_value``/``ina3221_read_in``: a shunt voltage register step is 40 µV
SHUNT_STEP_UV = 40
#: ina3221.c ``ina3221_read_string``: the summation channel's label
SUM_LABEL = "sum of shunt voltages"
#: labels of a channel that is not a rail: NVIDIA's device trees' ``NC``; the iio driver prints a
#: missing ``ti,rail-name`` as ``(null)`` (``ina3221_show_channel``)
_NOT_A_RAIL = ("NC", "(NULL)")


def _role(label: str) -> str:
    up = label.upper()
    # the module's input holds every other rail (SYS5V and VIN_SYS_5V0: see the open question in the module)
    if up in ("VDD_IN", "SYS5V", "VIN") or up.endswith("_IN") or up.startswith("VIN_"):
        return "total"
    if "GPU" in up:
        return "gpu"
    if "CPU" in up:
        return "cpu"
    return "other"


def rail_name(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_") or "rail"


def _read_text(path: Path) -> str:
    """One sysfs file's text (the one place that reads the driver, so a test can stand in for it)."""
    return path.read_text()


def read_number(path: Path) -> float:
    """A sysfs value, as a number; a clear :class:`DeviceError` naming the file otherwise."""
    try:
        text = _read_text(path).strip()
    except PermissionError:
        raise DeviceError(
            f"cannot read {path}: permission denied. Run zeus as root or make the INA3221 files "
            f"readable (sudo chmod o+r {path.parent}/*_input)"
        ) from None
    except OSError as e:
        if e.errno == errno.ENODATA:
            raise DeviceError(
                f"cannot read {path}: no data (ENODATA): the INA3221 driver answers so for a channel "
                "switched off (in<i>_enable 0), and for the summation channel when the summed "
                "channels' shunt resistors differ"
            ) from None
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
    #: hwmon: the chip's ``update_interval`` in seconds (how often a reading is renewed) and ``samples``
    #: (conversions averaged into one reading); None where the driver does not say (iio)
    update_interval_s: float | None = None
    samples: int | None = None
    #: hwmon: ``shunt<i>_resistor`` (µΩ); a current reading moves in steps of 40 µV over it
    shunt_uohm: int | None = None

    @property
    def current_step_a(self) -> float | None:
        """The smallest change of current the chip reports (A): the shunt voltage's 40 µV step over the
        shunt resistor (ina3221.c ``ina3221_read_curr``: 8 mA at 5 mΩ, 20 mA at 2 mΩ)."""
        return None if not self.shunt_uohm else SHUNT_STEP_UV / self.shunt_uohm

    def read_w(self) -> float:
        if self.power_file is not None:
            return read_number(self.power_file) / 1000.0
        assert self.voltage_file is not None and self.current_file is not None
        return read_number(self.voltage_file) * read_number(self.current_file) / 1e6


def _label(path: Path) -> str:
    try:
        return _read_text(path).strip().strip("\0")
    except OSError as e:
        raise DeviceError(f"cannot read the rail name {path}: {e.strerror or e}") from None


def _iio_rails(folder: Path, chip: str) -> list[Rail]:
    out = []
    for label_file in sorted(folder.glob("rail_name_*")):
        idx = label_file.name[len("rail_name_") :]
        label = _label(label_file)
        if not label or label.upper() in _NOT_A_RAIL:
            continue
        power = folder / f"in_power{idx}_input"
        volt, curr = folder / f"in_voltage{idx}_input", folder / f"in_current{idx}_input"
        if not power.exists() and not (volt.exists() and curr.exists()):
            raise DeviceError(
                f"rail {label} ({label_file}) has neither {power.name} nor both {volt.name} and {curr.name}: "
                "the INA3221 driver exposes no reading for it"
            )
        out.append(
            Rail(
                rail_name(label),
                label,
                _role(label),
                chip,
                power if power.exists() else None,
                None if power.exists() else volt,
                None if power.exists() else curr,
            )
        )
    return out


def _optional_number(path: Path) -> float | None:
    """A chip attribute the driver may not have (older kernels): None where absent."""
    return read_number(path) if path.exists() else None


def _hwmon_rails(folder: Path, chip: str) -> list[Rail]:
    interval_ms, samples = _optional_number(folder / "update_interval"), _optional_number(folder / "samples")
    interval_s = None if interval_ms is None else interval_ms / 1000.0
    out = []
    for idx in RAIL_CHANNELS:  # in7_label ("sum of shunt voltages") is the summation channel: no rail
        label_file, volt, curr = folder / f"in{idx}_label", folder / f"in{idx}_input", folder / f"curr{idx}_input"
        if label_file.exists():
            label = _label(label_file)
            if not label or label.upper() in _NOT_A_RAIL:
                continue
        elif volt.exists():
            label = f"in{idx}"  # the device tree names no label: ina3221_is_visible hides in<i>_label
        else:
            continue
        enable = folder / f"in{idx}_enable"
        if enable.exists() and read_number(enable) == 0:
            continue  # switched off (or disconnected in the device tree): its inputs answer ENODATA
        missing = [p.name for p in (volt, curr) if not p.exists()]
        if missing:
            raise DeviceError(
                f"rail {label} ({label_file if label_file.exists() else volt}) has no "
                f"{' or '.join(missing)}: the INA3221 driver exposes no reading for it"
            )
        shunt = _optional_number(folder / f"shunt{idx}_resistor")
        out.append(
            Rail(
                rail_name(label),
                label,
                _role(label),
                chip,
                None,
                volt,
                curr,
                interval_s,
                None if samples is None else int(samples),
                None if shunt is None else int(shunt),
            )
        )
    return out


def _hwmon_folders(chip: Path) -> list[Path]:
    return sorted([*chip.glob("hwmon/hwmon*"), *chip.glob("hwmon[0-9]*")])


def _chips(root: Path) -> list[tuple[str, Path]]:
    drivers = root / "bus" / "i2c" / "drivers"
    return [
        (d, chip)
        for d in DRIVERS
        if (drivers / d).is_dir()
        for chip in sorted(p for p in (drivers / d).iterdir() if _CHIP.fullmatch(p.name) and p.is_dir())
    ]


@attrs.frozen
class CurrentSum:
    """A hwmon chip's summation channel: ``curr4_input`` (mA), the sum of the currents of the channels the
    device tree sums, and its ``in7_input`` (µV). A current, never a rail (see the module)."""

    chip: str
    current_file: Path
    shunt_voltage_file: Path

    def read_a(self) -> float | None:
        """Amperes now; None while the driver has no sum (ENODATA: the summed shunts' resistors differ;
        the simulated tree leaves the file empty, a plain file cannot fail a read)."""
        try:
            text = _read_text(self.current_file).strip()
        except OSError as e:
            if e.errno == errno.ENODATA:
                return None
            raise DeviceError(f"cannot read {self.current_file}: {e.strerror or e}") from None
        return read_number(self.current_file) / 1000.0 if text else None


def current_sums(root: Path) -> list[CurrentSum]:
    """Every hwmon chip's summation channel (recognised by its channel, 7, and label), chip by chip."""
    out = []
    for _driver, chip in _chips(root):
        for folder in _hwmon_folders(chip):
            label = folder / f"in{SUM_IN_CHANNEL}_label"
            current = folder / f"curr{SUM_CURR_CHANNEL}_input"
            if label.exists() and current.exists() and _label(label).lower() == SUM_LABEL:
                out.append(CurrentSum(chip.name, current, folder / f"in{SUM_IN_CHANNEL}_input"))
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
    for _driver, chip in _chips(root):
        for folder in sorted(chip.glob("iio:device*")):
            rails += _iio_rails(folder, chip.name)
        for folder in _hwmon_folders(chip):
            rails += _hwmon_rails(folder, chip.name)
    if not rails:
        raise DeviceError(
            f"the INA3221 driver in {', '.join(map(str, found))} lists no connected rail "
            "(no rail_name_<i> or in<i>_label other than NC, no channel switched on)"
        )
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

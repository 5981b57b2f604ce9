"""Writes a simulated Jetson sysfs tree (INA3221 rails, device-tree model, thermal zones).

For tests and demos on a machine without a Jetson: point the ``jetson`` device
at it with ``sysfs_root``. Both layouts the plugin reads are written as the
drivers lay them out (:mod:`zeus_plugins_jetson.rails`): ``hwmon`` (driver
``ina3221``, channels from 1, bus voltage in mV and current in mA) and ``iio``
(driver ``ina3221x``, channels from 0, ``in_power`` in mW next to voltage and
current). Rails are spread three to a chip (``1-0040``, ``1-0041``, ...) as on
the boards. Every rail's bus voltage is 5 V; its current is chosen so that
voltage times current is the power asked for (to 1 mA).

    python -m zeus_plugins_jetson.fake_sysfs /tmp/jetson --layout hwmon --rail VDD_IN=7.5 --rail VDD_CPU_GPU_CV=2.5
    zeus monitor -d jetson --set jetson.sysfs_root=/tmp/jetson
"""

from __future__ import annotations

import argparse
from pathlib import Path

#: Orin Nano / Orin NX rails (hwmon) and AGX Xavier rails (iio), in watts at a light load
HWMON_RAILS = {"VDD_IN": 7.5, "VDD_CPU_GPU_CV": 2.5, "VDD_SOC": 1.8}
IIO_RAILS = {"GPU": 4.0, "CPU": 2.0, "SOC": 1.5, "CV": 0.5, "VDDRQ": 0.8, "SYS5V": 9.5}
BUS_MV = 5000
MODELS = {"hwmon": "NVIDIA Jetson Orin Nano Developer Kit", "iio": "NVIDIA Jetson AGX Xavier Developer Kit"}
THERMAL = {"cpu-thermal": 41.5, "gpu-thermal": 43.0, "tj-thermal": 44.25}


def _write(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\n")


def _current_ma(watts: float) -> int:
    return round(watts * 1e6 / BUS_MV)


def write_tree(root: str | Path, layout: str = "hwmon", rails: dict[str, float] | None = None,
               power_files: bool = True, model: str | None = None, thermal: dict[str, float] | None = None) -> Path:
    """Write the tree under ``root`` and return ``root``. ``rails``: label -> watts, three per chip
    (``NC`` fills an unused channel). ``power_files`` (iio only): write ``in_power<i>_input`` too
    (older kernels lack it, and power is then voltage times current)."""
    if layout not in ("hwmon", "iio"):
        raise ValueError(f"layout must be hwmon or iio, got {layout!r}")
    root = Path(root)
    rails = dict(HWMON_RAILS if layout == "hwmon" else IIO_RAILS) if rails is None else rails
    driver = root / "bus" / "i2c" / "drivers" / ("ina3221" if layout == "hwmon" else "ina3221x")
    for name in ("bind", "unbind", "uevent"):
        _write(driver / name, "")
    labels = list(rails.items())
    for chip_no in range(0, max(1, len(labels)), 3):
        chip = driver / f"1-{0x40 + chip_no // 3:04x}"
        for ch, (label, _watts) in enumerate(labels[chip_no:chip_no + 3]):
            if layout == "hwmon":
                folder = chip / "hwmon" / f"hwmon{3 + chip_no // 3}"
                _write(folder / "name", "ina3221")
                _write(folder / f"in{ch + 1}_label", label)
                _write(folder / f"in{ch + 1}_enable", 1)
                _write(folder / f"in{ch + 4}_input", 40)  # shunt voltage (µV): no label, not a rail
                _write(folder / f"shunt{ch + 1}_resistor", 5000)
            else:
                folder = chip / f"iio:device{chip_no // 3}"
                _write(folder / "name", "ina3221x")
                _write(folder / f"rail_name_{ch}", label)
                _write(folder / f"crit_current_limit_{ch}", 6000)
        set_rails(root, {label: w for label, w in labels[chip_no:chip_no + 3]}, power_files=power_files)
    _write(root / "firmware" / "devicetree" / "base" / "model", (model or MODELS[layout]) + "\0")
    for i, (zone, celsius) in enumerate((THERMAL if thermal is None else thermal).items()):
        _write(root / "class" / "thermal" / f"thermal_zone{i}" / "type", zone)
        _write(root / "class" / "thermal" / f"thermal_zone{i}" / "temp", int(celsius * 1000))
    return root


def _rail_files(root: Path) -> dict[str, tuple[str, Path, str]]:
    """label -> (layout, folder, channel) of every rail in the tree."""
    out = {}
    drivers = root / "bus" / "i2c" / "drivers"
    for f in drivers.glob("ina3221/*/hwmon/hwmon*/in*_label"):
        out[f.read_text().strip()] = ("hwmon", f.parent, f.name[2:-len("_label")])
    for f in drivers.glob("ina3221x/*/iio:device*/rail_name_*"):
        out[f.read_text().strip()] = ("iio", f.parent, f.name[len("rail_name_"):])
    return out


def set_rails(root: str | Path, watts: dict[str, float], power_files: bool | None = None) -> None:
    """Change rails' readings (label -> watts) in a tree: the load changes."""
    files = _rail_files(Path(root))
    for label, w in watts.items():
        if label.upper() == "NC":
            continue
        layout, folder, ch = files[label]
        if layout == "hwmon":
            _write(folder / f"in{ch}_input", BUS_MV)
            _write(folder / f"curr{ch}_input", _current_ma(w))
        else:
            _write(folder / f"in_voltage{ch}_input", BUS_MV)
            _write(folder / f"in_current{ch}_input", _current_ma(w))
            power = folder / f"in_power{ch}_input"
            if power_files or (power_files is None and power.exists()):
                _write(power, round(w * 1000))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m zeus_plugins_jetson.fake_sysfs",
                                description="Write a simulated Jetson sysfs tree; then use it with "
                                            "zeus monitor -d jetson --set jetson.sysfs_root=DIR")
    p.add_argument("dir", help="folder to write the tree into (created)")
    p.add_argument("--layout", choices=("hwmon", "iio"), default="hwmon",
                   help="hwmon: driver ina3221 (Orin, newer L4T); iio: driver ina3221x (TX2, Xavier)")
    p.add_argument("--rail", action="append", default=[], metavar="LABEL=WATTS",
                   help="a rail and its power (repeatable); default: a typical board of the layout")
    p.add_argument("--no-power-files", action="store_true", help="iio: omit in_power<i>_input (power = voltage x current)")
    a = p.parse_args(argv)
    rails = {}
    for spec in a.rail:
        label, sep, value = spec.partition("=")
        try:
            if not sep or not label.strip():
                raise ValueError
            rails[label.strip()] = float(value)
        except ValueError:
            p.error(f"--rail {spec!r}: expected LABEL=WATTS, e.g. VDD_IN=7.5")
        if rails[label.strip()] < 0:
            p.error(f"--rail {spec!r}: watts must not be negative")
    root = write_tree(a.dir, a.layout, rails or None, power_files=not a.no_power_files)
    print(f"simulated Jetson ({a.layout} layout) in {root}; use it with --set jetson.sysfs_root={Path(root).resolve()}")


if __name__ == "__main__":
    main()

"""Writes a simulated Jetson sysfs tree (INA3221 rails, device-tree model, thermal zones).

For tests and demos on a machine without a Jetson: point the ``jetson`` device
at it with ``sysfs_root``. Both drivers the plugin reads are written file for
file as they lay out sysfs (:mod:`zeus_plugins_jetson.rails`); each quirk below
names its source in the driver:

* ``hwmon``: the mainline ``ina3221`` driver (Linux ``drivers/hwmon/ina3221.c``,
  Orin on L4T 35/36), ``bus/i2c/drivers/ina3221/<chip>/hwmon/hwmonN/``. Per
  chip: ``name``, ``samples``, ``update_interval`` (ms); per channel 1-3:
  ``in<i>_label`` (only where the device tree labels it), ``in<i>_enable``,
  ``in<i>_input`` (bus voltage, mV), ``curr<i>_input`` (mA), ``curr<i>_crit``,
  ``curr<i>_crit_alarm``, ``curr<i>_max``, ``curr<i>_max_alarm``,
  ``shunt<i>_resistor`` (µΩ), ``in<i+3>_input`` (its shunt voltage, µV); and the
  summation channel: ``in7_input`` (sum of shunt voltages, µV), ``in7_label``
  (``sum of shunt voltages``), ``curr4_input`` (sum of currents, mA),
  ``curr4_crit``, ``curr4_crit_alarm``. There is no ``curr7_input``, no
  ``in7_enable``, no ``in0_*``.
* ``iio``: NVIDIA's ``ina3221x`` driver (L4T 32 ``drivers/staging/iio/meter/ina3221.c``,
  TX2/Xavier/Nano), ``bus/i2c/drivers/ina3221x/<chip>/iio:deviceN/``, channels
  0-2: ``rail_name_<i>``, ``in_voltage<i>_input`` (mV), ``in_current<i>_input``
  (mA), ``in_power<i>_input`` (mW), their ``_trigger_input`` twins,
  ``crit_power_limit_<i>`` ("<n> mw"), ``crit_current_limit_<i>`` and
  ``warn_current_limit_<i>`` ("<n> ma"), ``ui_input_<i>`` ("<mV> <mA>"),
  ``running_mode``. No summation channel.

The measurement quirk, off by default: :func:`set_load_wave` puts on a hwmon rail a load
that is busy while the chip converts that rail's shunt voltage and idle for the rest of each
``update_interval`` (the chip converts the enabled channels one after another, bus then shunt,
``ina3221_reg_to_interval_us``: the shunt's part is ``1 / (2 x enabled channels)``). The rail
then reads the busy draw at every renewal while it draws far less on average: the worst case
of a reading that sees only part of each interval. :func:`true_power_w` is what a rail truly
draws (its reading where no wave is on).

Rails are spread three to a chip (``1-0040``, ``1-0041``, ...) as on the boards.
Every rail's bus voltage is 5 V; its current is chosen so that voltage times
current is the power asked for (to 1 mA), or, with ``quantize``, rounded as the
chip and driver round it (shunt voltage in steps of 40 µV, so current in steps of
40 µV over the shunt resistor: 8 mA at the Orin Nano's 5 mΩ).

In ``rails`` (label -> watts), a watts of ``None`` is a channel switched off
(``in<i>_enable`` 0); a label starting with ``#`` is a channel the device tree
does not label (no ``in<i>_label``: the driver hides it), and ``#...: None`` is a
channel the device tree disconnects (``status = "disabled"``: no label, switched
off, as AGX Orin's second chip in mainline's ``tegra234-p3701.dtsi``).

    python -m zeus_plugins_jetson.fake_sysfs /tmp/jetson --layout hwmon --rail VDD_IN=7.5 --rail VDD_CPU_GPU_CV=2.5
    zeus monitor -d jetson --set jetson.sysfs_root=/tmp/jetson
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

#: Orin Nano / Orin NX rails (hwmon) and AGX Xavier rails (iio), in watts at a light load
HWMON_RAILS: dict[str, float | None] = {"VDD_IN": 7.5, "VDD_CPU_GPU_CV": 2.5, "VDD_SOC": 1.8}
IIO_RAILS: dict[str, float | None] = {"GPU": 4.0, "CPU": 2.0, "SOC": 1.5, "CV": 0.5, "VDDRQ": 0.8, "SYS5V": 9.5}
#: AGX Orin as mainline's tegra234-p3701.dtsi describes it: 2 mΩ shunts, VIN_SYS_5V0 left out of the
#: summation (``ti,summation-disable``), the second chip's channels 1 and 3 disconnected
AGX_ORIN_RAILS: dict[str, float | None] = {
    "VDD_GPU_SOC": 9.0,
    "VDD_CPU_CV": 3.2,
    "VIN_SYS_5V0": 4.4,
    "#off1": None,
    "VDDQ_VDD2_1V8AO": 1.1,
    "#off2": None,
}
AGX_ORIN_SHUNT_UOHM, AGX_ORIN_SUMMATION_DISABLE = 2000, ("VIN_SYS_5V0",)
AGX_ORIN_MODEL = "NVIDIA Jetson AGX Orin Developer Kit"
BUS_MV = 5000
MODELS = {"hwmon": "NVIDIA Jetson Orin Nano Developer Kit", "iio": "NVIDIA Jetson AGX Xavier Developer Kit"}
THERMAL = {"cpu-thermal": 41.5, "gpu-thermal": 43.0, "tj-thermal": 44.25}

#: the shunt resistor written (µΩ): the Orin Nano's ``shunt-resistor-micro-ohms`` (mainline
#: ``tegra234-p3767.dtsi``; ina3221.c's ``INA3221_RSHUNT_DEFAULT``, 10000, is for a node without one)
SHUNT_UOHM = 5000
#: ina3221.c: ``INA3221_CONFIG_DEFAULT`` 0x7127: 1 sample (AVG 0), bus and shunt conversion
#: times 1.1 ms each (CT index 4 of ``ina3221_conv_time``)
SAMPLES = 1
CONVERSION_US = 1100
AVG_SAMPLES = (1, 4, 16, 64, 128, 256, 512, 1024)  # ina3221.c: ina3221_avg_samples
CONV_TIMES_US = (140, 204, 332, 588, 1100, 2116, 4156, 8244)  # ina3221.c: ina3221_conv_time
#: ina3221.c: the CRIT/WARN registers reset to 0x7FF8, the summation CRIT to 0x7FFE: 4095 (16383 for
#: the sum) steps of 40 µV
_CRIT_UV, _CRIT_SUM_UV = 4095 * 40, 16383 * 40
#: what the fake writes where the driver's read fails with ENODATA (a channel switched off, a summation
#: whose shunts differ): a plain file cannot fail a read, so it is left empty, and a reader that
#: reads it gets no number, as on the board
NO_DATA = ""
#: at the tree's root, not in any driver folder: what set_rails needs per chip (resistors, the summation)
_STATE = ".zeus-fake-ina3221.json"


def _write(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\n" if value != NO_DATA else "")


def _load_state(root: Path) -> dict[str, Any]:
    try:
        return json.loads((root / _STATE).read_text())
    except FileNotFoundError:
        return {}


def _save_state(root: Path, folder: Path, chip_state: dict[str, Any]) -> None:
    state = _load_state(root)
    state[str(folder.relative_to(root))] = chip_state
    (root / _STATE).write_text(json.dumps(state))


def _current_ma(watts: float) -> int:
    return round(watts * 1e6 / BUS_MV)


def _round_closest(a: float, b: float) -> int:
    """The kernel's DIV_ROUND_CLOSEST for the signs used here."""
    return int((a + b / 2) // b) if a >= 0 else -int((-a + b / 2) // b)


def update_interval_ms(enabled: int, samples: int = SAMPLES, conversion_us: int = CONVERSION_US) -> int:
    """ina3221.c ``ina3221_reg_to_interval_us``: channels x samples x (bus + shunt conversion time), in
    µs; ``hwmon_chip_update_interval`` gives it in ms, DIV_ROUND_CLOSEST."""
    return _round_closest(enabled * samples * 2 * conversion_us, 1000)


def write_tree(
    root: str | Path,
    layout: str = "hwmon",
    rails: dict[str, float | None] | None = None,
    power_files: bool = True,
    model: str | None = None,
    thermal: dict[str, float] | None = None,
    *,
    shunt_uohm: int | dict[str, int] = SHUNT_UOHM,
    samples: int = SAMPLES,
    conversion_us: int = CONVERSION_US,
    summation_disable: tuple[str, ...] = (),
    quantize: bool = False,
) -> Path:
    """Write the tree under ``root`` and return ``root``. ``rails``: label -> watts, three per chip
    (``NC`` fills an unused channel the way NVIDIA's L4T device trees label it; ``None`` and ``#`` labels:
    see the module). ``power_files`` (iio only): write ``in_power<i>_input`` too (older kernels lack it,
    and power is then voltage times current).

    hwmon only: ``shunt_uohm`` (every channel's, or label -> µΩ; channels whose resistors differ leave
    the chip without a summation, ina3221.c ``ina3221_summation_shunt_resistor``); ``samples`` (averaging,
    one of 1, 4, ..., 1024) and ``conversion_us`` (bus and shunt conversion time, one of the chip's eight)
    give ``update_interval``; ``summation_disable``: labels left out of the sum (``ti,summation-disable``,
    Linux 6.7); ``quantize``: currents and voltages in the chip's steps (iio too)."""
    if layout not in ("hwmon", "iio"):
        raise ValueError(f"layout must be hwmon or iio, got {layout!r}")
    if samples not in AVG_SAMPLES or conversion_us not in CONV_TIMES_US:
        raise ValueError(f"samples must be one of {AVG_SAMPLES} and conversion_us one of {CONV_TIMES_US}")
    root = Path(root)
    rails = dict(HWMON_RAILS if layout == "hwmon" else IIO_RAILS) if rails is None else rails
    driver = root / "bus" / "i2c" / "drivers" / ("ina3221" if layout == "hwmon" else "ina3221x")
    for name in ("bind", "unbind", "uevent"):
        _write(driver / name, "")
    labels = list(rails.items())
    for chip_no in range(0, max(1, len(labels)), 3):
        chip = driver / f"1-{0x40 + chip_no // 3:04x}"
        group = labels[chip_no : chip_no + 3]
        if layout == "hwmon":
            folder = chip / "hwmon" / f"hwmon{3 + chip_no // 3}"
            _write_hwmon_chip(folder, chip.name, root, group, shunt_uohm, samples, conversion_us, summation_disable, quantize)
        else:
            folder = chip / f"iio:device{chip_no // 3}"
            _write(folder / "name", "ina3221x")  # iio_dev->name: the i2c id
            _write(folder / "running_mode", 0)  # ina3221_get_mode: 0 triggered (the default), 1 continuous
            _save_state(root, folder, {"quantize": quantize, "shunt_mohm": _mohm(shunt_uohm)})
            for ch in range(3):  # the attributes are static: three channels, named or not
                label = group[ch][0] if ch < len(group) else "#unused"
                # ina3221_show_channel CHANNEL_NAME: "%s\n" of the DT's ti,rail-name, "(null)" where none
                _write(folder / f"rail_name_{ch}", "(null)" if label.startswith("#") else label)
                _write(folder / f"crit_current_limit_{ch}", "6000 ma")  # "%d ma\n"
                _write(folder / f"warn_current_limit_{ch}", "5000 ma")
                _write(folder / f"crit_power_limit_{ch}", f"{6000 * BUS_MV // 1000} mw")  # "%d mw\n"
                if label.startswith("#"):  # no ti,rail-name: no shunt resistor, no reading to make of it
                    for name in (f"in_voltage{ch}_input", f"in_current{ch}_input", f"in_power{ch}_input", f"ui_input_{ch}"):
                        _write(folder / name, NO_DATA)
        for ch, (_label, w) in enumerate(group, start=1 if layout == "hwmon" else 0):
            if w is not None and not (layout == "iio" and _label.startswith("#")):
                _set_channel(root, layout, folder, ch, w, power_files)
        if layout == "hwmon":
            _write_summation(root, folder)
    _write(root / "firmware" / "devicetree" / "base" / "model", (model or MODELS[layout]) + "\0")
    for i, (zone, celsius) in enumerate((THERMAL if thermal is None else thermal).items()):
        _write(root / "class" / "thermal" / f"thermal_zone{i}" / "type", zone)
        _write(root / "class" / "thermal" / f"thermal_zone{i}" / "temp", int(celsius * 1000))
    return root


def _mohm(shunt_uohm: int | dict[str, int]) -> int:
    first = shunt_uohm if isinstance(shunt_uohm, int) else next(iter(shunt_uohm.values()), SHUNT_UOHM)
    return max(1, first // 1000)


def _write_hwmon_chip(
    folder: Path,
    chip: str,
    root: Path,
    group: list[tuple[str, float | None]],
    shunt_uohm: int | dict[str, int],
    samples: int,
    conversion_us: int,
    summation_disable: tuple[str, ...],
    quantize: bool,
) -> None:
    _write(folder / "name", "ina3221")  # devm_hwmon_device_register_with_info(dev, client->name, ...)
    channels: list[dict[str, Any]] = []
    for ch in range(1, 4):
        label, watts = group[ch - 1] if ch <= len(group) else ("#unused", None)
        disconnected = label.startswith("#") and watts is None
        resistor = shunt_uohm if isinstance(shunt_uohm, int) else shunt_uohm.get(label, SHUNT_UOHM)
        channels.append(
            {
                "label": None if label.startswith("#") else label,
                "enabled": watts is not None,
                "disconnected": disconnected,
                "shunt_uohm": resistor,
                "summed": label not in summation_disable,
            }
        )
        # ina3221_is_visible: in<i>_label only where the device tree gives a label
        if not label.startswith("#"):
            _write(folder / f"in{ch}_label", label)
        # ina3221_read_in hwmon_in_enable: the CONFIG register's CHx_EN bit, cleared at probe for a
        # disconnected input (ina3221_probe)
        _write(folder / f"in{ch}_enable", int(watts is not None))
        # the extra attribute group ina3221_attrs: shunt<i>_resistor, µΩ (ina3221_shunt_show)
        _write(folder / f"shunt{ch}_resistor", resistor)
        # ina3221_read_curr: curr<i>_crit/max from the CRIT/WARN registers (reset value), alarms 0
        # while the channel is off
        _write(folder / f"curr{ch}_crit", _round_closest(_CRIT_UV * 1000, resistor))
        _write(folder / f"curr{ch}_max", _round_closest(_CRIT_UV * 1000, resistor))
        _write(folder / f"curr{ch}_crit_alarm", 0)
        _write(folder / f"curr{ch}_max_alarm", 0)
        for name in (f"in{ch}_input", f"curr{ch}_input", f"in{ch + 3}_input"):
            _write(folder / name, NO_DATA)  # ina3221_read_in/_curr: -ENODATA while the channel is off
    # ina3221_summation_shunt_resistor: the summed, connected channels' common resistor, 0 if they differ
    summed = {c["shunt_uohm"] for c in channels if not c["disconnected"] and c["summed"]}
    sum_uohm = summed.pop() if len(summed) == 1 else 0
    enabled = sum(c["enabled"] for c in channels)
    # ina3221_read_chip: samples and update_interval (ms) from the CONFIG register
    _write(folder / "samples", samples)
    _write(folder / "update_interval", update_interval_ms(enabled, samples, conversion_us))
    # ina3221_read_string: channel 7 is "sum of shunt voltages"; it has a label and an input, no enable
    _write(folder / "in7_label", "sum of shunt voltages")
    _write(folder / "curr4_crit", _round_closest(_CRIT_SUM_UV * 1000, sum_uohm) if sum_uohm else NO_DATA)
    _write(folder / "curr4_crit_alarm", 0)
    _save_state(root, folder, {"chip": chip, "channels": channels, "sum_uohm": sum_uohm, "quantize": quantize})
    # Linux 6.7 ina3221_probe: debugfs <debugfs>/ina3221-<i2c device>/in<i>_summation_disable (0-based), Y/N
    debug = root / "kernel" / "debug" / f"ina3221-{chip}"
    for i, c in enumerate(channels):
        _write(debug / f"in{i}_summation_disable", "N" if c["summed"] else "Y")


def _rail_files(root: Path) -> dict[str, list[tuple[str, Path, str]]]:
    """label -> [(layout, folder, channel)] of every rail in the tree (a label may be on two chips)."""
    out: dict[str, list[tuple[str, Path, str]]] = {}
    drivers = root / "bus" / "i2c" / "drivers"
    for f in sorted(drivers.glob("ina3221/*/hwmon/hwmon*/in*_label")):
        if f.name != "in7_label":  # the summation channel is no rail
            out.setdefault(f.read_text().strip(), []).append(("hwmon", f.parent, f.name[2 : -len("_label")]))
    for f in sorted(drivers.glob("ina3221x/*/iio:device*/rail_name_*")):
        out.setdefault(f.read_text().strip(), []).append(("iio", f.parent, f.name[len("rail_name_") :]))
    return out


def set_rails(root: str | Path, watts: dict[str, float], power_files: bool | None = None) -> None:
    """Change rails' readings (label -> watts) in a tree: the load changes. A chip's summation channel
    follows its rails. A label on two chips changes on both."""
    root = Path(root)
    files = _rail_files(root)
    missing = [label for label in watts if label not in files]
    if missing:
        raise KeyError(f"no rail labelled {missing} in {root}; it has {sorted(files)}")
    touched: dict[Path, str] = {}
    for label, w in watts.items():
        for layout, folder, ch in files[label]:
            _set_channel(root, layout, folder, int(ch), w, power_files)
            touched[folder] = layout
    for folder, layout in touched.items():
        if layout == "hwmon":
            _write_summation(root, folder)
    state = _load_state(root)
    if any(label in state.get("waves", {}) for label in watts):  # a load set plainly ends its wave
        state["waves"] = {k: v for k, v in state["waves"].items() if k not in watts}
        (root / _STATE).write_text(json.dumps(state))


def set_load_wave(root: str | Path, label: str, busy_w: float, idle_w: float) -> float:
    """Put a load on hwmon rail ``label`` that draws ``busy_w`` while the chip converts its shunt and
    ``idle_w`` otherwise (see the module): the rail reads ``busy_w``; returns the mean it truly draws."""
    root = Path(root)
    places = [(f, ch) for layout, f, ch in _rail_files(root).get(label, []) if layout == "hwmon"]
    if not places:
        raise KeyError(f"no hwmon rail labelled {label!r} in {root}")
    folder, _ = places[0]
    enabled = sum(c["enabled"] for c in _load_state(root)[str(folder.relative_to(root))]["channels"])
    share = 1.0 / (2 * max(enabled, 1))
    mean = busy_w * share + idle_w * (1.0 - share)
    set_rails(root, {label: busy_w})
    state = _load_state(root)
    state.setdefault("waves", {})[label] = mean
    (root / _STATE).write_text(json.dumps(state))
    return mean


def true_power_w(root: str | Path, label: str) -> float:
    """What rail ``label`` truly draws (W): the mean of its load wave where one is on, else its reading."""
    root = Path(root)
    wave = _load_state(root).get("waves", {}).get(label)
    if wave is not None:
        return float(wave)
    _layout, folder, ch = _rail_files(root)[label][0]
    if _layout == "hwmon":
        return float((folder / f"in{ch}_input").read_text()) * float((folder / f"curr{ch}_input").read_text()) / 1e6
    return float((folder / f"in_voltage{ch}_input").read_text()) * float((folder / f"in_current{ch}_input").read_text()) / 1e6


def _set_channel(root: Path, layout: str, folder: Path, ch: int, w: float, power_files: bool | None) -> None:
    state = _load_state(root)[str(folder.relative_to(root))]
    if layout == "hwmon":
        c = state["channels"][ch - 1]
        if not c["enabled"]:
            return  # switched off: its files stay without data
        shunt_uv = _current_ma(w) * c["shunt_uohm"] / 1000
        if state["quantize"]:
            shunt_uv = round(shunt_uv / 40) * 40  # ina3221_read_value: 12 bits + sign, LSB 40 µV
        c["shunt_uv"] = shunt_uv
        _write(folder / f"in{ch}_input", BUS_MV)  # bus voltage, mV, LSB 8 mV: 5000 mV is 625 steps
        # ina3221_read_curr: DIV_ROUND_CLOSEST(shunt nV, shunt µΩ) is mA
        _write(folder / f"curr{ch}_input", _round_closest(shunt_uv * 1000, c["shunt_uohm"]))
        _write(folder / f"in{ch + 3}_input", round(shunt_uv))  # shunt voltage, µV
        _save_state(root, folder, state)
    else:
        current = _current_ma(w)
        if state["quantize"]:  # shuntv_register_to_ma: 40 µV steps over the DT's ti,shunt-resistor-mohm
            current = _round_closest(round(current * state["shunt_mohm"] / 40) * 40, state["shunt_mohm"])
        _write(folder / f"in_voltage{ch}_input", BUS_MV)  # busv_register_to_mv: mV
        _write(folder / f"in_current{ch}_input", current)  # shuntv_register_to_ma: mA
        # the "trigger" channels (extend_name): 0 while the chip sleeps in triggered mode, the default
        _write(folder / f"in_current{ch}_trigger_input", 0)
        _write(folder / f"in_power{ch}_trigger_input", 0)
        _write(folder / f"ui_input_{ch}", f"{BUS_MV} {current}")  # VBUS_VOLTAGE_CURRENT: "%d %d\n", mV mA
        power = folder / f"in_power{ch}_input"
        if power_files or (power_files is None and power.exists()):
            _write(power, BUS_MV * current // 1000)  # ina3221_get_channel_power: mV x mA / 1000, mW


def _write_summation(root: Path, folder: Path) -> None:
    """in7_input and curr4_input from the chip's summed channels (ina3221_read_in channel 6, ina3221_read_curr
    channel 3): the chip adds the shunt voltages of the channels its SCC bits name (ina3221_resume); a
    disconnected channel's shunt reads 0. ENODATA where the summed channels' resistors differ."""
    state = _load_state(root)[str(folder.relative_to(root))]
    if not state["sum_uohm"]:
        _write(folder / "in7_input", NO_DATA)
        _write(folder / "curr4_input", NO_DATA)
        return
    total_uv = sum(c.get("shunt_uv", 0) for c in state["channels"] if c["summed"] and c["enabled"])
    _write(folder / "in7_input", round(total_uv))
    _write(folder / "curr4_input", _round_closest(total_uv * 1000, state["sum_uohm"]))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m zeus_plugins_jetson.fake_sysfs",
        description="Write a simulated Jetson sysfs tree; then use it with zeus monitor -d jetson --set jetson.sysfs_root=DIR",
    )
    p.add_argument("dir", help="folder to write the tree into (created)")
    p.add_argument(
        "--layout",
        choices=("hwmon", "iio"),
        default="hwmon",
        help="hwmon: driver ina3221 (Orin, newer L4T); iio: driver ina3221x (TX2, Xavier)",
    )
    p.add_argument(
        "--rail",
        action="append",
        default=[],
        metavar="LABEL=WATTS",
        help="a rail and its power (repeatable); default: a typical board of the layout",
    )
    p.add_argument(
        "--agx-orin",
        action="store_true",
        help="hwmon: AGX Orin as mainline Linux describes it (two chips, disconnected channels, 2 mOhm shunts)",
    )
    p.add_argument("--quantize", action="store_true", help="currents in the chip's 40 uV shunt steps, as on a board")
    p.add_argument("--no-power-files", action="store_true", help="iio: omit in_power<i>_input (power = voltage x current)")
    a = p.parse_args(argv)
    rails: dict[str, float | None] = {}
    for spec in a.rail:
        label, sep, value = spec.partition("=")
        try:
            if not sep or not label.strip():
                raise ValueError
            rails[label.strip()] = float(value)
        except ValueError:
            p.error(f"--rail {spec!r}: expected LABEL=WATTS, e.g. VDD_IN=7.5")
        if (rails[label.strip()] or 0.0) < 0:
            p.error(f"--rail {spec!r}: watts must not be negative")
    if a.agx_orin:
        if a.layout != "hwmon" or rails:
            p.error("--agx-orin writes its own hwmon rails: no --rail, no --layout iio")
        root = write_tree(
            a.dir,
            "hwmon",
            AGX_ORIN_RAILS,
            model=AGX_ORIN_MODEL,
            shunt_uohm=AGX_ORIN_SHUNT_UOHM,
            summation_disable=AGX_ORIN_SUMMATION_DISABLE,
            quantize=a.quantize,
        )
    else:
        root = write_tree(a.dir, a.layout, rails or None, power_files=not a.no_power_files, quantize=a.quantize)
    print(f"simulated Jetson ({a.layout} layout) in {root}; use it with --set jetson.sysfs_root={Path(root).resolve()}")


if __name__ == "__main__":
    main()

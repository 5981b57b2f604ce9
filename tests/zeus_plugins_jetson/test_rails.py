"""The jetson device on simulated sysfs trees: both drivers and layouts, units, rail names and roles,
polled energy, and clear errors for trees that cannot be read."""

from __future__ import annotations

import csv
import errno
import os
import shutil
import subprocess
import sys
import time

import pytest
from zeus_test_helpers import Elapsed, timed_window

from zeus_core import DeviceError, HasIdentity, Monitor, PowerReadings, TemperatureReadings, ZeusMonitor, open_device
from zeus_plugins_jetson import fake_sysfs
from zeus_plugins_jetson import rails as rails_module
from zeus_plugins_jetson.device import JetsonRails
from zeus_plugins_jetson.fake_sysfs import AGX_ORIN_RAILS, set_rails, write_tree
from zeus_plugins_jetson.options import JetsonOptions

ORIN_AGX = {"VDD_GPU_SOC": 9.0, "VDD_CPU_CV": 3.2, "VIN_SYS_5V0": 4.4, "NC": 0.0, "VDDQ_VDD2_1V8AO": 1.1}


def rails(root, **options) -> JetsonRails:
    return JetsonRails(JetsonOptions(sysfs_root=str(root), poll_interval_s=options.pop("poll_interval_s", 0.01), **options))


def window(dev: JetsonRails, seconds: float) -> tuple[dict[str, float], Elapsed]:
    """Joules per rail over a core measurement window of about ``seconds``, and its shortest and longest length."""
    mon = Monitor(dev, sync="none")
    m, elapsed = timed_window(lambda: mon.begin_window("w"), lambda: mon.end_window("w"), seconds)
    assert m.time == elapsed.drawn(1.0)
    return m.energy, elapsed


def test_hwmon_layout_orin_agx_two_chips_voltage_times_current(tmp_path):
    root = write_tree(tmp_path / "sys", "hwmon", ORIN_AGX)
    with rails(root) as dev:
        assert dev.names == ["vdd_gpu_soc", "vdd_cpu_cv", "vin_sys_5v0", "vddq_vdd2_1v8ao"]  # NC skipped
        assert dev.rail_roles == {"vdd_gpu_soc": "gpu", "vdd_cpu_cv": "cpu", "vin_sys_5v0": "total", "vddq_vdd2_1v8ao": "other"}
        assert dev.energy_sources == dict.fromkeys(dev.names, "polling")
        # mV x mA: 5000 mV x 1800 mA is 9 W, not 9 kW
        assert dev.read_power() == pytest.approx({"vdd_gpu_soc": 9.0, "vdd_cpu_cv": 3.2, "vin_sys_5v0": 4.4, "vddq_vdd2_1v8ao": 1.1})
        got, elapsed = window(dev, 0.3)
        assert got["vdd_gpu_soc"] == elapsed.drawn(9.0, rel=0.05)
        assert dev.identity() == {
            "board_model": "NVIDIA Jetson Orin Nano Developer Kit",
            "rails": ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"],
        }


@pytest.mark.parametrize("power_files", [True, False])
def test_iio_layout_xavier_with_and_without_power_files(tmp_path, power_files):
    root = write_tree(tmp_path / "sys", "iio", power_files=power_files)
    with rails(root) as dev:
        assert dev.names == ["gpu", "cpu", "soc", "cv", "vddrq", "sys5v"]
        assert dev.rail_roles["gpu"] == "gpu" and dev.rail_roles["sys5v"] == "total" and dev.rail_roles["cpu"] == "cpu"
        assert dev.read_power()["gpu"] == pytest.approx(4.0) and dev.read_power()["sys5v"] == pytest.approx(9.5)
        got, elapsed = window(dev, 0.3)
        assert got["gpu"] == elapsed.drawn(4.0, rel=0.05)


def test_iio_power_files_are_milliwatts_and_preferred(tmp_path):
    """in_power is what the driver reports; voltage x current is used only where it is missing."""
    root = write_tree(tmp_path / "sys", "iio", {"GPU": 4.0, "CPU": 2.0, "VDD_IN": 8.0})
    (root / "bus/i2c/drivers/ina3221x/1-0040/iio:device0/in_power0_input").write_text("4321\n")
    with rails(root) as dev:
        assert dev.read_power()["gpu"] == pytest.approx(4.321)
        assert dev.rail_roles["vdd_in"] == "total"


def test_energy_follows_a_load_change_and_temperatures_come_from_the_zones(tmp_path):
    root = write_tree(tmp_path / "sys", "hwmon")
    with rails(root) as dev:
        assert isinstance(dev, PowerReadings) and isinstance(dev, TemperatureReadings) and isinstance(dev, HasIdentity)
        t0, e0, t0_end = time.monotonic(), dev.read_energy()["vdd_cpu_gpu_cv"], time.monotonic()
        time.sleep(0.2)
        t_change = time.monotonic()
        set_rails(root, {"VDD_CPU_GPU_CV": 10.0})
        t_set = time.monotonic()
        time.sleep(0.3)
        t1, e1, t1_end = time.monotonic(), dev.read_energy()["vdd_cpu_gpu_cv"], time.monotonic()
        # 2.5 W until the change, 10 W after it. Each reading and the change fell somewhere in the call that
        # made it (a loaded machine can stretch a call), so the true energy lies between these two:
        least = (t_set - t0_end) * 2.5 + (t1 - t_set) * 10.0
        most = (t_change - t0) * 2.5 + (t1_end - t_change) * 10.0
        # and the polls around the change average the two draws over the gap between them: 3.75 W x that gap
        # off at most (10 ms; 0.5 J allows 130 ms on a loaded machine; missing the change is 2.25 J off)
        assert least - 0.5 <= e1 - e0 <= most + 0.5, (least, e1 - e0, most)
        assert dev.read_temperatures() == {"vdd_in": 44.25, "vdd_cpu_gpu_cv": 43.0}  # m°C -> °C; the GPU zone for a GPU rail


def test_rails_option_selects_by_label_or_name(tmp_path):
    root = write_tree(tmp_path / "sys", "hwmon", ORIN_AGX)
    with rails(root, rails=["VDD_GPU_SOC", "vin_sys_5v0"]) as dev:
        assert dev.names == ["vdd_gpu_soc", "vin_sys_5v0"]
    with pytest.raises(DeviceError, match=r"rails \['VDD_GPU'\] are not on this board; it has VDD_GPU_SOC \(vdd_gpu_soc\)"):
        rails(root, rails=["VDD_GPU"])


def test_duplicate_labels_on_two_chips_get_the_chip_in_their_names(tmp_path):
    root = write_tree(tmp_path / "sys", "hwmon", {"VDD_IN": 5.0, "VDD_GPU": 2.0, "VDD_X": 1.0, "VDD_Y": 1.0, "VDD_Z": 3.0})
    label = root / "bus/i2c/drivers/ina3221/1-0041/hwmon/hwmon4/in2_label"
    label.write_text("VDD_GPU\n")
    with rails(root) as dev:
        assert "vdd_gpu_1_0040" in dev.names and "vdd_gpu_1_0041" in dev.names


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda r: shutil.rmtree(r / "bus"), r"no INA3221 power monitor under .*bus/i2c/drivers \(driver ina3221x or ina3221\)"),
        (lambda r: shutil.rmtree(r / "bus/i2c/drivers/ina3221/1-0040"), "lists no connected rail"),
        (lambda r: (r / "bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/curr2_input").unlink(), r"rail VDD_CPU_GPU_CV .*has no curr2_input"),
        (
            lambda r: (r / "bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/in1_input").write_text("n/a\n"),
            r"in1_input holds 'n/a', not a number",
        ),
        (lambda r: (r / "bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/curr3_input").write_text(""), r"curr3_input holds '', not a number"),
        (lambda r: _unreadable(r / "bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/in2_input"), r"cannot read .*in2_input: Is a directory"),
    ],
)
def test_bad_trees_fail_at_open_naming_the_file(tmp_path, damage, message):
    root = write_tree(tmp_path / "sys", "hwmon")
    damage(root)
    with pytest.raises(DeviceError, match=message):
        rails(root)


def _unreadable(path):
    path.unlink()
    path.mkdir()


def read_until_the_poller_fails(dev: JetsonRails, timeout_s: float = 30.0) -> None:
    """``read_energy`` until it raises what the poller met: it polls every 10 ms, later on a loaded
    machine, so a fixed wait could end before the poll that meets the fault."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        dev.read_energy()
        time.sleep(0.01)
    raise AssertionError(f"read_energy did not fail within {timeout_s} s")


def test_not_a_folder_and_a_rail_that_breaks_while_polling(tmp_path):
    with pytest.raises(DeviceError, match="sysfs_root .* is not a folder"):
        rails(tmp_path / "nowhere")
    root = write_tree(tmp_path / "sys", "hwmon")
    with rails(root) as dev:
        (root / "bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/curr1_input").write_text("garbage\n")
        with pytest.raises(DeviceError, match=r"reading the Jetson power rails failed: .*curr1_input holds 'garbage'"):
            read_until_the_poller_fails(dev)


def test_options_are_checked_with_their_field(tmp_path):
    with pytest.raises(Exception, match=r"rails must be a non-empty list of rail names"):
        open_device("jetson", {"sysfs_root": str(tmp_path), "rails": []})
    with pytest.raises(Exception, match=r"unknown key 'sysfs'"):
        open_device("jetson", {"sysfs": str(tmp_path)})


def test_zeus_monitor_with_sysfs_root_set_on_the_command_line(tmp_path):
    root = write_tree(tmp_path / "sys", "hwmon", {"VDD_IN": 7.5, "VDD_CPU_GPU_CV": 2.5, "VDD_SOC": 1.8})
    out = tmp_path / "j.csv"
    env = dict(os.environ, ZEUS_DISABLED_PLUGINS="torch,perseus,hetero,trace,mab", COLUMNS="200")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "zeus_core",
            "monitor",
            "-d",
            "jetson",
            "--set",
            f"jetson.sysfs_root={root}",
            "--set",
            "jetson.poll_interval_s=0.01",
            "--interval",
            "0.25",
            "--duration",
            "0.8",
            "--csv",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    rows = list(csv.DictReader(out.open()))
    assert list(rows[0])[2:] == [
        "vdd_in_power_w",
        "vdd_in_energy_j",
        "vdd_in_energy_error_j",
        "vdd_in_temperature_c",
        "vdd_cpu_gpu_cv_power_w",
        "vdd_cpu_gpu_cv_energy_j",
        "vdd_cpu_gpu_cv_energy_error_j",
        "vdd_cpu_gpu_cv_temperature_c",
        "vdd_soc_power_w",
        "vdd_soc_energy_j",
        "vdd_soc_energy_error_j",
    ]
    assert float(rows[-1]["vdd_in_temperature_c"]) == 44.25  # the junction zone, m°C -> °C
    # the input rail holds the others: the total counts it once (7.5 W), not 7.5 + 2.5 + 1.8 W
    summary = r.stdout[r.stdout.index("summary over") :]
    total = next(line for line in summary.splitlines() if "total" in line and "W" in line)
    assert "7.5 W" in total and "11.8 W" not in total
    assert "total: vdd_in includes vdd_cpu_gpu_cv, vdd_soc, which are not added again" in r.stdout
    t = float(rows[-1]["elapsed_s"])
    assert float(rows[-1]["vdd_cpu_gpu_cv_energy_j"]) == pytest.approx(2.5 * t, rel=0.05)
    assert float(rows[-1]["vdd_in_energy_j"]) == pytest.approx(7.5 * t, rel=0.05)
    r = subprocess.run(
        [sys.executable, "-m", "zeus_core", "monitor", "-d", "jetson", "--set", f"jetson.sysfs_root={tmp_path / 'x'}", "--duration", "0.2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 2 and "is not a folder" in r.stderr


def test_zeus_monitor_object_on_a_jetson(tmp_path):
    root = write_tree(tmp_path / "sys", "iio")
    with ZeusMonitor(device="jetson", options={"sysfs_root": str(root), "poll_interval_s": 0.01}, sync_execution_with="none") as mon:
        mon.begin_window("w")
        time.sleep(0.2)
        m = mon.end_window("w")
    assert m.energy["gpu"] == pytest.approx(4.0 * m.time, rel=0.1)
    assert m.gpu_energy == {}  # a rail is not a CUDA GPU: upstream's gpu_energy stays empty, total_system_energy has it
    assert m.total_system_energy == pytest.approx(sum(m.energy.values()))


def test_the_readme_example_runs_as_written(tmp_path):
    from pathlib import Path

    from readme_examples import run_try_it

    p, _ = run_try_it(Path(__file__).resolve().parents[2] / "plugins/zeus_plugins_jetson/README.md", tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = list(csv.DictReader((tmp_path / "jetson.csv").open()))
    assert float(rows[-1]["vdd_cpu_gpu_cv_energy_j"]) == pytest.approx(2.5 * float(rows[-1]["elapsed_s"]), rel=0.05)


# -- the INA3221 drivers as Linux writes them (drivers/hwmon/ina3221.c; L4T drivers/staging/iio/meter/ina3221.c) --

#: Orin Nano's chip as the mainline hwmon driver lays it out, written by hand from ina3221.c (ina3221_info,
#: ina3221_attrs, ina3221_read_string), not by fake_sysfs: a bus voltage that is not 5 V, currents in the
#: 8 mA steps of a 5 mΩ shunt, averaging set to 4 samples, and the summation channel
ORIN_NANO_BY_HAND = {
    "name": "ina3221",
    "samples": "4",
    "update_interval": "26",
    "in1_label": "VDD_IN",
    "in1_enable": "1",
    "in1_input": "5064",
    "curr1_input": "1504",
    "in4_input": "7520",
    "in2_label": "VDD_CPU_GPU_CV",
    "in2_enable": "1",
    "in2_input": "5056",
    "curr2_input": "496",
    "in5_input": "2480",
    "in3_label": "VDD_SOC",
    "in3_enable": "1",
    "in3_input": "5064",
    "curr3_input": "360",
    "in6_input": "1800",
    "in7_label": "sum of shunt voltages",
    "in7_input": "11800",
    "curr4_input": "2360",
    "curr4_crit": "131064",
    "curr4_crit_alarm": "0",
    **{f"shunt{c}_resistor": "5000" for c in (1, 2, 3)},
    **{f"curr{c}_{a}": v for c in (1, 2, 3) for a, v in (("crit", "32760"), ("max", "32760"), ("crit_alarm", "0"), ("max_alarm", "0"))},
}


def by_hand(root, chips):
    """A sysfs tree holding exactly the given files (chip -> {file: text}) under the hwmon driver."""
    for i, (chip, files) in enumerate(chips.items()):
        folder = root / "bus/i2c/drivers/ina3221" / chip / "hwmon" / f"hwmon{i + 1}"
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).write_text(f"{text}\n")
    return root


@pytest.fixture
def enodata(monkeypatch):
    """The driver's reads that fail: an empty file (fake_sysfs's stand-in, a plain file cannot fail a read)
    answers ENODATA, as ina3221_read_in/ina3221_read_curr do for a channel switched off or a summation
    over differing shunt resistors."""
    real = rails_module._read_text

    def read(path):
        text = real(path)
        if text == "":
            raise OSError(errno.ENODATA, os.strerror(errno.ENODATA), str(path))
        return text

    monkeypatch.setattr(rails_module, "_read_text", read)


def test_the_summation_channel_is_no_rail_and_reads_as_the_total_current_it_is(tmp_path):
    """in7_label "sum of shunt voltages" has no in7_enable and no curr7_input: its current is curr4_input.
    It was taken for a rail named "sum of shunt voltages" and refused (no curr7_input)."""
    root = by_hand(tmp_path / "sys", {"1-0040": ORIN_NANO_BY_HAND})
    with rails(root) as dev:
        assert dev.names == ["vdd_in", "vdd_cpu_gpu_cv", "vdd_soc"]  # in4-in6 (shunt voltages) and in7 are no rails
        assert dev.rail_labels == {"vdd_in": "VDD_IN", "vdd_cpu_gpu_cv": "VDD_CPU_GPU_CV", "vdd_soc": "VDD_SOC"}
        # units: in<i>_input mV x curr<i>_input mA
        assert dev.read_power() == pytest.approx({"vdd_in": 5.064 * 1.504, "vdd_cpu_gpu_cv": 5.056 * 0.496, "vdd_soc": 5.064 * 0.360})
        assert dev.read_current_sums() == {"1-0040": pytest.approx(2.360)}  # mA -> A; the sum of the three currents
        assert dev.update_periods_s == dict.fromkeys(dev.names, 0.026) and dev.averaging_samples == dict.fromkeys(dev.names, 4)
        assert dev.current_steps_a == pytest.approx(dict.fromkeys(dev.names, 0.008))  # 40 µV over 5 mΩ
        assert dev.energy_includes == {"vdd_in": ["vdd_cpu_gpu_cv", "vdd_soc"]}


def test_the_simulated_tree_writes_exactly_the_files_the_hwmon_driver_does(tmp_path):
    root = write_tree(tmp_path / "sys", "hwmon")
    folder = root / "bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3"
    assert {p.name for p in folder.iterdir()} == set(ORIN_NANO_BY_HAND)
    assert (folder / "in7_label").read_text() == "sum of shunt voltages\n" and not (folder / "curr7_input").exists()
    # the reset configuration (INA3221_CONFIG_DEFAULT 0x7127): 3 channels x 1 sample x (1.1 + 1.1 ms) = 6.6 -> 7 ms
    assert (folder / "update_interval").read_text() == "7\n" and (folder / "samples").read_text() == "1\n"
    assert fake_sysfs.update_interval_ms(3, 4) == 26 and fake_sysfs.update_interval_ms(1) == 2
    # the summation follows the rails: shunt µV summed, over the common 5 mΩ
    set_rails(root, {"VDD_SOC": 3.0})
    assert (folder / "in6_input").read_text() == "3000\n" and (folder / "curr3_input").read_text() == "600\n"
    assert (folder / "in7_input").read_text() == f"{7500 + 2500 + 3000}\n" and (folder / "curr4_input").read_text() == "2600\n"


def test_agx_orin_disconnected_channels_and_a_summation_that_leaves_the_input_out(tmp_path, enodata):
    """Mainline's tegra234-p3701.dtsi: the second chip's channels 1 and 3 are status = "disabled" (no label,
    in<i>_enable 0, inputs ENODATA, update_interval for one channel), VIN_SYS_5V0 is left out of the sum."""
    root = write_tree(
        tmp_path / "sys",
        "hwmon",
        AGX_ORIN_RAILS,
        model="NVIDIA Jetson AGX Orin Developer Kit",
        shunt_uohm=2000,
        summation_disable=("VIN_SYS_5V0",),
    )
    second = root / "bus/i2c/drivers/ina3221/1-0041/hwmon/hwmon4"
    assert not (second / "in1_label").exists() and (second / "in1_enable").read_text() == "0\n"
    with pytest.raises(OSError) as e:
        rails_module._read_text(second / "in1_input")
    assert e.value.errno == errno.ENODATA
    with rails(root) as dev:
        assert dev.names == ["vdd_gpu_soc", "vdd_cpu_cv", "vin_sys_5v0", "vddq_vdd2_1v8ao"]
        assert dev.read_power() == pytest.approx({"vdd_gpu_soc": 9.0, "vdd_cpu_cv": 3.2, "vin_sys_5v0": 4.4, "vddq_vdd2_1v8ao": 1.1})
        assert dev.read_current_sums() == pytest.approx({"1-0040": 1.8 + 0.64, "1-0041": 0.22})
        assert dev.update_periods_s == {"vdd_gpu_soc": 0.007, "vdd_cpu_cv": 0.007, "vin_sys_5v0": 0.007, "vddq_vdd2_1v8ao": 0.002}
        assert dev.current_steps_a == pytest.approx(dict.fromkeys(dev.names, 0.02))  # 40 µV over 2 mΩ
        got, elapsed = window(dev, 0.2)
        assert got["vddq_vdd2_1v8ao"] == elapsed.drawn(1.1, rel=0.1)


def test_a_summation_over_differing_shunts_has_no_data_and_is_left_out(tmp_path, enodata):
    root = write_tree(tmp_path / "sys", "hwmon", shunt_uohm={"VDD_IN": 5000, "VDD_CPU_GPU_CV": 5000, "VDD_SOC": 10000})
    folder = root / "bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3"
    assert (folder / "curr4_input").read_text() == "" and (folder / "curr3_input").read_text() == "360\n"
    with rails(root) as dev:
        assert dev.read_current_sums() == {}
        assert dev.read_power()["vdd_soc"] == pytest.approx(1.8)


def test_a_channel_switched_off_while_polling_names_enodata(tmp_path, enodata):
    root = write_tree(tmp_path / "sys", "hwmon")
    folder = root / "bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3"
    with rails(root) as dev:
        (folder / "in3_enable").write_text("0\n")  # echo 0 > in3_enable: its inputs answer ENODATA from now
        (folder / "in3_input").write_text("")
        with pytest.raises(DeviceError, match=r"in3_input: no data \(ENODATA\).*switched off"):
            read_until_the_poller_fails(dev)
    with rails(root) as dev:  # opened again, the channel switched off is no rail
        assert dev.names == ["vdd_in", "vdd_cpu_gpu_cv"]


def test_a_channel_the_device_tree_does_not_label_is_measured_by_its_number(tmp_path):
    root = write_tree(tmp_path / "sys", "hwmon", {"VDD_IN": 5.0, "#unlabelled": 2.0, "VDD_SOC": 1.0})
    with rails(root) as dev:
        assert dev.names == ["vdd_in", "in2", "vdd_soc"] and dev.read_power()["in2"] == pytest.approx(2.0)


def test_quantized_readings_step_as_the_chip_does(tmp_path):
    """Shunt voltage in 40 µV steps (ina3221_read_value): 8 mA at 5 mΩ, so 7.5 W at 5 V reads 7.52 W."""
    root = write_tree(tmp_path / "sys", "hwmon", quantize=True)
    folder = root / "bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3"
    assert (folder / "in4_input").read_text() == "7520\n" and (folder / "curr1_input").read_text() == "1504\n"
    with rails(root) as dev:
        assert dev.read_power()["vdd_in"] == pytest.approx(7.52)


def test_the_iio_driver_files_and_a_channel_without_a_rail_name(tmp_path):
    """L4T's ina3221x: three channels' attributes always; a channel with no ti,rail-name prints "(null)"."""
    root = write_tree(tmp_path / "sys", "iio", {"POM_5V_IN": 5.0, "POM_5V_GPU": 1.0, "#none": None})
    folder = root / "bus/i2c/drivers/ina3221x/1-0040/iio:device0"
    assert (folder / "rail_name_2").read_text() == "(null)\n"
    assert (folder / "crit_current_limit_0").read_text() == "6000 ma\n" and (folder / "ui_input_1").read_text() == "5000 200\n"
    assert (folder / "in_power0_trigger_input").read_text() == "0\n" and (folder / "in_power0_input").read_text() == "5000\n"
    with rails(root) as dev:
        assert dev.names == ["pom_5v_in", "pom_5v_gpu"] and dev.rail_roles["pom_5v_in"] == "total"
        assert dev.update_periods_s == {} and dev.current_steps_a == {} and dev.read_current_sums() == {}  # iio says none


def test_zeus_monitor_on_an_agx_orin_as_mainline_linux_lays_it_out(tmp_path):
    env = dict(os.environ, ZEUS_DISABLED_PLUGINS="torch,perseus,hetero,trace,mab", COLUMNS="200")
    root = tmp_path / "sys"
    r = subprocess.run(
        [sys.executable, "-m", "zeus_plugins_jetson.fake_sysfs", str(root), "--agx-orin", "--quantize"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = tmp_path / "j.csv"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "zeus_core",
            "monitor",
            "-d",
            "jetson",
            "--set",
            f"jetson.sysfs_root={root}",
            "--set",
            "jetson.poll_interval_s=0.01",
            "--interval",
            "0.25",
            "--duration",
            "0.6",
            "--csv",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "sum of shunt voltages" not in r.stdout + r.stderr
    rows = list(csv.DictReader(out.open()))
    assert [c for c in rows[0] if c.endswith("_energy_j")] == [
        "vdd_gpu_soc_energy_j",
        "vdd_cpu_cv_energy_j",
        "vin_sys_5v0_energy_j",
        "vddq_vdd2_1v8ao_energy_j",
    ]
    assert float(rows[-1]["vdd_gpu_soc_power_w"]) == pytest.approx(9.0, abs=0.01)  # 1800 mA is 90 steps of 20 mA (2 mΩ)
    assert "total: vin_sys_5v0 includes" in r.stdout

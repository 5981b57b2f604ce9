"""The jetson device on simulated sysfs trees: both drivers and layouts, units, rail names and roles,
polled energy, and clear errors for trees that cannot be read."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import time

import pytest

from zeus_core import DeviceError, HasIdentity, Monitor, PowerReadings, TemperatureReadings, ZeusMonitor, open_device
from zeus_plugins_jetson.device import JetsonRails
from zeus_plugins_jetson.fake_sysfs import set_rails, write_tree
from zeus_plugins_jetson.options import JetsonOptions

ORIN_AGX = {"VDD_GPU_SOC": 9.0, "VDD_CPU_CV": 3.2, "VIN_SYS_5V0": 4.4, "NC": 0.0, "VDDQ_VDD2_1V8AO": 1.1}


def rails(root, **options) -> JetsonRails:
    return JetsonRails(JetsonOptions(sysfs_root=str(root), poll_interval_s=options.pop("poll_interval_s", 0.01), **options))


def window(dev: JetsonRails, seconds: float) -> tuple[dict[str, float], float]:
    """Joules per rail over a core measurement window of about ``seconds``, and its length."""
    mon = Monitor(dev, sync="none")
    mon.begin_window("w")
    time.sleep(seconds)
    m = mon.end_window("w")
    return m.energy, m.time


def test_hwmon_layout_orin_agx_two_chips_voltage_times_current(tmp_path):
    root = write_tree(tmp_path / "sys", "hwmon", ORIN_AGX)
    with rails(root) as dev:
        assert dev.names == ["vdd_gpu_soc", "vdd_cpu_cv", "vin_sys_5v0", "vddq_vdd2_1v8ao"]  # NC skipped
        assert dev.rail_roles == {"vdd_gpu_soc": "gpu", "vdd_cpu_cv": "cpu", "vin_sys_5v0": "total", "vddq_vdd2_1v8ao": "other"}
        assert dev.energy_sources == dict.fromkeys(dev.names, "polling")
        # mV x mA: 5000 mV x 1800 mA is 9 W, not 9 kW
        assert dev.read_power() == pytest.approx({"vdd_gpu_soc": 9.0, "vdd_cpu_cv": 3.2, "vin_sys_5v0": 4.4, "vddq_vdd2_1v8ao": 1.1})
        got, elapsed = window(dev, 0.3)
        assert got["vdd_gpu_soc"] == pytest.approx(9.0 * elapsed, rel=0.05)
        assert dev.identity() == {"board_model": "NVIDIA Jetson Orin Nano Developer Kit", "rails": ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"]}


@pytest.mark.parametrize("power_files", [True, False])
def test_iio_layout_xavier_with_and_without_power_files(tmp_path, power_files):
    root = write_tree(tmp_path / "sys", "iio", power_files=power_files)
    with rails(root) as dev:
        assert dev.names == ["gpu", "cpu", "soc", "cv", "vddrq", "sys5v"]
        assert dev.rail_roles["gpu"] == "gpu" and dev.rail_roles["sys5v"] == "total" and dev.rail_roles["cpu"] == "cpu"
        assert dev.read_power()["gpu"] == pytest.approx(4.0) and dev.read_power()["sys5v"] == pytest.approx(9.5)
        got, elapsed = window(dev, 0.3)
        assert got["gpu"] == pytest.approx(4.0 * elapsed, rel=0.05)


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
        e0 = dev.read_energy()["vdd_cpu_gpu_cv"]
        time.sleep(0.2)
        set_rails(root, {"VDD_CPU_GPU_CV": 10.0})
        time.sleep(0.3)
        e1 = dev.read_energy()["vdd_cpu_gpu_cv"]
        # 0.2 s at 2.5 W then 0.3 s at 10 W (one poll interval of slack around the change)
        assert e1 - e0 == pytest.approx(0.2 * 2.5 + 0.3 * 10.0, abs=0.15)
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


@pytest.mark.parametrize(("damage", "message"), [
    (lambda r: shutil.rmtree(r / "bus"), r"no INA3221 power monitor under .*bus/i2c/drivers \(driver ina3221x or ina3221\)"),
    (lambda r: shutil.rmtree(r / "bus/i2c/drivers/ina3221/1-0040"), "lists no connected rail"),
    (lambda r: (r / "bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/curr2_input").unlink(),
     r"rail VDD_CPU_GPU_CV .*has no curr2_input"),
    (lambda r: (r / "bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/in1_input").write_text("n/a\n"),
     r"in1_input holds 'n/a', not a number"),
    (lambda r: (r / "bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/curr3_input").write_text(""),
     r"curr3_input holds '', not a number"),
    (lambda r: _unreadable(r / "bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/in2_input"), r"cannot read .*in2_input: Is a directory"),
])
def test_bad_trees_fail_at_open_naming_the_file(tmp_path, damage, message):
    root = write_tree(tmp_path / "sys", "hwmon")
    damage(root)
    with pytest.raises(DeviceError, match=message):
        rails(root)


def _unreadable(path):
    path.unlink()
    path.mkdir()


def test_not_a_folder_and_a_rail_that_breaks_while_polling(tmp_path):
    with pytest.raises(DeviceError, match="sysfs_root .* is not a folder"):
        rails(tmp_path / "nowhere")
    root = write_tree(tmp_path / "sys", "hwmon")
    with rails(root) as dev:
        (root / "bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/curr1_input").write_text("garbage\n")
        time.sleep(0.1)
        with pytest.raises(DeviceError, match=r"reading the Jetson power rails failed: .*curr1_input holds 'garbage'"):
            dev.read_energy()


def test_options_are_checked_with_their_field(tmp_path):
    with pytest.raises(Exception, match=r"rails must be a non-empty list of rail names"):
        open_device("jetson", {"sysfs_root": str(tmp_path), "rails": []})
    with pytest.raises(Exception, match=r"unknown key 'sysfs'"):
        open_device("jetson", {"sysfs": str(tmp_path)})


def test_zeus_monitor_with_sysfs_root_set_on_the_command_line(tmp_path):
    root = write_tree(tmp_path / "sys", "hwmon", {"VDD_IN": 7.5, "VDD_CPU_GPU_CV": 2.5, "VDD_SOC": 1.8})
    out = tmp_path / "j.csv"
    env = dict(os.environ, ZEUS_DISABLED_PLUGINS="torch,perseus,hetero,trace,mab", COLUMNS="200")
    r = subprocess.run([sys.executable, "-m", "zeus_core", "monitor", "-d", "jetson", "--set", f"jetson.sysfs_root={root}",
                        "--set", "jetson.poll_interval_s=0.01", "--interval", "0.25", "--duration", "0.8", "--csv", str(out)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = list(csv.DictReader(out.open()))
    assert list(rows[0])[2:] == ["vdd_in_power_w", "vdd_in_energy_j", "vdd_in_temperature_c", "vdd_cpu_gpu_cv_power_w",
                                 "vdd_cpu_gpu_cv_energy_j", "vdd_cpu_gpu_cv_temperature_c", "vdd_soc_power_w", "vdd_soc_energy_j"]
    assert float(rows[-1]["vdd_in_temperature_c"]) == 44.25  # the junction zone, m°C -> °C
    # the input rail holds the others: the total counts it once (7.5 W), not 7.5 + 2.5 + 1.8 W
    summary = r.stdout[r.stdout.index("summary over"):]
    total = next(line for line in summary.splitlines() if "total" in line and "W" in line)
    assert "7.5 W" in total and "11.8 W" not in total
    assert "total: vdd_in includes vdd_cpu_gpu_cv, vdd_soc, which are not added again" in r.stdout
    t = float(rows[-1]["elapsed_s"])
    assert float(rows[-1]["vdd_cpu_gpu_cv_energy_j"]) == pytest.approx(2.5 * t, rel=0.05)
    assert float(rows[-1]["vdd_in_energy_j"]) == pytest.approx(7.5 * t, rel=0.05)
    r = subprocess.run([sys.executable, "-m", "zeus_core", "monitor", "-d", "jetson", "--set", f"jetson.sysfs_root={tmp_path / 'x'}",
                        "--duration", "0.2"], capture_output=True, text=True, env=env, timeout=120)
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

"""Every Jetson figure says how sure it is (issue 37), on the simulated INA3221 tree.

A rail's reading is renewed every ``update_interval`` from its shunt's conversions only: a sixth of
the interval with three channels on (:mod:`zeus_plugins_jetson.sensors`). The simulated tree's load
wave (off by default) is busy exactly while the rail's shunt is converted and idle otherwise, so the
rail reads the busy draw throughout: polled energy counts far more than the rail drew. The window's
bound covers the unseen part at up to the rail's maximum; the bound of a fully covered, instant
reading is broken by the same window.
"""

from __future__ import annotations

import math
import time

import pytest
from bound_helpers import measure, off_by

from zeus_plugins_jetson import fake_sysfs
from zeus_plugins_jetson.device import JetsonRails
from zeus_plugins_jetson.options import JetsonOptions
from zeus_plugins_jetson.sensors import SHUNT_FULL_SCALE_UV


def test_a_load_seen_only_while_the_shunt_is_converted(tmp_path):
    root = fake_sysfs.write_tree(tmp_path, "hwmon")
    mean = fake_sysfs.set_load_wave(root, "VDD_CPU_GPU_CV", busy_w=10.0, idle_w=1.0)
    assert mean == pytest.approx(10.0 / 6 + 1.0 * 5 / 6)  # three channels on: the shunt is a sixth of the interval
    start = time.monotonic()

    def truth() -> float:
        return fake_sysfs.true_power_w(root, "VDD_CPU_GPU_CV") * (time.monotonic() - start)

    with JetsonRails(JetsonOptions(sysfs_root=str(root), poll_interval_s=0.01, max_power_w=15.0)) as dev:
        precision = dev.energy_precision["vdd_cpu_gpu_cv"]
        assert (precision.method, precision.scope) == ("polling", "soc_rail")
        assert precision.sensor_period_s == 0.007 and precision.coverage == pytest.approx(1 / 6)  # update_interval 7 ms
        m, seen = measure(dev, truth, lambda: time.sleep(1.0))
    assert m.sources["vdd_cpu_gpu_cv"] == "polling" and m.scopes["vdd_cpu_gpu_cv"] == "soc_rail"
    assert m.energy["vdd_cpu_gpu_cv"] > 3 * seen[1]  # the reading saw the busy draw only
    assert off_by(m, "vdd_cpu_gpu_cv", seen) <= m.errors["vdd_cpu_gpu_cv"]
    full = precision._replace(coverage=1.0)
    assert off_by(m, "vdd_cpu_gpu_cv", seen) > full.bound_j(m.time, m.energy["vdd_cpu_gpu_cv"])
    instant = full._replace(sensor_period_s=0.0)
    assert off_by(m, "vdd_cpu_gpu_cv", seen) > instant.bound_j(m.time, m.energy["vdd_cpu_gpu_cv"])


def test_without_the_wave_a_rail_holds_its_bound_and_its_maximum_is_the_chips_full_scale(tmp_path):
    root = fake_sysfs.write_tree(tmp_path, "hwmon")
    start = time.monotonic()

    def truth() -> float:
        return fake_sysfs.true_power_w(root, "VDD_IN") * (time.monotonic() - start)

    with JetsonRails(JetsonOptions(sysfs_root=str(root), poll_interval_s=0.01)) as dev:
        precision = dev.energy_precision["vdd_in"]
        m, seen = measure(dev, truth, lambda: time.sleep(0.3))
    # 163.8 mV over the Orin Nano's 5 mOhm shunt at its 5 V bus: the most the chip can read
    assert precision.max_w == pytest.approx(SHUNT_FULL_SCALE_UV / fake_sysfs.SHUNT_UOHM * 5.0)
    assert off_by(m, "vdd_in", seen) <= 0.05 and off_by(m, "vdd_in", seen) <= m.errors["vdd_in"]


def test_the_iio_driver_says_nothing_to_bound_with(tmp_path):
    root = fake_sysfs.write_tree(tmp_path, "iio")
    with JetsonRails(JetsonOptions(sysfs_root=str(root), poll_interval_s=0.01, max_power_w=30.0)) as dev:
        m, _ = measure(dev, lambda: 0.0, lambda: time.sleep(0.05))
    assert m.errors and all(math.isnan(e) for e in m.errors.values())

"""The apple-silicon device on the simulated zeus_apple_silicon: channels present and absent, mJ to J,
windows, `zeus monitor -d apple-silicon`, and clear errors."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
import warnings

import pytest
from zeus_test_helpers import energy_window, timed_window

from zeus_core import DeviceError, HasIdentity, ZeusMonitor
from zeus_plugins_apple_silicon import fake_apple_silicon
from zeus_plugins_apple_silicon.device import AppleSilicon, make_apple_silicon
from zeus_plugins_apple_silicon.fake_apple_silicon import M2_MAX
from zeus_plugins_apple_silicon.options import AppleSiliconOptions


@pytest.fixture
def chip(tmp_path, monkeypatch):
    def make(watts=None, **kw):
        path = fake_apple_silicon.create(tmp_path / "apple.json", watts, **kw)
        monkeypatch.setenv(fake_apple_silicon.ENV, str(path))
        return path

    return make


def test_each_reported_channel_is_a_device_in_joules(chip):
    chip()
    with AppleSilicon() as dev:
        assert dev.names == ["cpu", "gpu", "ane", "dram"]  # no GPU SRAM channel on this chip
        assert dev.energy_sources == dict.fromkeys(dev.names, "counter")
        assert isinstance(dev, HasIdentity) and dev.identity() == {"soc_model": "Apple M2 Max"}
        got, elapsed = energy_window(dev, 0.3)
    for name, field in (("cpu", "cpu_total_mj"), ("gpu", "gpu_mj"), ("ane", "ane_mj"), ("dram", "dram_mj")):
        assert got[name] == elapsed.drawn(M2_MAX[field], rel=0.03, abs=0.003), name  # mJ -> J


def test_a_chip_without_dram_and_with_gpu_sram(chip):
    chip(dict(M2_MAX, dram_mj=None, gpu_sram_mj=0.4))
    with AppleSilicon() as dev:
        assert dev.names == ["cpu", "gpu", "gpu-sram", "ane"]


def test_windows_through_zeus_monitor(chip):
    chip(dict(M2_MAX, gpu_mj=20.0))
    with ZeusMonitor(device="apple-silicon", sync_execution_with="none") as mon:
        m, elapsed = timed_window(lambda: mon.begin_window("w"), lambda: mon.end_window("w"), 0.25)
    assert m.time == elapsed.drawn(1.0) and m.energy["gpu"] == elapsed.drawn(20.0, rel=0.05)
    assert m.total_system_energy == pytest.approx(sum(m.energy.values()))


def test_zeus_monitor_csv_has_a_gpu_column(chip, tmp_path):
    chip()
    out = tmp_path / "a.csv"
    env = dict(os.environ, ZEUS_DISABLED_PLUGINS="torch,perseus,hetero,trace,mab")
    r = subprocess.run(
        [sys.executable, "-m", "zeus_core", "monitor", "-d", "apple-silicon", "--interval", "0.25", "--duration", "0.6", "--csv", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    rows = list(csv.DictReader(out.open()))
    assert "gpu_energy_j" in rows[0] and "cpu_energy_j" in rows[0] and "dram_energy_j" in rows[0]
    t = float(rows[-1]["elapsed_s"])
    assert float(rows[-1]["gpu_energy_j"]) == pytest.approx(M2_MAX["gpu_mj"] * t, rel=0.05)


def test_no_ioreport_no_package_and_no_max_power_are_clear_errors(chip, tmp_path, monkeypatch):
    chip(subscribe_fails=True)
    with pytest.raises(DeviceError, match="cannot read the energy channels .*IOReport subscription.*macOS on Apple Silicon"):
        AppleSilicon()
    chip({f: None for f in M2_MAX})
    with pytest.raises(DeviceError, match="reports no CPU, GPU, ANE or DRAM energy"):
        AppleSilicon()
    monkeypatch.delenv(fake_apple_silicon.ENV)
    monkeypatch.setitem(sys.modules, "zeus_apple_silicon", None)
    with pytest.raises(DeviceError, match="pip install zeus-apple-silicon"):
        AppleSilicon()

    class Job:
        eta_knob = 0.5

    class Context:
        job = Job()

    chip()
    with pytest.raises(DeviceError, match="set max_power_w in \\[device\\]"):
        make_apple_silicon(AppleSiliconOptions(), Context())
    dev = make_apple_silicon(AppleSiliconOptions(max_power_w=60.0), Context())
    assert dev.max_power_w == 60.0
    dev.close()
    with pytest.raises(DeviceError, match="closed"):
        dev.read_energy()


def test_the_fake_follows_zeus_apple_silicons_api(chip):
    chip()
    mon = fake_apple_silicon.AppleEnergyMonitor()
    mon.begin_window("a")
    with pytest.raises(RuntimeError, match="already exists"):
        mon.begin_window("a")
    mon.begin_window("a", restart=True)
    time.sleep(0.05)
    m = mon.end_window("a")
    assert isinstance(m.gpu_mj, int) and m.gpu_sram_mj is None and len(m.performance_cores_mj) == 8
    with pytest.raises(RuntimeError, match="No measurement with provided key"):
        mon.end_window("a")


def test_the_readme_example_runs_as_written(tmp_path):
    from pathlib import Path

    from readme_examples import run_try_it

    p, _ = run_try_it(Path(__file__).resolve().parents[2] / "plugins/zeus_plugins_apple_silicon/README.md", tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = list(csv.DictReader((tmp_path / "apple.csv").open()))
    assert float(rows[-1]["gpu_energy_j"]) == pytest.approx(12.0 * float(rows[-1]["elapsed_s"]), rel=0.05)


@pytest.mark.parametrize(("quirk", "seen"), [("backwards", "ran backwards"), ("jump", r"jumped by .* more than the chip's maximum power")])
def test_a_channel_whose_counter_fails_the_check_is_left_out_with_one_warning(chip, quirk, seen):
    """IOReport has no power reading to poll instead: the faulty channel is left out, the others kept;
    trusted, its counter would have given a negative figure or 1000 times the 12 W drawn."""
    chip(quirks={"gpu_mj": quirk})
    with pytest.warns(UserWarning, match=rf"Apple M2 Max gpu channel \(gpu_mj\): its energy counter {seen}.*left out") as caught:
        dev = AppleSilicon()
    assert len([w for w in caught if "energy counter" in str(w.message)]) == 1
    with dev:
        assert dev.names == ["cpu", "ane", "dram"]
        got, elapsed = energy_window(dev, 0.2)
        raw = fake_apple_silicon.AppleEnergyMonitor()
        g0 = raw.get_cumulative_energy().gpu_mj
        time.sleep(0.1)
        raw_w = (raw.get_cumulative_energy().gpu_mj - g0) / 1000.0 / 0.1
    assert got["cpu"] == elapsed.drawn(M2_MAX["cpu_total_mj"], rel=0.1)
    assert not 12.0 / 2 <= raw_w <= 12.0 * 2, raw_w


def test_a_frozen_channel_cannot_be_told_from_an_idle_one_and_is_kept(chip):
    chip(quirks={"ane_mj": "frozen"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with AppleSilicon() as dev:
            assert dev.names == ["cpu", "gpu", "ane", "dram"]

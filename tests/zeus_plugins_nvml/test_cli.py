"""The nvml device through the `zeus` command: `zeus monitor`, and restore at the next start."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from zeus_core.cli.main import cli
from zeus_core.engine import registry as zreg
from zeus_plugins_nvml import fake_pynvml
from zeus_plugins_nvml import plugin as nvml_plugin
from zeus_plugins_nvml.fake_pynvml import FakeGpu


def test_zeus_monitor_shows_counter_and_polled_gpus(fake_nvml, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    fake_nvml([FakeGpu(demand_w=300.0), FakeGpu(name="Tesla V100", arch=4, demand_w=120.0)])
    reg = zreg.load(extra_plugins=[("nvml", nvml_plugin)], entry_points=False)
    out = tmp_path / "s.csv"
    r = CliRunner().invoke(
        cli,
        ["monitor", "-d", "nvml", "--set", "nvml.poll_interval_s=0.02", "--interval", "0.25", "--duration", "0.8", "--csv", str(out)],
        obj={"registry": reg},
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.output
    assert "counter" in r.output and "polling" in r.output
    rows = list(csv.DictReader(out.open()))
    last = rows[-1]
    t = float(last["elapsed_s"])
    assert float(last["gpu0_energy_j"]) == pytest.approx(300.0 * t, rel=0.03)
    assert float(last["gpu1_energy_j"]) == pytest.approx(120.0 * t, rel=0.1)
    assert float(rows[1]["gpu0_power_w"]) == pytest.approx(300.0, rel=0.03)
    # each energy's +/- bound beside it (issue 37): the counter's a period at the board's maximum power, the polled
    # GPU's growing with its window; both hold what the GPUs drew
    header = list(last)
    assert header[header.index("gpu0_energy_j") + 1] == "gpu0_energy_error_j"
    assert header[header.index("gpu1_energy_j") + 1] == "gpu1_energy_error_j"
    assert float(last["gpu0_energy_error_j"]) > 0
    for name, watts in (("gpu0", 300.0), ("gpu1", 120.0)):
        assert abs(float(last[f"{name}_energy_j"]) - watts * t) <= float(last[f"{name}_energy_error_j"])
    assert r.output.count(" ± ") >= 3  # each GPU and the total


KILLED = textwrap.dedent(
    """
    import sys, time
    from zeus_plugins_nvml import fake_pynvml
    fake_pynvml.install(sys.argv[1])
    from zeus_plugins_nvml.device import NvmlGpus
    NvmlGpus().set_power_limit(120)
    print("changed", flush=True)
    time.sleep(60)
    """
)

ZEUS = textwrap.dedent(
    """
    import sys
    from zeus_plugins_nvml import fake_pynvml
    fake_pynvml.install(sys.argv[1])
    from zeus_core.cli.main import main
    main(["plugins", "--json"])
    """
)


def test_next_zeus_start_restores_what_a_sigkilled_run_left(fake_nvml):
    fake_nvml(1, privileged=True)
    path = os.environ[fake_pynvml.ENV]
    child = subprocess.Popen([sys.executable, "-c", KILLED, path], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "changed"
    child.kill()
    child.wait()
    assert fake_pynvml.read_state(path)["gpus"][0]["limit_w"] == 120.0
    env = dict(os.environ, ZEUS_DISABLED_PLUGINS="torch")  # not needed here, and slow to import
    r = subprocess.run([sys.executable, "-c", ZEUS, path], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert "restored nvml gpu:GPU-" in r.stderr and "power_limit to 400000" in r.stderr
    assert fake_pynvml.read_state(path)["gpus"][0]["limit_w"] == 400.0

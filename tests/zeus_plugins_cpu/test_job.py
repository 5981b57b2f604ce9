"""A job.toml picks the cpu devices (and nvml) by name; cpu-estimate runs a real job on this machine."""

from __future__ import annotations

import csv
import time
import types

import attrs
import pytest
from zeus_test_helpers import run_cli, write_job

from zeus_core import hookimpl
from zeus_core.engine import registry as zreg

JOB = """
[job]
name = "cpu-job"
recurrences = 2
target_metric = 1.0
eta_knob = 0.5
beta_knob = inf  # no early stop: real time and a loaded machine decide the costs here, and each run must reach
max_epochs = 3

[workload]
plugin = "spin"

[device]
plugin = "{device}"
{device_options}

[batch_size]
plugin = "fixed"
default = 32
"""


@attrs.define
class SpinOptions:
    epoch_s: float = 0.03


class Spin:
    """Burns the CPU for a fixed time per epoch: real work for a real (estimated) device."""

    def __init__(self, options: SpinOptions, context) -> None:
        self.epoch_s = options.epoch_s

    def run(self, session) -> None:
        for epoch in session.epochs():
            end = time.monotonic() + self.epoch_s
            while time.monotonic() < end:
                pass
            session.report_metric(epoch / 2)


spin_plugin = types.ModuleType("zeus_test_spin_plugin")


@hookimpl
def zeus_register_workloads(register):
    register("spin", Spin, options=SpinOptions)


spin_plugin.zeus_register_workloads = zeus_register_workloads


@pytest.fixture
def reg(monkeypatch):
    monkeypatch.setenv("ZEUS_DISABLED_PLUGINS", "torch")  # not needed here, and slow to import
    return zreg.load(extra_plugins=[("spin", spin_plugin)])


@pytest.mark.parametrize(
    "device,options",
    [
        ("cpu-estimate", 'tdp_w = 120.0\nscope = "process"'),
        ("rapl", "packages = [0]\ndram = false"),
        ("nvml", 'gpus = [0]\nenergy = "counter"'),
    ],
)
def test_job_toml_picks_each_device_by_name(reg, tmp_path, device, options):
    job = write_job(tmp_path / "job.toml", JOB.format(device=device, device_options=options))
    r = run_cli(reg, "validate", str(job))
    assert r.exit_code == 0, r.output
    assert f"device={device}" in r.output


def test_bad_device_option_names_line_and_path(reg, tmp_path):
    job = write_job(tmp_path / "job.toml", JOB.format(device="cpu-estimate", device_options="tdp_w = 5000.0"))
    r = run_cli(reg, "validate", str(job))
    assert r.exit_code == 2
    assert "job.toml:14:" in r.output and "tdp_w must be between 0 and 1000 W" in r.output and "$.device.tdp_w" in r.output


def test_cpu_estimate_runs_a_job_and_marks_the_energy_estimated(reg, tmp_path):
    job = write_job(tmp_path / "job.toml", JOB.format(device="cpu-estimate", device_options="tdp_w = 100.0"))
    out = tmp_path / "out"
    r = run_cli(reg, "run", str(job), "--output", str(out))
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader((out / "recurrences.csv").open()))
    assert len(rows) == 2
    for row in rows:
        t, e = float(row["time_s"]), float(row["energy_j"])
        assert 0.05 < t < 5
        assert 0 < e <= 100.0 * t * 1.05  # never above TDP x time

"""Baseline policies, and event hooks seen by an observer plugin."""

from __future__ import annotations

from pathlib import Path

from zeus_test_helpers import TOY_JOB, run_cli, toy_registry, write_job

from zeus_core import hookimpl
from zeus_core.engine.runner import Runner
from zeus_core.engine.validation import load_job


class Observer:
    def __init__(self):
        self.events = []

    @hookimpl
    def zeus_on_job_start(self, job, context):
        self.events.append(("start", job.name))

    @hookimpl
    def zeus_on_measurement(self, name, measurement):
        self.events.append(("measurement", name))

    @hookimpl
    def zeus_on_try_end(self, record):
        self.events.append(("try", record.recurrence))

    @hookimpl
    def zeus_on_recurrence_end(self, recurrence, records):
        self.events.append(("recurrence", recurrence, len(records)))

    @hookimpl
    def zeus_on_job_end(self, summary):
        self.events.append(("end", summary.tries))


def test_event_hooks_fire_in_order(toy_plugin, tmp_path):
    obs = Observer()
    reg = toy_registry(toy_plugin, extra=[("observer", obs)])
    job = write_job(tmp_path / "job.toml", TOY_JOB)
    r = run_cli(reg, "run", str(job), "--set", "job.recurrences=2")
    assert r.exit_code == 0, r.output
    kinds = [e[0] for e in obs.events]
    assert kinds[0] == "start" and kinds[-1] == "end"
    assert obs.events[-1] == ("end", 2)
    assert [e for e in obs.events if e[0] == "recurrence"] == [("recurrence", 1, 1), ("recurrence", 2, 1)]
    # one window per epoch (6 for bs 32) plus the whole run, per try
    assert sum(1 for e in obs.events if e == ("measurement", "run")) == 2
    assert sum(1 for e in obs.events if e[0] == "measurement" and e[1].startswith("epoch-")) == 12


def test_max_power_sets_the_device_maximum_and_fixed_holds_its_limit(toy_plugin, tmp_path):
    reg = toy_registry(toy_plugin)
    job = write_job(tmp_path / "job.toml", TOY_JOB)
    spec = load_job(job, reg, ['power={plugin="max"}', "job.recurrences=1", "device.max_power_w=280"])
    runner = Runner(spec, reg)
    runner.build()
    runner.parts["device"].limit = 150.0
    try:
        summary = runner.run()
    finally:
        runner.close()
    assert summary.records[0].power_limit == 280.0
    spec = load_job(job, reg, ["job.recurrences=1", "job.store=other.sqlite"])
    runner = Runner(spec, reg)
    runner.build()
    try:
        summary = runner.run()
    finally:
        runner.close()
    assert summary.records[0].power_limit == 200.0


def test_max_power_is_a_no_op_without_power_control(toy_plugin, tmp_path):
    reg = toy_registry(toy_plugin)
    job = write_job(tmp_path / "job.toml", TOY_JOB.replace('[power]\nplugin = "fixed"\nlimit_w = 200\n', ""))
    r = run_cli(reg, "run", str(job), "--set", "device.can_set_power=false", "--output", "out")
    assert r.exit_code == 0, r.output
    assert Path("out/recurrences.csv").read_text().splitlines()[1].split(",")[3] == ""


def test_fixed_batch_size_defaults_to_the_workloads_default(toy_plugin, tmp_path):
    reg = toy_registry(toy_plugin)
    job = write_job(tmp_path / "job.toml", TOY_JOB.replace("default = 32\n", ""))
    spec = load_job(job, reg, ["job.recurrences=1"])
    runner = Runner(spec, reg)
    runner.build()
    try:
        assert runner.run().records[0].batch_size == 64
    finally:
        runner.close()


class ClockDevice:
    names = ["g0"]
    energy_sources = {"g0": "counter"}
    max_power_w = 300.0

    def __init__(self, options, context):
        self.resets = 0

    def clock(self):
        return 0.0

    def read_energy(self):
        return {"g0": 0.0}

    def supported_clocks(self):
        return [1410, 1200]

    def lock_clocks(self, mhz):
        raise AssertionError("the max plan never locks a clock")

    def reset_clocks(self):
        self.resets += 1


class ClockPlugin:
    @hookimpl
    def zeus_register_devices(self, register):
        register("clocked", ClockDevice)


def test_max_frequency_plan_resets_clocks_in_a_plan_only_job(tmp_path):
    from zeus_core.engine import registry as zreg

    reg = zreg.load(extra_plugins=[("clocked", ClockPlugin())])
    job = write_job(tmp_path / "job.toml", '[device]\nplugin = "clocked"\n[frequency_plan]\nplugin = "max"\n')
    spec = load_job(job, reg)
    runner = Runner(spec, reg)
    runner.build()
    try:
        summary = runner.run()
        assert runner.parts["device"].resets == 1
        assert summary.extra["frequency_plan"] == {"plan": "max", "clocks_reset": True}
        assert summary.tries == 0
    finally:
        runner.close()

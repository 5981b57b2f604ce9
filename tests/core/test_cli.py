"""`zeus run / validate / plugins` end to end (in-process, with the toy plugin)."""

from __future__ import annotations

import csv
import json
import math
import multiprocessing as mp
from pathlib import Path

import pytest
from zeus_test_helpers import TOY_JOB, run_cli, toy_registry, write_job

from zeus_core import Monitor
from zeus_core.engine.runner import Runner
from zeus_core.engine.session import RunSession
from zeus_core.engine.stores.sqlite import Store
from zeus_core.engine.validation import load_job


@pytest.fixture
def reg(toy_plugin):
    return toy_registry(toy_plugin)


@pytest.fixture
def job(tmp_path):
    return write_job(tmp_path / "job.toml", TOY_JOB)


def read_csv(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def test_run_writes_contract_outputs(reg, job):
    r = run_cli(reg, "run", str(job), "--output", "out")
    assert r.exit_code == 0, r.output
    assert "recurrence 3: 32@200W" in r.output
    rows = read_csv(Path("out/recurrences.csv"))
    assert list(rows[0]) == [
        "recurrence",
        "try",
        "batch_size",
        "power_limit",
        "epochs",
        "time_s",
        "energy_j",
        "cost",
        "reached",
        "power_limit_w",
        "energy_method",
        "energy_error_j",
    ]
    # how the energy was measured (the toy's counter) and its bound, unknown: the toy does not say how precise it is
    assert all(x["energy_method"] == "counter" and x["energy_error_j"] == "" for x in rows)
    assert [int(x["recurrence"]) for x in rows] == [1, 2, 3]
    assert all(x["reached"] == "True" and x["batch_size"] == "32" and float(x["power_limit"]) == 200 for x in rows)
    # toy: bs 32 -> 6 epochs; energy = time * min(limit, 250) W
    assert all(int(x["epochs"]) == 6 for x in rows)
    assert float(rows[0]["energy_j"]) == pytest.approx(float(rows[0]["time_s"]) * 200)
    assert float(rows[0]["cost"]) == pytest.approx(0.5 * float(rows[0]["energy_j"]) + 0.5 * 300 * float(rows[0]["time_s"]))
    summary = json.loads(Path("out/summary.json").read_text())
    assert (summary["energy_method"], summary["energy_error_j"]) == ("counter", None)
    assert summary["energy_j"] == pytest.approx(sum(float(x["energy_j"]) for x in rows))
    assert summary["time_s"] == pytest.approx(sum(float(x["time_s"]) for x in rows))
    assert summary["cost"] == pytest.approx(sum(float(x["cost"]) for x in rows))
    assert summary["knobs"]["batch_size"] == 32 and summary["knobs"]["power_limit"] == 200.0


def test_second_run_continues_from_the_store(reg, job):
    sets = ["--set", "batch_size.plugin=counting", "--set", "batch_size.default=64", "--set", "job.recurrences=2"]
    assert run_cli(reg, "run", str(job), *sets).exit_code == 0
    r = run_cli(reg, "run", str(job), *sets, "--output", "out")
    assert r.exit_code == 0, r.output
    rows = read_csv(Path("out/recurrences.csv"))
    assert [int(x["recurrence"]) for x in rows] == [1, 2, 3, 4]
    with Store(Path(".zeus/toyjob.sqlite")) as s:
        assert s.get("policy:batch_size") == {"observed": 4, "chosen": 4}
    r = run_cli(reg, "run", str(job), *sets, "--fresh", "--output", "out")
    assert [int(x["recurrence"]) for x in read_csv(Path("out/recurrences.csv"))] == [1, 2]


def test_dry_run_shows_provenance_and_runs_nothing(reg, job):
    r = run_cli(reg, "run", str(job), "--dry-run", "--set", "job.seed=9")
    assert r.exit_code == 0
    lines = {ln.split("│")[1].strip(): ln for ln in r.output.splitlines() if ln.count("│") >= 3}
    assert "9" in lines["$.job.seed"] and "--set" in lines["$.job.seed"]
    assert "file" in lines["$.job.recurrences"]
    assert "default" in lines["$.job.max_tries"]
    assert "'toy'" in lines["$.device.plugin"]
    assert not Path(".zeus").exists()
    # A training job without [power] holds the maximum limit, and --dry-run says so.
    r2 = run_cli(reg, "run", str(write_job(job.parent / "nopower.toml", TOY_JOB.split("[power]")[0])), "--dry-run")
    power = [ln for ln in r2.output.splitlines() if "$.power.plugin" in ln]
    assert len(power) == 1 and "'max'" in power[0] and "default" in power[0]


def test_bad_input_exits_2_and_validate_reports(reg, job, tmp_path):
    bad = write_job(tmp_path / "bad.toml", '[job]\nrecurrences = "x"\n[device]\nplugin = "nvm"\n')
    r = run_cli(reg, "validate", str(bad))
    assert r.exit_code == 2
    assert f"{bad}:2: expected int" in r.output
    r = run_cli(reg, "run", str(bad))
    assert r.exit_code == 2
    r = run_cli(reg, "validate", str(job))
    assert r.exit_code == 0 and "ok" in r.output
    r = run_cli(reg, "run", str(tmp_path / "missing.toml"))
    assert r.exit_code == 2 and "cannot read the job file" in r.output


def test_parts_that_do_not_fit_exit_2_before_running(reg, job, toy_plugin):
    before = toy_plugin.ToyDevice.restored
    r = run_cli(reg, "run", str(job), "--set", "device.can_set_power=false")
    assert r.exit_code == 2
    assert "needs a device with PowerLimitControl (power_limit_range(), power_limit(), set_power_limit())" in r.output
    assert "default power plugin 'max'" in r.output  # the fix names the registered default, not a hard-coded one
    assert toy_plugin.ToyDevice.restored == before + 1  # the device was closed (restored)
    r = run_cli(reg, "run", str(job), "--set", "power.limit_w=400")
    assert r.exit_code == 2 and "outside the device's range [100, 300] W" in r.output


def test_failing_workload_exits_1_keeps_earlier_results(reg, job, toy_plugin):
    before = toy_plugin.ToyDevice.restored
    r = run_cli(reg, "run", str(job), "--set", "workload.fail_at_try=3", "--output", "out")
    assert r.exit_code == 1
    assert "recurrence 3, try 1 (batch size 32) failed in the workload: RuntimeError: toy training crashed" in r.output
    assert toy_plugin.ToyDevice.restored == before + 1
    with Store(Path(".zeus/toyjob.sqlite")) as s:
        assert [t.recurrence for t in s.tries()] == [1, 2]


def test_retries_until_reached_and_max_tries_failure(reg, job):
    r = run_cli(
        reg, "run", str(job), "--set", "batch_size.default=256", "--set", "job.max_tries=2", "--set", "job.max_epochs=5", "--output", "out"
    )
    assert r.exit_code == 1
    assert "did not reach the target metric in 2 tries" in r.output
    with Store(Path(".zeus/toyjob.sqlite")) as s:
        tries = s.tries()
    assert [(t.try_index, t.reached, t.stopped, t.epochs) for t in tries] == [(1, False, "max-epochs", 5), (2, False, "max-epochs", 5)]


def test_plugins_json_and_version(toy_plugin):
    reg = toy_registry(toy_plugin, isolated=False)
    r = run_cli(reg, "plugins", "--json")
    data = {p["name"]: p for p in json.loads(r.output)}
    assert data["toy"]["provides"]["device"] == ["toy"]
    assert data["baseline"]["distribution"] == "zeus-plugins-baseline"
    r = run_cli(reg, "--version")
    assert "zeus-core" in r.output and "baseline: zeus-plugins-baseline 0.1.0" in r.output


class _Clockless:
    """A device whose every epoch costs the same: for early-stop arithmetic."""

    names = ["d"]
    energy_sources = {"d": "counter"}
    max_power_w = 100.0

    def __init__(self):
        self.t = 0.0

    def clock(self):
        return self.t

    def read_energy(self):
        return {"d": self.t * 100.0}


def test_early_stop_before_the_epoch_that_would_cross_the_bound(reg, job):
    spec = load_job(job, reg)
    dev = _Clockless()
    # Each epoch: 1 s at 100 W -> energy 100 J; cost = 0.5*100 + 0.5*100*1 = 100.
    s = RunSession(
        job=spec.job, batch_size=8, recurrence=2, try_index=1, cost_bound=350.0, devices=dev, monitor=Monitor(dev), power_policy=None
    )
    done = []
    for e in s.epochs():
        dev.t += 1.0
        done.append(e)
    assert done == [1, 2, 3] and s.stopped == "early-stop" and s.cost_so_far == pytest.approx(300)

    # A predictor lets the check act before the first epoch: the "never ran" case.
    class Predicting:  # a workload that knows its epoch cost (EpochCostPredictor)
        def run(self, session):
            pass

        def predict_epoch_cost(self, session):
            return 100.0

    s = RunSession(
        job=spec.job,
        batch_size=8,
        recurrence=2,
        try_index=1,
        cost_bound=50.0,
        devices=dev,
        monitor=Monitor(dev),
        power_policy=None,
        workload=Predicting(),
    )
    assert list(s.epochs()) == [] and s.stopped == "never-ran"
    s = RunSession(
        job=spec.job, batch_size=8, recurrence=1, try_index=1, cost_bound=math.inf, devices=dev, monitor=Monitor(dev), power_policy=None
    )
    for e in s.epochs():
        dev.t += 1.0
        if e == 4:
            s.mark_reached()
            break
    assert s.reached and s.epochs_done == 4 and s.stopped is None


def _run_job_in_process(job_path: str, n: int) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import conftest

    from zeus_core.engine import registry as zreg

    reg = zreg.load(extra_plugins=[("toy", conftest._import_toy())])
    spec = load_job(
        job_path,
        reg,
        [
            "batch_size.plugin=counting",
            "batch_size.default=64",
            f"job.recurrences={n}",
            f"job.store={Path(job_path).parent / 'shared.sqlite'}",
        ],
    )
    runner = Runner(spec, reg)
    runner.build()
    try:
        runner.run()
    finally:
        runner.close()


def test_four_concurrent_zeus_runs_of_one_job_lose_nothing(job):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_run_job_in_process, args=(str(job), 3)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with Store(job.parent / "shared.sqlite") as s:
        recs = sorted(t.recurrence for t in s.tries())
        assert recs == list(range(1, 13))
        assert s.get("policy:batch_size") == {"observed": 12, "chosen": 12}
        assert s.get("runner")["next_recurrence"] == 13


class _BoundedPolicy:
    """Tries 32 then, from recurrence 2, 16 with its own tighter bound."""

    def __init__(self, options, context):
        self.bound = None

    def choose(self, ctx):
        return 32 if ctx.recurrence == 1 else 16

    def try_cost_bound(self, ctx, batch_size):
        return 0.5 * ctx.min_cost if batch_size == 16 else None

    def observe(self, ctx, record):
        pass

    def get_state(self):
        return None

    def set_state(self, state):
        pass


def test_policy_can_tighten_the_bound_of_its_own_tries(toy_plugin, job):
    from zeus_core import hookimpl

    class P:
        @hookimpl
        def zeus_register_batch_size_policies(self, register):
            register("bounded", _BoundedPolicy)

    reg = toy_registry(toy_plugin, extra=[("bounded", P())])
    spec = load_job(job, reg, ['batch_size={plugin="bounded"}', "job.recurrences=2", "job.max_tries=1"])
    runner = Runner(spec, reg)
    runner.build()
    try:
        runner.run_recurrence()
        with pytest.raises(Exception, match="did not reach the target metric in 1 tries"):
            runner.run_recurrence()
    finally:
        tries = runner.store.tries()
        runner.close()
    first, second = tries
    assert first.reached and not second.reached and second.stopped == "early-stop"
    assert second.cost <= 0.5 * first.cost  # beta (2.0) alone would have let it run to the target


def test_unusable_store_exits_2_naming_the_fix(reg, job, tmp_path):
    (tmp_path / "afile").write_text("x")
    r = run_cli(reg, "run", str(job), "--set", "job.store=afile/state.sqlite")
    assert r.exit_code == 2
    assert "cannot create the store" in r.output and "afile is a file, not a folder" in r.output and "job.store" in r.output
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not sqlite" * 200)
    r = run_cli(reg, "run", str(job), "--set", f"job.store={bad}")
    assert r.exit_code == 2 and "is not a zeus store" in r.output and bad.read_text() == "not sqlite" * 200


def test_set_into_a_value_is_a_clear_error(reg, job):
    r = run_cli(reg, "validate", str(job), "--set", "job.name.first=x")
    assert r.exit_code == 2
    assert "'name' is a value, not a table" in r.output


def test_zeus_run_opens_its_store_once_and_dry_run_leaves_none_open(reg, job, monkeypatch):
    """The job's validation checks its store; the run takes that store rather than opening it again."""
    from zeus_core.engine import assembly, validation
    from zeus_core.engine.stores import locations

    opened: list = []
    closed: list = []
    real = locations.open_store

    def counting(*args, **kwargs):
        store = real(*args, **kwargs)
        opened.append(store)
        close = store.close
        store.close = lambda: (closed.append(store), close())
        return store

    monkeypatch.setattr(validation, "open_store", counting)
    monkeypatch.setattr(assembly, "open_store", counting)
    r = run_cli(reg, "run", str(job), "--set", "job.recurrences=2")
    assert r.exit_code == 0, r.output
    assert len(opened) == 1
    assert closed == opened  # by the run, at its end
    opened.clear()
    closed.clear()
    r = run_cli(reg, "run", str(job), "--dry-run")
    assert r.exit_code == 0, r.output
    assert len(opened) == 1 and closed == opened  # the check's store, closed: a dry run leaves none open

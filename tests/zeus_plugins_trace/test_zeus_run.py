"""End to end: `zeus run` on the trace device and workload with the mab and jit policies."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from zeus_core import JobOptions
from zeus_core.cli import main as zcli
from zeus_core.engine import registry as zreg
from zeus_core.engine.stores.sqlite import Store
from zeus_plugins_mab import plugin as mab_plugin
from zeus_plugins_mab.options import MabOptions
from zeus_plugins_mab.policy import MabPolicy
from zeus_plugins_trace import plugin as trace_plugin
from zeus_plugins_trace.device import TraceDevice, TraceDeviceOptions
from zeus_plugins_trace.options import TraceWorkloadOptions
from zeus_plugins_trace.simulate import simulate
from zeus_plugins_trace.tracesets import load_workload_trace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "zeus_nsdi23"
CONTRACT = (
    "job.recurrences",
    "job.seed",
    "job.eta_knob",
    "job.beta_knob",
    "job.target_metric",
    "job.max_epochs",
    "workload.traces",
    "workload.dataset",
    "workload.model",
    "workload.optimizer",
    "device.gpu",
    "batch_size.default",
)


@pytest.fixture(scope="module")
def reg():
    return zreg.load(entry_points=False, extra_plugins=[("trace", trace_plugin), ("mab", mab_plugin)])


def zeus(reg, *args):
    return CliRunner().invoke(zcli.cli, list(args), obj={"registry": reg}, catch_exceptions=False)


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_main_job_on_synthetic_trace_writes_baselines_and_plots(reg, tmp_path):
    out = tmp_path / "out"
    res = zeus(
        reg,
        "run",
        str(EXAMPLES / "cifar100.toml"),
        "--set",
        "job.recurrences=25",
        "--set",
        f'job.store="{tmp_path / "s.sqlite"}"',
        "--output",
        str(out),
    )
    assert res.exit_code == 0, res.output
    assert "SYNTHETIC" in res.output and "regret" in res.output
    summary = json.loads((out / "summary.json").read_text())
    w = summary["workload"]
    assert w["synthetic"] is True
    assert w["baselines"]["default"]["batch_size"] == 1024 and w["baselines"]["default"]["power_limit"] == 250
    assert w["baselines"]["oracle"]["cost"] <= w["baselines"]["default"]["cost"]
    assert w["vs_default"]["energy_saved"] > 0.2
    assert len({r["recurrence"] for r in rows(out / "recurrences.csv")}) == 25
    for png in ("cost_per_recurrence.png", "pareto.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("name", ["cifar100", "imagenet", "librispeech", "movielens-1m", "squad", "sentiment140"])
def test_every_example_accepts_the_contract_keys_on_public_traces(reg, tmp_path, shared_data, name):
    text = (EXAMPLES / f"{name}.toml").read_text()
    for key in CONTRACT:
        section, field = key.split(".")
        assert f"\n{field} = " in text.split(f"[{section}]")[1].split("\n[")[0], f"{name}.toml lacks {key}"
    res = zeus(
        reg,
        "run",
        str(EXAMPLES / f"{name}.toml"),
        "--set",
        "job.recurrences=2",
        "--set",
        "device.gpu=a40",
        "--set",
        f'workload.traces="{shared_data / "zeus_nsdi23"}"',
        "--set",
        f'job.store="{tmp_path / "s.sqlite"}"',
    )
    assert res.exit_code == 0, res.output
    assert "SYNTHETIC" not in res.output and "on a40" in res.output


def test_runner_matches_fast_simulator_exactly(reg, tmp_path):
    """The runner (epoch by epoch, JIT windows, store) and the array simulator agree try by try."""
    out = tmp_path / "out"
    args = [
        "--set",
        "job.recurrences=40",
        "--set",
        "job.seed=3",
        "--set",
        "device.gpu=p100",
        "--set",
        f'job.store="{tmp_path / "s.sqlite"}"',
    ]
    res = zeus(reg, "run", str(EXAMPLES / "squad.toml"), *args, "--output", str(out))
    assert res.exit_code == 0, res.output
    wt = load_workload_trace(TraceWorkloadOptions(dataset="squad", model="bert_base_uncased", optimizer="adamw"), "p100", 84.0, EXAMPLES)
    job = JobOptions(name="x", recurrences=40, seed=3, eta_knob=0.5, beta_knob=2.0, target_metric=84.0, max_epochs=6)
    device = TraceDevice(TraceDeviceOptions(gpu="p100"))
    device.attach(wt)  # the runner's mab factory hands the policy the device's predictions too
    sim = simulate(wt, MabPolicy(MabOptions(default=32), 3, device.predict_epoch), job, default_batch_size=32)
    got = rows(out / "recurrences.csv")
    assert len(got) == len(sim.records)
    for a, b in zip(got, sim.records):
        assert (int(a["batch_size"]), float(a["power_limit"]), int(a["epochs"]), a["reached"]) == (
            b.batch_size,
            b.power_limit,
            b.epochs,
            str(b.reached),
        )
        assert float(a["cost"]) == pytest.approx(b.cost, rel=1e-9)


def test_one_recurrence_at_a_time_equals_one_long_run(reg, tmp_path):
    """Policy state, JIT choices and the path generator all resume from the store
    (12 invocations cover exploration and the start of Thompson sampling)."""
    job = str(EXAMPLES / "sentiment140.toml")
    res = zeus(reg, "run", job, "--set", "job.recurrences=12", "--set", f'job.store="{tmp_path / "a.sqlite"}"')
    assert res.exit_code == 0, res.output
    for _ in range(12):
        res = zeus(reg, "run", job, "--set", "job.recurrences=1", "--set", f'job.store="{tmp_path / "b.sqlite"}"')
        assert res.exit_code == 0, res.output
    with Store(tmp_path / "a.sqlite") as a, Store(tmp_path / "b.sqlite") as b:
        one, many = a.tries(), b.tries()
    assert [(r.recurrence, r.try_index, r.batch_size, r.power_limit, r.epochs, r.reached) for r in one] == [
        (r.recurrence, r.try_index, r.batch_size, r.power_limit, r.epochs, r.reached) for r in many
    ]
    assert len({r.batch_size for r in one}) >= 3
    # The virtual clock of a fresh process starts at 0: sums may differ in the last bits.
    assert [r.cost for r in one] == pytest.approx([r.cost for r in many], rel=1e-9)


def test_trace_workload_errors_say_what_to_do(reg, tmp_path):
    res = zeus(reg, "run", str(EXAMPLES / "cifar100.toml"), "--set", "device.gpu=h100", "--set", f'job.store="{tmp_path / "s.sqlite"}"')
    assert res.exit_code == 2 and "unknown GPU 'h100'" in res.output
    res = zeus(
        reg, "run", str(EXAMPLES / "cifar100.toml"), "--set", 'workload.traces="nowhere"', "--set", f'job.store="{tmp_path / "s.sqlite"}"'
    )
    assert res.exit_code == 2 and "zeus traces synth --out" in res.output

"""``[workload] allocation = "allocation.json"``: uneven local batches and per-rank power limits.

Two gloo ranks train by an allocation of 20 + 12 samples at 250 W / 150 W on
the ``wall`` test device: each rank sees its own local batch, each device is
set to its own limit (journaled) and put back, and the trained parameters
equal a single-process run on the whole global batch. Bad allocations are
bad input (exit 2) before any rank starts or any limit changes.
"""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
import torch
from zeus_test_helpers import run_cli, write_job

from zeus_core.engine.stores.sqlite import Store

LOCAL = [20, 12]
LIMITS = [250, 150]
STEPS = 3

TRAINER = textwrap.dedent('''
    import json
    import torch

    from allocation_model import make_data, make_model

    def train(batch_size, zeus):
        """STEPS global batches, laid out rank after rank; each rank steps on its slice of each."""
        steps, B = zeus.args["steps"], zeus.batch_size
        x, y = make_data(B * steps)
        model = zeus.wrap_model(make_model())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        seen = []
        for epoch in zeus.epochs():
            for i in zeus.iterate(range(steps)):
                xb, yb = x[i * B:(i + 1) * B][zeus.batch_slice], y[i * B:(i + 1) * B][zeus.batch_slice]
                seen.append(len(xb))
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(xb), yb).backward()
                opt.step()
            zeus.report_metric(1.0)
        shard = zeus.shard(B * steps + 5)
        plan = zeus.allocation
        with open(zeus.args["out"].format(rank=zeus.rank), "w") as f:
            json.dump({"local_batch_size": batch_size, "batch_size": B, "seen": seen, "share": zeus.share,
                       "shard": [shard.start, shard.stop], "gpu": plan.gpu, "power_limit": plan.power_limit,
                       "params": torch.cat([p.detach().reshape(-1) for p in model.parameters()]).tolist()}, f)
''')

JOB = """
[job]
name = "alloc"
recurrences = 1
target_metric = 0.5
max_epochs = 2
beta_knob = inf
store = "state.sqlite"
processes = {processes}

[workload]
plugin = "torch"
entry = "{module}:train"
allocation = "{allocation}"
timeout_s = 60
{workload}

[workload.args]
out = "{out}"
steps = {steps}

[device]
plugin = "wall"
log = "{log}"

[batch_size]
{batch_size}
{extra}
"""


def allocation(local=LOCAL, limits=LIMITS, **extra) -> dict:
    ranks = [{"rank": r, "gpu": f"gpu-{'AB'[r % 2]}", "local_batch": b, "power_limit": w} for r, (b, w) in enumerate(zip(local, limits))]
    return {"ranks": ranks, "global_batch_size": sum(local), **extra}


def alloc_job(tmp_path, module_name, data=None, *, processes=2, workload="", batch_size='plugin = "fixed"', extra="", text=None):
    """The job, its trainer (a fresh module) and its allocation.json (``data``, or ``text`` as it is)."""
    (tmp_path / f"{module_name}.py").write_text(TRAINER)
    alloc = tmp_path / "allocation.json"
    alloc.write_text(text if text is not None else json.dumps(data if data is not None else allocation()))
    return write_job(
        tmp_path / "job.toml",
        JOB.format(
            processes=processes,
            module=module_name,
            allocation="allocation.json",
            workload=workload,
            steps=STEPS,
            out=f"{tmp_path}/out-{{rank}}.json",
            log=f"{tmp_path}/device-{{rank}}.jsonl",
            batch_size=batch_size,
            extra=extra,
        ),
    )


def device_log(tmp_path, rank):
    path = tmp_path / f"device-{rank}.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def single_process_params(local=None) -> np.ndarray:
    """The reference: STEPS SGD steps of one process on the whole global batch.

    With ``local``, the control instead: the gradients of those local batches
    averaged with equal weights (what plain DDP does).
    """
    ns: dict = {}
    exec(TRAINER, ns)
    B = sum(LOCAL)
    x, y = ns["make_data"](B * STEPS)
    model = ns["make_model"]()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(STEPS):
        xb, yb = x[i * B : (i + 1) * B], y[i * B : (i + 1) * B]
        opt.zero_grad()
        if local is None:
            torch.nn.functional.mse_loss(model(xb), yb).backward()
        else:
            start = 0
            for b in local:
                (torch.nn.functional.mse_loss(model(xb[start : start + b]), yb[start : start + b]) / len(local)).backward()
                start += b
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()


def test_two_ranks_train_by_the_allocation(tmp_path, registry, module_name):
    path = alloc_job(tmp_path, module_name)
    result = run_cli(registry, "run", str(path), "--output", str(tmp_path / "results"))
    assert result.exit_code == 0, result.output
    outs = [json.loads((tmp_path / f"out-{r}.json").read_text()) for r in range(2)]
    B = sum(LOCAL)
    for r, out in enumerate(outs):
        # Each rank's observed local batch is its allocated one, in every step.
        assert out["local_batch_size"] == LOCAL[r] and out["seen"] == [LOCAL[r]] * STEPS
        assert out["batch_size"] == B and out["share"] == pytest.approx(LOCAL[r] / B)
        assert (out["gpu"], out["power_limit"]) == (f"gpu-{'AB'[r]}", LIMITS[r])
    # Shards in proportion to the local batch: 3 whole global batches of 101 samples, the rest left out.
    assert [o["shard"] for o in outs] == [[0, 60], [60, 96]]
    # Each device held its allocated limit (set once, not rank 0's) and was put back; no power policy acted.
    for r in range(2):
        assert device_log(tmp_path, r) == [{"rank": r, "event": "set", "w": float(LIMITS[r])}, {"rank": r, "event": "restore", "w": 300.0}]
    # The step equals one process's step on the global batch; plain DDP averaging would not.
    expected = single_process_params()
    for r, out in enumerate(outs):
        np.testing.assert_allclose(out["params"], expected, rtol=0, atol=1e-9, err_msg=f"rank {r}")
    assert np.abs(single_process_params(LOCAL) - expected).max() > 1e-3
    (t,) = Store(tmp_path / "state.sqlite").tries()
    assert t.reached and t.batch_size == B and t.power_limit == LIMITS[0]
    summary = json.loads((tmp_path / "results" / "summary.json").read_text())
    got = summary["workload"]["allocation"]
    assert [(x["local_batch"], x["power_limit"]) for x in got["ranks"]] == list(zip(LOCAL, LIMITS))
    assert "trained by the allocation" in result.output


def test_a_policy_choosing_another_batch_fails_before_training(tmp_path, registry, module_name):
    # One process, one rank: the single-process path; the test policy ignores the workload's offer.
    path = alloc_job(tmp_path, module_name, allocation([32], [200]), processes=1, batch_size='plugin = "always"\nsize = 48')
    result = run_cli(registry, "run", str(path))
    assert result.exit_code == 1
    out = " ".join(result.output.split())
    assert "the [batch_size] policy 'always' chose batch size 48, but workload.allocation" in out
    assert "fixes the global batch at 32" in out
    assert not (tmp_path / "out-0.json").exists() and device_log(tmp_path, 0) == []
    # With the batch it offers, the same job trains on one process at the allocated limit.
    result = run_cli(registry, "run", str(path), "--fresh", "--set", 'batch_size={plugin="fixed"}')
    assert result.exit_code == 0, result.output
    out = json.loads((tmp_path / "out-0.json").read_text())
    assert out["seen"] == [32] * STEPS
    np.testing.assert_allclose(out["params"], single_process_params(), rtol=0, atol=1e-12)
    assert device_log(tmp_path, 0) == [{"rank": 0, "event": "set", "w": 200.0}, {"rank": 0, "event": "restore", "w": 300.0}]


BAD = [
    # (name, allocation.json text or data, job changes, expected message parts)
    ("missing file", None, {}, ["allocation file", "nope.json does not exist; fix the path, or write it with an allocator"]),
    ("not JSON", "{ranks: [", {}, ["allocation.json: not valid JSON (line 1, column 2"]),
    ("not an allocation", {"method": "optimal"}, {}, ['has neither "ranks"', 'nor "gpus"']),
    ("bad field", allocation([20, 0], [250, 150]), {}, ["$.ranks[1].local_batch: must be a positive integer, got 0"]),
    (
        "several bad fields",
        {"ranks": [{"rank": 0, "local_batch": 20.5, "power_limit": 250}, {"rank": 3, "local_batch": 12}]},
        {},
        [
            "$.ranks[0].local_batch: must be a positive integer, got 20.5",
            "$.ranks[1].rank: is 3, expected 1",
            "$.ranks[1]: missing 'power_limit'",
        ],
    ),
    (
        "inconsistent global batch",
        allocation(global_batch_size=40),
        {},
        ["$.global_batch_size: is 40 but the ranks' local batches [20, 12] sum to 32"],
    ),
    (
        "ranks and gpus disagree",
        allocation(gpus=[{"name": "gpu-A", "count": 2, "local_batch": 16, "power_limit": 200}]),
        {},
        ["$.ranks[0]: is gpu-A batch 20 at 250 W but $.gpus gives rank 0 gpu-A batch 16 at 200 W"],
    ),
    (
        "rank count",
        allocation([10, 10, 12], [250, 150, 150]),
        {},
        ["allocates 3 ranks (local batches [10, 10, 12]) but job.processes = 2; set job.processes = 3"],
    ),
    (
        "batch-size policy",
        None,
        {"batch_size": 'plugin = "fixed"\ndefault = 64'},
        ["batch_size.default = 64, but the allocation fixes the global batch at 32; remove batch_size.default"],
    ),
    (
        "workload batch sizes",
        None,
        {"workload": "batch_sizes = [16, 32]"},
        ["workload.batch_sizes = [16, 32], but the allocation fixes the global batch at 32"],
    ),
    (
        "power policy",
        None,
        {"extra": '[power]\nplugin = "fixed"\nlimit_w = 200'},
        ["[power] plugin 'fixed': the allocation sets every rank's power limit", "remove the [power] table"],
    ),
    (
        "rank 0 limit out of range",
        allocation([20, 12], [50, 150]),
        {},
        ["rank 0 a power limit of 50 W, outside the range [100, 300] W of device 'wall' (rank 0)"],
    ),
]


@pytest.mark.parametrize("name,data,changes,messages", BAD, ids=[b[0] for b in BAD])
def test_bad_allocations_are_bad_input_before_anything_runs(tmp_path, registry, module_name, name, data, changes, messages):
    text = data if isinstance(data, str) else None
    path = alloc_job(tmp_path, module_name, None if isinstance(data, str) else data, text=text, **changes)
    if name == "missing file":
        path.write_text(path.read_text().replace('allocation = "allocation.json"', 'allocation = "nope.json"'))
    result = run_cli(registry, "run", str(path))
    assert result.exit_code == 2, result.output
    out = " ".join(result.output.split())
    assert "[workload] plugin 'torch':" in out
    for m in messages:
        assert m in out, (m, out)
    if name not in ("batch-size policy", "workload batch sizes", "power policy", "rank count", "rank 0 limit out of range"):
        assert "allocation" in out and ("allocation.json" in out or "nope.json" in out)  # names the file
    # Nothing half-done: no rank trained, no limit changed, no try recorded.
    assert not list(tmp_path.glob("out-*.json")) and not list(tmp_path.glob("device-*.jsonl"))
    assert Store(tmp_path / "state.sqlite").tries() == []


def test_a_follower_whose_device_cannot_take_its_limit_stops_the_job(tmp_path, registry, module_name):
    path = alloc_job(tmp_path, module_name, allocation([20, 12], [250, 50]))
    result = run_cli(registry, "run", str(path))
    assert result.exit_code == 2
    out = " ".join(result.output.split())
    assert "rank 1 of 2 could not start" in out
    assert "rank 1 a power limit of 50 W, outside the range [100, 300] W of device 'wall' (rank 1)" in out
    assert device_log(tmp_path, 0) == [] and device_log(tmp_path, 1) == []


def test_the_option_is_validated(tmp_path, registry, module_name):
    path = alloc_job(tmp_path, module_name)
    result = run_cli(registry, "validate", str(path), "--set", 'workload.allocation=""')
    assert result.exit_code == 2
    assert "allocation must not be empty" in result.output and "$.workload.allocation" in result.output


def test_an_allocation_the_hetero_allocator_wrote_trains_the_torch_workload(tmp_path, registry, module_name, repo_root, shared_data):
    """The contract between two plugins that never import each other: what ``[allocation]
    plugin = "hetero"`` writes is what ``[workload] allocation`` trains by."""
    allocator_job = repo_root / "examples" / "hetero" / "cifar100_a10_t4" / "job.toml"
    result = run_cli(
        registry, "run", str(allocator_job), "--output", str(tmp_path / "plan"), "--set", f"job.store={tmp_path / 'plan.sqlite'}"
    )
    assert result.exit_code == 0, result.output
    written = (tmp_path / "plan" / "allocation.json").read_text()
    gpus = json.loads(written)["gpus"]  # one A10 and one T4: two ranks
    path = alloc_job(tmp_path, module_name, text=written)
    # The test device takes the T4's low limit once its range reaches down to it.
    result = run_cli(registry, "run", str(path), "--set", f"device.min_power_w={min(g['power_limit'] for g in gpus)}")
    assert result.exit_code == 0, result.output
    for r, gpu in enumerate(gpus):
        out = json.loads((tmp_path / f"out-{r}.json").read_text())
        assert (out["gpu"], out["local_batch_size"], out["power_limit"]) == (gpu["name"], gpu["local_batch"], gpu["power_limit"])
        assert out["seen"] == [gpu["local_batch"]] * STEPS
        assert device_log(tmp_path, r)[0] == {"rank": r, "event": "set", "w": float(gpu["power_limit"])}


def test_the_handle_splits_and_weighs_uneven_batches():
    from zeus_core import read_allocation
    from zeus_plugins_torch.loop import ZeusLoop

    # Without an allocation: near-even; a remainder makes the batches uneven, so wrap_model weighs by share.
    loops = [ZeusLoop(None, batch_size=33, base_batch_size=None, rank=r, world_size=2) for r in range(2)]
    assert [(z.local_batch_size, z.batch_slice, z.uneven) for z in loops] == [(17, slice(0, 17), True), (16, slice(17, 33), True)]
    assert sum(z.share for z in loops) == pytest.approx(1.0)
    assert not ZeusLoop(None, batch_size=32, base_batch_size=None, rank=1, world_size=2).uneven
    plan = read_allocation(allocation())
    z = ZeusLoop(None, batch_size=32, base_batch_size=None, rank=1, world_size=2, allocation=plan)
    assert (z.local_batch_size, z.batch_slice, z.uneven, z.allocation.power_limit) == (12, slice(20, 32), True, 150)
    with pytest.raises(ValueError, match=r"zeus.shard\(31\): fewer samples than one global batch \(32\)"):
        z.shard(31)
    with pytest.raises(ValueError, match=r"global batch 48 over 2 processes does not match the allocation \(32 over 2\)"):
        ZeusLoop(None, batch_size=48, base_batch_size=None, rank=1, world_size=2, allocation=plan)
    even = read_allocation(allocation([16, 16], [200, 200]))
    assert not ZeusLoop(None, batch_size=32, base_batch_size=None, rank=0, world_size=2, allocation=even).uneven

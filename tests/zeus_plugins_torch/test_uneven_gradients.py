"""Uneven local batches over 3 gloo processes give the same step as one process on the whole batch."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from zeus_plugins_hetero.ddp import RankPlan  # noqa: E402

WORKER = Path(__file__).with_name("ddp_worker.py")
LOCAL_BATCHES = [3, 8, 13]


def _load_worker():
    import importlib.util

    spec = importlib.util.spec_from_file_location("hetero_ddp_worker", WORKER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()


def test_uneven_batches_match_the_single_process_step(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    world = len(LOCAL_BATCHES)
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(r), str(world), str(tmp_path / "store"), str(tmp_path),
             ",".join(map(str, LOCAL_BATCHES))],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for r in range(world)
    ]
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out

    worker = _load_worker()
    model, x, y = worker.model_and_data(sum(LOCAL_BATCHES))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    expected = _flat(model)
    for way in ("manual", "ddp"):
        for r in range(world):
            got = np.load(tmp_path / f"{way}_{r}.npy")
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6, err_msg=f"{way} rank {r}")

    # Control: plain averaging of the ranks' gradients (what DDP does by default) is measurably different.
    model, x, y = worker.model_and_data(sum(LOCAL_BATCHES))
    grads = []
    start = 0
    for b in LOCAL_BATCHES:
        model.zero_grad()
        torch.nn.functional.mse_loss(model(x[start:start + b]), y[start:start + b]).backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
        start += b
    averaged = torch.cat([p.detach().reshape(-1) for p in model.parameters()]) - 0.1 * torch.stack(grads).mean(0)
    assert np.abs(averaged.numpy() - expected).max() > 1e-3


def test_rank_plan_from_allocation_json(tmp_path):
    data = {"gpus": [{"name": "A10", "count": 2, "local_batch": 48, "power_limit": 150},
                     {"name": "T4", "count": 1, "local_batch": 32, "power_limit": 70}]}
    (tmp_path / "allocation.json").write_text(json.dumps(data))
    plans = [RankPlan.from_allocation(tmp_path / "allocation.json", r) for r in range(3)]
    assert [(p.gpu, p.batch_slice, p.power_limit) for p in plans] == [
        ("A10", slice(0, 48), 150), ("A10", slice(48, 96), 150), ("T4", slice(96, 128), 70)]
    assert plans[2].share == 0.25

    class Devices:
        limit = None

        def set_power_limit(self, w):
            self.limit = w

    dev = Devices()
    plans[2].apply_power_limit(dev)
    assert dev.limit == 70
    with pytest.raises(ValueError, match="rank 3 is not in the allocation, which has 3 GPUs"):
        RankPlan.from_allocation(data, 3)


def test_the_reader_is_the_core_one_and_reads_what_the_allocator_writes(repo_root, hetero_aws, tmp_path):
    """One contract for both plugins: hetero writes allocation.json, the core reads it (for the torch workload too)."""
    import zeus_core.allocation as core
    from zeus_core import registry as zreg
    from zeus_test_helpers import run_cli

    from zeus_plugins_hetero import ddp
    from zeus_plugins_hetero import plugin as hetero_plugin

    assert ddp.RankPlan is core.RankPlan and ddp.read_allocation is core.read_allocation
    assert issubclass(ddp.AllocationError, ValueError)
    reg = zreg.load(entry_points=False, extra_plugins=[("hetero", hetero_plugin)])
    job = repo_root / "examples" / "hetero" / "cifar100_a10_t4" / "job.toml"
    assert run_cli(reg, "run", str(job), "--output", str(tmp_path)).exit_code == 0
    data = json.loads((tmp_path / "allocation.json").read_text())
    plan = ddp.read_allocation(tmp_path / "allocation.json")  # both "ranks" and "gpus": checked to agree
    assert plan.global_batch == data["global_batch_size"] == 1024
    assert [(r.gpu, r.local_batch, r.power_limit) for r in plan.ranks] == [
        (g["name"], g["local_batch"], g["power_limit"]) for g in data["gpus"]]

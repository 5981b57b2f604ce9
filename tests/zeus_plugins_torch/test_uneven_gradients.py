"""Uneven local batches over 3 gloo processes give the same step as one process on the whole batch.

``zeus_plugins_torch.gradients`` on its own, without the workload: each rank
scales its gradient by its share and the ranks sum, by hand
(``allreduce_weighted_gradients``) and through DDP's comm hook. The workload's
use of it (``zeus.wrap_model``) is tested end to end in test_allocation.py.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

WORKER = Path(__file__).with_name("uneven_gradients_worker.py")
LOCAL_BATCHES = [3, 8, 13]


def _load_worker():
    import importlib.util

    spec = importlib.util.spec_from_file_location("uneven_gradients_worker", WORKER)
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
            [sys.executable, str(WORKER), str(r), str(world), str(tmp_path / "store"), str(tmp_path), ",".join(map(str, LOCAL_BATCHES))],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
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
        torch.nn.functional.mse_loss(model(x[start : start + b]), y[start : start + b]).backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
        start += b
    averaged = torch.cat([p.detach().reshape(-1) for p in model.parameters()]) - 0.1 * torch.stack(grads).mean(0)
    assert np.abs(averaged.numpy() - expected).max() > 1e-3

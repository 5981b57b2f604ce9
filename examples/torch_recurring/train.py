"""A recurring training job that really trains: an MLP on generated data to a validation accuracy.

The data are a ten-class problem drawn from a fixed generator (no download):
Gaussian clusters in 32 dimensions pushed through a fixed random ``tanh``
layer, with noise, so the target accuracy is reachable but not trivial. The
model is a 512-wide two-hidden-layer MLP trained with Adam, whose learning
rate (tuned at ``default_batch_size``) zeus scales with the square root of the
batch size. Small batches reach the target in fewer epochs but each epoch is
slow; large batches need more epochs: the batch-size policy has a real
trade-off to find.

``zeus run job.toml`` calls :func:`train` once per try with the batch size the
policy chose. Running this file directly does the same through
:func:`zeus_plugins_torch.run_job`, the way a training script would.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch


@lru_cache(maxsize=4)
def make_data(n: int, seed: int, dim: int = 32, classes: int = 10, noise: float = 1.3):
    """``n`` samples of the problem; the problem itself (clusters, mixing layer) is fixed."""
    g = torch.Generator().manual_seed(1000)
    centers = torch.randn(classes, dim, generator=g)
    mixing = torch.randn(dim, dim, generator=g) / math.sqrt(dim)
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, classes, (n,), generator=g)
    z = centers[y] + noise * torch.randn(n, dim, generator=g)
    x = torch.tanh(z @ mixing) + 0.1 * torch.randn(n, dim, generator=g)
    return x, y


def train(batch_size: int, zeus) -> None:
    """One try: train from scratch at ``batch_size`` until zeus ends the epochs."""
    a = zeus.args
    x, y = make_data(a.get("train_samples", 8000), seed=1)
    xv, yv = make_data(a.get("val_samples", 2000), seed=2)
    own = torch.tensor(list(zeus.shard(len(x))))  # this rank's share (all of it in one process)
    x, y = x[own], y[own]
    width = a.get("width", 512)
    model = torch.nn.Sequential(
        torch.nn.Linear(x.shape[1], width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, 10),
    ).to(zeus.device)
    model = zeus.wrap_model(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=a.get("lr", 3e-5))
    zeus.scale_optimizer(optimizer)  # Adam: learning rate x sqrt(batch size / default)
    xv, yv = xv.to(zeus.device), yv.to(zeus.device)
    for _epoch in zeus.epochs():
        model.train()
        order = torch.randperm(len(x))
        batches = [order[i : i + batch_size] for i in range(0, len(x) - batch_size + 1, batch_size)]
        for idx in zeus.iterate(batches):
            xb, yb = x[idx].to(zeus.device), y[idx].to(zeus.device)
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            accuracy = (model(xv).argmax(1) == yv).float().mean().item()
        zeus.report_metric(accuracy)


if __name__ == "__main__":
    import os
    import sys
    from pathlib import Path

    from zeus_plugins_torch import run_job

    # Also under torchrun (`torchrun --nproc-per-node=2 train.py`): the ranks are one job, rank 0 reports.
    summary = run_job(Path(__file__).with_name("job.toml"), overrides=sys.argv[1:])
    if os.environ.get("RANK", "0") == "0":
        print(f"{summary.recurrences} recurrences, {summary.tries} tries, cost {summary.cost:,.1f}, knobs {summary.knobs}")

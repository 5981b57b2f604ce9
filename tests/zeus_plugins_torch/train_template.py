"""The training function the tests copy next to their job files (a fresh module name per test)."""

import json
import os

import torch


def make_data(seed, n=512, d=8):
    w = torch.randn(d, generator=torch.Generator().manual_seed(1234))
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed))
    return x, (x @ w > 0).long()


def train(batch_size, zeus):
    """Logistic regression to a validation accuracy; zeus.args steer the test cases."""
    a = zeus.args
    if a.get("fail_recurrence") == zeus.recurrence and a.get("fail_rank", 0) == zeus.rank:
        if a.get("hard"):
            os._exit(7)
        raise ZeroDivisionError("training blew up on purpose")
    x, y = make_data(0)
    xv, yv = make_data(1, 256)
    idx = torch.tensor(list(zeus.shard(len(x))))
    x, y = x[idx], y[idx]
    model = zeus.wrap_model(torch.nn.Linear(x.shape[1], 2))
    opt = torch.optim.SGD(model.parameters(), lr=a.get("lr", 0.05))
    factor = zeus.scale_optimizer(opt) if a.get("scale") else 1.0
    seen = []
    for epoch in zeus.epochs():
        perm = torch.randperm(len(x))
        batches = [perm[i : i + batch_size] for i in range(0, len(x) - batch_size + 1, batch_size)]
        for b in zeus.iterate(batches):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x[b]), y[b]).backward()
            opt.step()
        with torch.no_grad():
            acc = (model(xv).argmax(1) == yv).float().mean().item()
        seen.append(epoch)
        stalled = a.get("stall_from") is not None and zeus.recurrence >= a["stall_from"]
        zeus.report_metric(0.0 if stalled else acc)  # stalled: as if the data changed and the target is out of reach
        if a.get("diverge_rank") == zeus.rank:
            zeus.report_metric(acc)  # a call the other ranks do not make
    out = a.get("out")
    if out:
        rec = {
            "rank": zeus.rank,
            "world_size": zeus.world_size,
            "recurrence": zeus.recurrence,
            "batch_size": zeus.batch_size,
            "local_batch_size": batch_size,
            "lr_factor": factor,
            "epochs": seen,
            "reached": zeus.reached,
            "stopped": zeus.stopped,
            "metric": zeus.metric,
            "local": [[m.time, m.total_system_energy] for m in zeus.local_measurements],
        }
        with open(out.format(rank=zeus.rank), "a") as f:
            f.write(json.dumps(rec) + "\n")

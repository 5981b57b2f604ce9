"""One rank of the uneven-batch gradient test (run as a script by test_uneven_gradients.py, not collected by pytest).

argv: rank world_size store_file out_dir local_batches(comma-separated)
Takes one SGD step two ways (hand-written all-reduce, and DDP with the comm hook)
and saves the parameters after each.
"""

import sys

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from zeus_core.allocation import RankPlan
from zeus_plugins_torch.gradients import UnevenBatchState, allreduce_weighted_gradients, uneven_batch_comm_hook


def model_and_data(batch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3)).double()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 5, generator=gen, dtype=torch.float64)
    y = torch.randn(batch, 3, generator=gen, dtype=torch.float64)
    return model, x, y


def main():
    rank, world, store, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    locals_ = [int(b) for b in sys.argv[5].split(",")]
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    allocation = {"gpus": [{"name": f"t{i}", "count": 1, "local_batch": b, "power_limit": 100} for i, b in enumerate(locals_)]}
    plan = RankPlan.from_allocation(allocation, rank)

    model, x, y = model_and_data(plan.global_batch)
    xs, ys = x[plan.batch_slice], y[plan.batch_slice]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.nn.functional.mse_loss(model(xs), ys).backward()
    allreduce_weighted_gradients(model.parameters(), plan.local_batch)  # global batch found by all-reduce
    opt.step()
    np.save(f"{out}/manual_{rank}.npy", torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy())

    model, x, y = model_and_data(plan.global_batch)
    ddp = DistributedDataParallel(model)
    ddp.register_comm_hook(UnevenBatchState(plan.share), uneven_batch_comm_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    torch.nn.functional.mse_loss(ddp(x[plan.batch_slice]), y[plan.batch_slice]).backward()
    opt.step()
    np.save(f"{out}/ddp_{rank}.npy", torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy())
    # every rank done before any leaves: a rank tearing gloo down while a peer still talks
    # aborts the peer at exit ("terminate called without an active exception")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

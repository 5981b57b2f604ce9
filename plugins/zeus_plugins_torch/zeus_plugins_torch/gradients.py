"""Gradients of uneven local batches, summed over data-parallel ranks.

When ranks train on local batches of different sizes (a global batch that does
not divide by the rank count, or a Zeus^2 allocation), plain DDP averaging
weighs every rank alike and the step is no longer the global batch's. With
local batches b_r summing to B and a loss that is the mean over the local
batch, the gradient of the mean over the global batch is ``g = sum_r (b_r / B) g_r``:
each rank scales its gradient by its share and the ranks SUM (not average) the
scaled gradients:

* :func:`allreduce_weighted_gradients` after ``loss.backward()``, for hand-written
  loops (``zeus.reduce_gradients``);
* :func:`uneven_batch_comm_hook` for ``DistributedDataParallel``
  (``model.register_comm_hook(UnevenBatchState(share), uneven_batch_comm_hook)``),
  which ``zeus.wrap_model`` registers whenever the ranks' local batches differ.

Who holds which local batch comes from the even split of the global batch or
from ``allocation.json`` (:class:`zeus_core.allocation.RankPlan`). This is torch-only
code, so it lives in the torch workload rather than the core; it is imported
only when a data-parallel loop needs it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


def allreduce_weighted_gradients(
    parameters: Iterable[torch.nn.Parameter], local_batch: int, global_batch: int | None = None, group: Any = None
) -> None:
    """Scale this rank's gradients by ``local_batch / global_batch`` and sum them over the group.

    Call after ``loss.backward()`` with the loss averaged over the local batch.
    ``global_batch`` defaults to the sum of the ranks' ``local_batch`` (one extra
    all-reduce). Gradients are packed into one buffer, so the ranks must hold the
    same parameters in the same order; a missing gradient counts as zero.
    """
    params = [p for p in parameters if p.requires_grad]
    if global_batch is None:
        total = torch.tensor([float(local_batch)], dtype=torch.float64)
        dist.all_reduce(total, op=dist.ReduceOp.SUM, group=group)
        global_batch = int(round(total.item()))
    if not 0 <= local_batch <= global_batch or global_batch <= 0:
        raise ValueError(f"local batch {local_batch} must lie in [0, global batch {global_batch}]")
    grads = []
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        grads.append(p.grad)
    flat = torch.cat([g.reshape(-1) for g in grads])
    flat.mul_(local_batch / global_batch)
    dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
    start = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[start : start + n].view_as(g))
        start += n


@dataclass
class UnevenBatchState:
    """State of :func:`uneven_batch_comm_hook`: this rank's share of the global batch."""

    share: float
    group: Any = None


def uneven_batch_comm_hook(state, bucket):
    """DDP communication hook: each bucket is scaled by the rank's share, then summed.

    (No annotations: DDP rejects a ``bucket`` annotation other than the GradBucket class.)

    Register with ``ddp_model.register_comm_hook(UnevenBatchState(plan.share), uneven_batch_comm_hook)``.
    """
    buffer = bucket.buffer()
    buffer.mul_(state.share)
    future = dist.all_reduce(buffer, op=dist.ReduceOp.SUM, group=state.group, async_op=True).get_future()
    return future.then(lambda fut: fut.value()[0])

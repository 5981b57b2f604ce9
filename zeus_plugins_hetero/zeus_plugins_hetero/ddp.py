"""Training with an allocation: uneven local batches that still give the global batch's gradient.

Plain data-parallel training averages the ranks' gradients, which is right only
when every rank holds the same number of samples. With local batches b_r that
sum to B and a loss that is the mean over the local batch, the gradient of the
mean over the global batch is::

    g = sum_r (b_r / B) * g_r

so each rank scales its gradient by its share b_r / B and the ranks SUM
(not average) the scaled gradients. Two ways to do that are here:

* :func:`allreduce_weighted_gradients` after ``loss.backward()``, for hand-written loops;
* :func:`uneven_batch_comm_hook` for ``torch.nn.parallel.DistributedDataParallel``
  (``model.register_comm_hook(state, hook)``), which replaces DDP's averaging.

:class:`RankPlan` reads ``allocation.json`` (written by the ``hetero`` allocator)
and gives a rank its local batch, its slice of each global batch and its power
limit, which :meth:`RankPlan.apply_power_limit` sets through the job's device
plugin. torch is imported lazily, so the allocator itself does not need it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_plugins_hetero.profile import HeteroError


@dataclass(frozen=True)
class RankPlan:
    """What one rank runs under an allocation."""

    rank: int
    gpu: str
    local_batch: int
    power_limit: float
    global_batch: int
    offset: int  # where this rank's samples start inside a global batch

    @property
    def share(self) -> float:
        return self.local_batch / self.global_batch

    @property
    def batch_slice(self) -> slice:
        """This rank's samples of a global batch laid out rank after rank."""
        return slice(self.offset, self.offset + self.local_batch)

    @classmethod
    def from_allocation(cls, allocation: str | Path | dict, rank: int) -> RankPlan:
        """Read ``allocation.json`` (path or parsed) and take rank ``rank``'s entry."""
        data = json.loads(Path(allocation).read_text()) if not isinstance(allocation, dict) else allocation
        ranks = data.get("ranks")
        if not ranks:
            ranks, n = [], 0
            for g in data["gpus"]:
                for _ in range(int(g["count"])):
                    ranks.append({"rank": n, "gpu": g["name"], "local_batch": g["local_batch"],
                                  "power_limit": g["power_limit"]})
                    n += 1
        if not 0 <= rank < len(ranks):
            raise HeteroError(f"rank {rank} is not in the allocation, which has {len(ranks)} GPUs (ranks 0..{len(ranks) - 1})")
        total = sum(int(r["local_batch"]) for r in ranks)
        offset = sum(int(r["local_batch"]) for r in ranks[:rank])
        me = ranks[rank]
        return cls(rank, me["gpu"], int(me["local_batch"]), float(me["power_limit"]), total, offset)

    def apply_power_limit(self, devices: Any) -> None:
        """Set this rank's limit on its device group (a zeus device part with ``set_power_limit``)."""
        setter = getattr(devices, "set_power_limit", None)
        if not callable(setter):
            raise HeteroError(f"the device group {type(devices).__name__} cannot set power limits")
        setter(self.power_limit)


def allreduce_weighted_gradients(
    parameters: Iterable[Any], local_batch: int, global_batch: int | None = None, group: Any = None
) -> None:
    """Scale this rank's gradients by ``local_batch / global_batch`` and sum them over the group.

    Call after ``loss.backward()`` with the loss averaged over the local batch.
    ``global_batch`` defaults to the sum of the ranks' ``local_batch`` (one extra
    all-reduce). Gradients are packed into one buffer, so the ranks must hold the
    same parameters in the same order; a missing gradient counts as zero.
    """
    import torch
    import torch.distributed as dist

    params = [p for p in parameters if p.requires_grad]
    if global_batch is None:
        total = torch.tensor([float(local_batch)], dtype=torch.float64)
        dist.all_reduce(total, op=dist.ReduceOp.SUM, group=group)
        global_batch = int(round(total.item()))
    if not 0 <= local_batch <= global_batch or global_batch <= 0:
        raise HeteroError(f"local batch {local_batch} must lie in [0, global batch {global_batch}]")
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    flat.mul_(local_batch / global_batch)
    dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
    start = 0
    for p in params:
        n = p.grad.numel()
        p.grad.copy_(flat[start : start + n].view_as(p.grad))
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
    import torch.distributed as dist

    buffer = bucket.buffer()
    buffer.mul_(state.share)
    future = dist.all_reduce(buffer, op=dist.ReduceOp.SUM, group=state.group, async_op=True).get_future()
    return future.then(lambda fut: fut.value()[0])

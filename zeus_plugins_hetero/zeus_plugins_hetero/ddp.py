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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_core.parallel import UnevenBatchState, allreduce_weighted_gradients, uneven_batch_comm_hook
from zeus_plugins_hetero.profile import HeteroError

__all__ = ["RankPlan", "UnevenBatchState", "allreduce_weighted_gradients", "uneven_batch_comm_hook"]


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

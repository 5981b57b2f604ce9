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

Everything here lives in the core (:mod:`zeus_core.allocation`,
:mod:`zeus_core.parallel`) and is re-exported: the ``torch`` workload trains
by the same file (``[workload] allocation = "allocation.json"``), and a plugin
never imports another plugin.
"""

from __future__ import annotations

from zeus_core.allocation import AllocationError, AllocationPlan, RankPlan, read_allocation
from zeus_core.parallel import UnevenBatchState, allreduce_weighted_gradients, uneven_batch_comm_hook

__all__ = [
    "AllocationError",
    "AllocationPlan",
    "RankPlan",
    "UnevenBatchState",
    "allreduce_weighted_gradients",
    "read_allocation",
    "uneven_batch_comm_hook",
]

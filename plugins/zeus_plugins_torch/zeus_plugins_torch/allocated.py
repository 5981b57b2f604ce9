"""Training by an allocation: ``[workload] allocation = "allocation.json"``.

An allocator (``zeus-plugins-hetero``) decides, per data-parallel rank, the
local batch and the power limit; the file it writes is read here through the
core (:mod:`zeus_core.allocation`). Under an allocation:

* the global batch is the allocation's: the batch-size policy is offered only
  that batch size, and one configured to choose another is bad input;
* each rank's device holds its allocated power limit for the whole job (set
  through the device plugin, which journals it and restores it on close), so
  the job has no power policy to steer: a ``[power]`` table is bad input, and
  the power control the runner sees holds rank 0's allocated limit and no other
  (:class:`LimitHolder`), which makes the default ``max`` policy a no-op;
* rank r trains with its local batch and DDP weighs its gradient by its share
  of the global batch (:mod:`zeus_plugins_torch.gradients`), so a step equals a
  single-process step on the global batch.

Every check runs when the workload is built, before any rank starts or any
device setting changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zeus_core import AllocationPlan, DeviceError, read_allocation
from zeus_core.allocation import AllocationError

if TYPE_CHECKING:  # annotations only
    from zeus_core import BuildContext
    from zeus_plugins_torch.options import TorchWorkloadOptions


def load_allocation(options: TorchWorkloadOptions, context: BuildContext) -> AllocationPlan:
    """Read ``workload.allocation`` and check that the job fits it; ValueError (exit 2) otherwise."""
    spec, allocation = context.spec, options.allocation
    assert spec is not None and allocation is not None  # a job's workload that names an allocation
    path = context.resolve_path(allocation)
    try:
        plan = read_allocation(path, source=str(path))
    except AllocationError as e:
        raise ValueError(f"workload.allocation: {e}") from None
    processes = int(spec.job.processes)
    problems = []
    if plan.world_size != processes:
        problems.append(
            f"{path} allocates {plan.world_size} rank{'s' if plan.world_size != 1 else ''} "
            f"(local batches {plan.local_batches}) but job.processes = {processes}; "
            f"set job.processes = {plan.world_size} (one process per allocated GPU), or allocate for {processes}"
        )
    B = plan.global_batch
    if options.batch_sizes and list(options.batch_sizes) != [B]:
        problems.append(
            f"workload.batch_sizes = {list(options.batch_sizes)}, but the allocation fixes the global batch at {B} "
            f"({' + '.join(map(str, plan.local_batches))}); leave workload.batch_sizes out"
        )
    problems += _batch_size_policy_conflicts(context, B)
    if "power" in spec.raw:
        problems.append(
            f"[power] plugin {spec.parts['power'].plugin if 'power' in spec.parts else '?'!r}: "
            "the allocation sets every rank's power limit (allocation.json power_limit), so a power policy "
            "would fight it; remove the [power] table"
        )
    if problems:
        raise ValueError("; ".join(problems))
    return plan


def _batch_size_policy_conflicts(context: BuildContext, global_batch: int) -> list[str]:
    """A ``[batch_size]`` table configured to choose another batch size than the allocation's.

    The policy is built after the workload, so this reads the job's own table
    (with its ``--set`` overrides) for the keys the batch-size policies share,
    ``default`` and ``batch_sizes``: what the user asked for, whatever the
    policy. A policy that still chooses another batch size is stopped by
    :func:`check_batch_size` before its first try trains.
    """
    assert context.spec is not None  # a job's workload
    table = context.spec.raw.get("batch_size") or {}
    out = []
    default = table.get("default")
    if isinstance(default, int) and not isinstance(default, bool) and default and default != global_batch:
        out.append(
            f"batch_size.default = {default}, but the allocation fixes the global batch at {global_batch}; "
            f"remove batch_size.default (the workload then offers {global_batch}) or set it to {global_batch}"
        )
    sizes = table.get("batch_sizes")
    if isinstance(sizes, list) and sizes and sizes != [global_batch]:
        out.append(
            f"batch_size.batch_sizes = {sizes}, but the allocation fixes the global batch at {global_batch}; remove batch_size.batch_sizes"
        )
    return out


def check_batch_size(batch_size: int, plan: AllocationPlan, policy: str) -> None:
    """The policy's choice must be the allocation's global batch (checked before the try trains)."""
    if int(batch_size) != plan.global_batch:
        raise ValueError(
            f"the [batch_size] policy {policy!r} chose batch size {batch_size}, but workload.allocation "
            f'({plan.source}) fixes the global batch at {plan.global_batch}; use [batch_size] plugin = "fixed" '
            "without a default, or allocate for that batch size"
        )


class LimitHolder:
    """Holds one rank's allocated limit on its own device, set once before its first try.

    It is also the power control the runner sees on rank 0 under an allocation
    (a :class:`zeus_core.PowerLimitControl`): its range is the allocated limit
    alone and any other limit is refused, so no power policy can move a rank
    off its allocation, while results still record the limit rank 0 trained
    at. Asking for the allocated limit changes nothing by itself: the workload
    holds it once the try's batch size is checked, so a try that fails that
    check leaves the device untouched.
    """

    def __init__(self, device: Any, plan: AllocationPlan, rank: int, device_name: str) -> None:
        self.device = device
        self.rank_plan = plan.rank(rank)
        self.source = plan.source
        self.held = False
        try:
            self.rank_plan.check_device(device, device_name)
        except AllocationError as e:
            raise ValueError(f"workload.allocation ({plan.source}): {e}") from None

    def hold(self) -> None:
        if not self.held:
            self.rank_plan.apply_power_limit(self.device)
            self.held = True

    # -- PowerLimitControl, pinned to the allocated limit --

    def power_limit_range(self) -> tuple[float, float]:
        return (self.rank_plan.power_limit, self.rank_plan.power_limit)

    def power_limit(self) -> float | None:
        return self.rank_plan.power_limit if self.held else None

    def set_power_limit(self, watts: float) -> None:
        if watts != self.rank_plan.power_limit:
            raise DeviceError(
                f"rank {self.rank_plan.rank} holds {self.rank_plan.power_limit:g} W, its limit in workload.allocation "
                f"({self.source}); a power policy asked for {watts:g} W. Remove the [power] table, or allocate again"
            )

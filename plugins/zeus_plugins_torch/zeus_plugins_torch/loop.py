"""The handle a training loop holds: ``zeus`` in ``train(batch_size, zeus)``.

It plays the part of upstream Zeus's data loader, without owning the data:
the loop asks it for epochs, the batch size the policy chose, and where its
iterations are; it takes the validation metric. Between iterations of an epoch
that the power policy profiles, the accelerator is synchronised and the policy
acts (a power limit set mid-step would blur which step paid for what). When
the target is reached, at ``max_epochs``, or when the run's cost would pass
``beta x`` the best recurrence, ``epochs()`` simply ends; the try is then
recorded as reached or not.

Drivers hold what differs between one process (a :class:`LocalDriver` over
the runner's :class:`zeus_core.engine.session.RunSession`), rank 0 of a data-parallel job
(:mod:`zeus_plugins_torch.leader`) and the other ranks
(:mod:`zeus_plugins_torch.follower`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from zeus_core import GpuSync, IterationControl, Measurement, SteadyEpochCost
from zeus_core.windows import make_sync
from zeus_plugins_torch import lr as _lr

if TYPE_CHECKING:  # annotations only
    from zeus_core import AllocationPlan, PowerPolicy
    from zeus_core.engine import RunSession
    from zeus_plugins_torch.progress import TryProgress


class SyncedPolicy:
    """Wraps a power policy so that it acts on synchronised iteration boundaries.

    Records whether the policy asked for per-iteration control this epoch
    (``profiling``); on rank 0 of several, the policy acts through ``lead``
    (``lead(act, session, iteration)``: a decision the other ranks follow, see
    :mod:`zeus_plugins_torch.leader`). The session sees only the wrapper, so it
    is a whole :class:`zeus_core.PowerPolicy` passing every call on, and has the
    capabilities the session asks a power policy for:
    :class:`zeus_core.IterationControl` (False where the policy has none) and
    :class:`zeus_core.SteadyEpochCost` (None, "not known", where it has none).
    """

    def __init__(self, inner: PowerPolicy, sync, lead=None) -> None:
        self.inner = inner
        self.sync = sync
        self.lead = lead
        self.profiling = False

    def begin_run(self, session) -> None:
        self.inner.begin_run(session)

    def on_epoch_end(self, session, epoch: int, measurement: Measurement) -> None:
        self.inner.on_epoch_end(session, epoch, measurement)

    def end_run(self, session) -> None:
        self.inner.end_run(session)

    def get_state(self) -> Any:
        return self.inner.get_state()

    def set_state(self, state: Any) -> None:
        self.inner.set_state(state)

    def wants_iterations(self, session) -> bool:
        self.profiling = bool(isinstance(self.inner, IterationControl) and self.inner.wants_iterations(session))
        return self.profiling

    def on_iteration(self, session, iteration: int) -> None:
        self.sync()
        inner = self.inner
        assert isinstance(inner, IterationControl)  # called only once wants_iterations said so
        act = inner.on_iteration
        if self.lead is None:
            act(session, iteration)
        else:
            self.lead(act, session, iteration)

    def steady_epoch_cost(self, session) -> float | None:
        return self.inner.steady_epoch_cost(session) if isinstance(self.inner, SteadyEpochCost) else None


def device_sync(devices: Any):
    """Synchronises the GPUs of ``devices`` (:class:`zeus_core.GpuSync`), or the current
    CUDA device where they name none, so a limit set between steps pays for whole steps."""
    return make_sync("torch", devices.sync_indices if isinstance(devices, GpuSync) else None)


def install_synced_policy(session: RunSession, lead=None) -> SyncedPolicy | None:
    """Wrap ``session.power_policy`` (once) in a :class:`SyncedPolicy`."""
    policy = session.power_policy
    if policy is None:
        return None
    if isinstance(policy, SyncedPolicy):
        policy.lead = lead
        return policy
    wrapped = SyncedPolicy(policy, device_sync(session.devices), lead)
    session.power_policy = wrapped
    return wrapped


def iterate_session(session: RunSession, iterable: Iterable, count: int) -> Iterator:
    """``iterable``'s items, announcing ``count`` iterations to the session.

    zip asks the data first, then the session: the policy acts after the next
    batch is fetched and before the step runs, and never past the last batch.
    """
    for item, _ in zip(iterable, session.iterations(count)):
        yield item


class LocalDriver:
    """One process: the runner's session does everything."""

    def __init__(self, session: RunSession) -> None:
        self.session = session

    @property
    def local_measurements(self) -> list[Measurement]:
        return self.session.epoch_measurements

    def epochs(self) -> Iterator[int]:
        return self.session.epochs()

    def iterate(self, iterable: Iterable, count: int) -> Iterator:
        return iterate_session(self.session, iterable, count)

    def report_metric(self, value: float) -> bool:
        return self.session.report_metric(value)

    def mark_reached(self) -> None:
        self.session.mark_reached()

    @property
    def state(self) -> tuple[bool, str | None, float | None, int]:
        s = self.session
        return s.reached, s.stopped, s.metric, s.epochs_done

    def measurements(self) -> list[Measurement]:
        return list(self.session.epoch_measurements)


def try_seed(job_seed: int, recurrence: int, try_index: int) -> int:
    """One seed per try, the same on every rank."""
    return (int(job_seed) * 1_000_003 + int(recurrence) * 1_009 + int(try_index)) % (2**63)


def split_batch(batch_size: int, world_size: int, rank: int) -> int:
    """This rank's share of the global batch: as even as possible, the remainder to the lowest ranks."""
    if batch_size < world_size:
        raise ValueError(
            f"batch size {batch_size} cannot be split over {world_size} processes (each needs at least one sample); "
            "use larger batch sizes or fewer processes"
        )
    base, extra = divmod(batch_size, world_size)
    return base + (1 if rank < extra else 0)


class ZeusLoop:
    """What ``train(batch_size, zeus)`` gets as ``zeus``.

    ``batch_size`` is the global batch the policy chose; ``local_batch_size``
    this rank's share (the function's first argument). ``rank`` /
    ``world_size`` / ``is_main`` describe the data-parallel job (0 / 1 / True
    in one process); ``device`` is the torch device this rank trains on;
    ``args`` the ``[workload] args`` table; ``recurrence`` / ``try_index``
    count from 1; ``seed`` is this try's seed.

    In a data-parallel job call ``epochs()``, ``iterate()`` and
    ``report_metric()`` on every rank, the same number of times: they are
    where ranks agree on what rank 0 decided. ``report_metric`` averages the
    ranks' values.

    Under an allocation (``workload.allocation``) ``local_batch_size`` is this
    rank's allocated local batch and ``allocation`` its
    :class:`zeus_core.allocation.RankPlan` (GPU, power limit, share, slice);
    ``None`` otherwise.
    """

    def __init__(
        self,
        driver: Any,
        *,
        batch_size: int,
        base_batch_size: int | None,
        lr_scaling: str = "auto",
        rank: int = 0,
        world_size: int = 1,
        recurrence: int = 1,
        try_index: int = 1,
        args: dict[str, Any] | None = None,
        device: Any = "cpu",
        seed: int = 0,
        allocation: AllocationPlan | None = None,
        progress: TryProgress | None = None,
    ) -> None:
        self._driver = driver
        self._progress = progress
        self.batch_size = int(batch_size)
        self.base_batch_size = base_batch_size
        self.lr_scaling = lr_scaling
        self.rank = rank
        self.world_size = world_size
        self._plan = allocation
        self.allocation = None if allocation is None else allocation.rank(rank)
        if allocation is not None and self.allocation is not None:
            if self.batch_size != allocation.global_batch or allocation.world_size != world_size:
                raise ValueError(
                    f"rank {rank}: global batch {self.batch_size} over {world_size} processes does not match the "
                    f"allocation ({allocation.global_batch} over {allocation.world_size})"
                )
            self.local_batch_size = self.allocation.local_batch
            self._offset = self.allocation.offset
        else:
            self.local_batch_size = split_batch(self.batch_size, world_size, rank)
            base, extra = divmod(self.batch_size, world_size)
            self._offset = rank * base + min(rank, extra)
        self.recurrence = recurrence
        self.try_index = try_index
        self.args = dict(args or {})
        self.device = device
        self.seed = seed

    # -- the loop --

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def epochs(self) -> Iterator[int]:
        """Epoch numbers from 1, until the target, ``max_epochs`` or an early stop."""
        if self._progress is None:
            return self._driver.epochs()
        return self._progress.epochs(self._driver.epochs(), self._driver.measurements)

    def iterate(self, iterable: Iterable, count: int | None = None) -> Iterator:
        """The items of ``iterable`` (a DataLoader, a list of batches); the power policy acts between them.

        ``count`` is how many items there are (``len(iterable)`` when left
        out): a power policy fits its profiling windows into the epoch by it.
        """
        if count is None:
            try:
                count = len(iterable)  # type: ignore[arg-type]
            except TypeError:
                raise ValueError(f"zeus.iterate: a {type(iterable).__name__} has no len(); pass count=<batches in this epoch>") from None
        items = self._driver.iterate(iterable, int(count))
        return items if self._progress is None else self._progress.iterate(items, int(count))

    def iterations(self, count: int) -> Iterator[int]:
        """``range(count)``, with the power policy acting between iterations."""
        return self.iterate(range(count))

    def report_metric(self, value: float) -> bool:
        """Report this epoch's validation metric; returns whether the target is reached."""
        reached = self._driver.report_metric(float(value))
        if self._progress is not None:
            self._progress.reported(self.metric)
        return reached

    def mark_reached(self) -> None:
        """Say the target is reached without a metric (rank 0 decides in data-parallel jobs)."""
        self._driver.mark_reached()

    @property
    def reached(self) -> bool:
        return self._driver.state[0]

    @property
    def stopped(self) -> str | None:
        """Why the epochs ended without the target: ``early-stop``, ``max-epochs``, ``never-ran``."""
        return self._driver.state[1]

    @property
    def metric(self) -> float | None:
        return self._driver.state[2]

    @property
    def epochs_done(self) -> int:
        return self._driver.state[3]

    @property
    def local_measurements(self) -> list[Measurement]:
        """This rank's own measurement of each finished epoch (before summing over ranks)."""
        return list(self._driver.local_measurements)

    @property
    def measurements(self) -> list[Measurement]:
        """Each finished epoch's measurement over the whole job (rank 0; this rank's own elsewhere)."""
        return self._driver.measurements()

    # -- learning rate --

    def _base(self) -> int:
        if self.base_batch_size is None:
            raise ValueError("learning-rate scaling needs the batch size the learning rate was tuned for: set workload.default_batch_size")
        return self.base_batch_size

    def _rule(self, optimizer: Any = None) -> str:
        if self.lr_scaling != "auto":
            return self.lr_scaling
        if optimizer is None:
            raise ValueError(
                'workload.lr_scaling is "auto": pass the optimizer (or its name, e.g. "adam") to scale_lr, '
                'or set lr_scaling to "sqrt", "linear" or "none"'
            )
        return _lr.rule_for(optimizer)

    def scale_lr(self, lr: float, optimizer: Any = None) -> float:
        """``lr`` tuned at ``default_batch_size``, scaled to this try's global batch size."""
        return _lr.scale_lr(lr, self.batch_size, self._base(), self._rule(optimizer))

    def scale_optimizer(self, optimizer: Any) -> float:
        """Scale ``optimizer``'s learning rates in place for this try's batch size; returns the factor."""
        return _lr.scale_optimizer(optimizer, self.batch_size, self._base(), self._rule(optimizer))

    # -- data-parallel helpers --

    @property
    def share(self) -> float:
        """This rank's weight in the global gradient: ``local_batch_size / batch_size``."""
        return self.local_batch_size / self.batch_size

    @property
    def batch_slice(self) -> slice:
        """This rank's samples of one global batch laid out rank after rank."""
        return slice(self._offset, self._offset + self.local_batch_size)

    @property
    def uneven(self) -> bool:
        """Whether the ranks' local batches differ (an allocation, or a batch that does not divide evenly)."""
        if self._plan is not None:
            return len(set(self._plan.local_batches)) > 1
        return self.batch_size % self.world_size != 0

    def shard(self, n: int) -> range:
        """The indices ``[0, n)`` this rank owns, contiguous.

        Without an allocation: a near-even share. Under an allocation: a share
        in proportion to the local batch, ``k x local_batch_size`` indices with
        ``k = n // batch_size`` whole global batches, so every rank runs the
        same number of iterations per epoch; the last ``n - k x batch_size``
        samples (less than one global batch) are left out.
        """
        if self.allocation is None:
            base, extra = divmod(n, self.world_size)
            start = self.rank * base + min(self.rank, extra)
            return range(start, start + base + (1 if self.rank < extra else 0))
        k = n // self.batch_size
        if k == 0:
            raise ValueError(
                f"zeus.shard({n}): fewer samples than one global batch ({self.batch_size}) of the allocation; "
                "every rank needs at least one local batch"
            )
        return range(k * self._offset, k * (self._offset + self.local_batch_size))

    def wrap_model(self, model: Any) -> Any:
        """``DistributedDataParallel(model)`` in a data-parallel job, ``model`` itself otherwise.

        When the ranks' local batches differ, DDP's averaging would weigh every
        rank alike; then each rank's gradient is scaled by its :attr:`share`
        and the ranks sum them (:func:`zeus_plugins_torch.gradients.uneven_batch_comm_hook`),
        so a step equals one process's step on the whole global batch.
        """
        if self.world_size == 1:
            return model
        from torch.nn.parallel import DistributedDataParallel

        from zeus_plugins_torch.gradients import UnevenBatchState, uneven_batch_comm_hook

        dev = getattr(self.device, "type", str(self.device))
        ids = [self.device] if dev == "cuda" else None
        ddp = DistributedDataParallel(model, device_ids=ids)
        if self.uneven:
            ddp.register_comm_hook(UnevenBatchState(self.share), uneven_batch_comm_hook)
        return ddp

    def reduce_gradients(self, parameters: Any) -> None:
        """For loops without DDP: after ``backward()``, weigh this rank's gradients by its share and sum them over ranks."""
        if self.world_size == 1:
            return
        from zeus_plugins_torch.gradients import allreduce_weighted_gradients

        allreduce_weighted_gradients(parameters, self.local_batch_size, self.batch_size)

"""The ``torch`` workload part: calls the user's training function once per try."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from zeus_core import OffersBatchSizes
from zeus_plugins_torch import report
from zeus_plugins_torch.accelerator import resolve_accelerator, torch_device
from zeus_plugins_torch.allocated import LimitHolder, check_batch_size, load_allocation
from zeus_plugins_torch.devices import DataParallelDevices
from zeus_plugins_torch.entry import load_entry
from zeus_plugins_torch.leader import Leader
from zeus_plugins_torch.loop import LocalDriver, ZeusLoop, install_synced_policy, try_seed
from zeus_plugins_torch.options import TorchWorkloadOptions
from zeus_plugins_torch.progress import TryProgress

if TYPE_CHECKING:  # annotations only
    from rich.console import Console

    from zeus_core import AllocationPlan, BuildContext, JobSummary
    from zeus_core.engine import RunSession


class TorchWorkload:
    """Trains ``workload.entry`` at each try's batch size, in one process or ``job.processes``.

    With several processes the other ranks start when the job's parts are
    built (so a rank that cannot build its device fails the job before any
    training) and end when the job closes. With ``allocation`` the file is
    read and checked against the job before any rank starts, and each rank
    holds its allocated power limit from its first try to the job's end.

    Under a launcher (``torchrun``: ``context.group``) the ranks are the
    launcher's, on one machine or several: rank 0 leads as above over them
    (nothing is spawned), and every other rank's workload serves it
    (:meth:`serve_rank`, a :class:`zeus_core.ServesRanks`) with the device
    its own runner built, by its global rank under an allocation.
    """

    Options = TorchWorkloadOptions

    def __init__(self, options: TorchWorkloadOptions, context: BuildContext) -> None:
        job, spec = context.job, context.spec
        assert job is not None and spec is not None  # a workload is built for a job
        if job.target_metric is None and not options.marks_reached:
            raise ValueError(
                "job.target_metric is not set, so no try can reach the target and every try would be retried "
                f"{job.max_tries} times before the job fails: set job.target_metric to the validation metric "
                "the training must reach (and higher_is_better), or, if your function decides itself with "
                "zeus.mark_reached(), set workload.marks_reached = true"
            )
        self.options = options
        self.job = job
        self.console = context.console
        self.batch_sizes = list(options.batch_sizes) or None
        self.default_batch_size = options.default_batch_size
        self.search_path = [context.resolve_path(p) for p in options.python_path]
        self.fn = load_entry(options.entry, self.search_path)
        self.accelerator = resolve_accelerator(options.accelerator)
        self.device = torch_device(self.accelerator)
        self.world_size = int(job.processes)
        self.context_parts = context.parts
        self.spec = spec
        self.leader: Leader | None = None
        self.allocation: AllocationPlan | None = None
        self.holder: LimitHolder | None = None
        self.group = context.group
        rank = 0 if self.group is None else self.group.rank
        local = context.parts["device"]
        self.local_device = local
        if options.allocation is not None:
            self.allocation = load_allocation(options, context)
            # The allocation fixes the global batch: the only one offered to the batch-size policy.
            self.batch_sizes = [self.allocation.global_batch]
            self.default_batch_size = self.allocation.global_batch
            self.holder = LimitHolder(local, self.allocation, rank, f"device {spec.parts['device'].plugin!r} (rank {rank})")
        self.threads = options.threads or max(1, (os.cpu_count() or 1) // self.world_size)
        if self.group is not None:  # ranks a launcher started: rank 0 leads them, the others serve it
            self.device = torch_device(self.accelerator, self.group.local_rank)
            torch.set_num_threads(self.threads)
            if rank != 0:
                return
            self.leader = Leader(context, options, self.accelerator, self.threads, allocation=self.allocation)
            self.leader.attach(self.group, context.rank_max_power_w)
        elif self.world_size > 1:
            torch.set_num_threads(self.threads)
            self.leader = Leader(context, options, self.accelerator, self.threads, allocation=self.allocation)
            self.leader.start(float(local.max_power_w))
        elif options.threads:
            torch.set_num_threads(options.threads)
        if self.leader is not None or self.allocation is not None:
            # The runner's view: every rank's maximum power; under an allocation its power
            # control is rank 0's allocated limit only (each rank holds its own).
            max_power = self.leader.max_power_w if self.leader is not None else float(local.max_power_w)
            context.parts["device"] = DataParallelDevices(local, max_power, self.world_size, self.holder)

    def serve_rank(self) -> None:
        """A rank other than 0 under a launcher: train what rank 0 decides until the job ends."""
        from zeus_plugins_torch.follower import ServingRank

        assert self.group is not None  # built under a launcher
        ServingRank(self.group, self.job, self.options, self.local_device, self.fn, self.accelerator, self.allocation, self.holder).serve()

    def _loop(self, driver: Any, session: RunSession, seed: int, progress: TryProgress) -> ZeusLoop:
        return ZeusLoop(
            driver,
            batch_size=session.batch_size,
            base_batch_size=self.options.default_batch_size,
            lr_scaling=self.options.lr_scaling,
            rank=0,
            world_size=self.world_size,
            recurrence=session.recurrence,
            try_index=session.try_index,
            args=self.options.args,
            device=self.device,
            seed=seed,
            allocation=self.allocation,
            progress=progress,
        )

    def run(self, session: RunSession) -> None:
        seed = try_seed(self.job.seed, session.recurrence, session.try_index)
        if self.allocation is not None:
            # Before any rank is told to train: a policy that chose another batch fails the try here.
            check_batch_size(session.batch_size, self.allocation, self.spec.parts["batch_size"].plugin)
            assert self.holder is not None  # made with the allocation
            self.holder.hold()
        if self.options.seed_each_try:
            torch.manual_seed(seed)
        progress = TryProgress(
            self.console,
            recurrence=session.recurrence,
            try_index=session.try_index,
            batch_size=session.batch_size,
            max_epochs=session.max_epochs,
            target=self.job.target_metric,
        )
        try:
            if self.leader is None:
                install_synced_policy(session)
                loop = self._loop(LocalDriver(session), session, seed, progress)
                self.fn(loop.local_batch_size, loop)
            else:
                self.leader.run_try(session, self.fn, lambda driver: self._loop(driver, session, seed, progress))
        finally:
            progress.close()  # a try that failed leaves no live display behind its error

    # -- results --

    def _default_for_report(self) -> int | None:
        """The "default" row's batch size: the policy's own default where it offers one
        (``mab`` settles on one from the workload's list), else the workload's."""
        policy = self.context_parts.get("batch_size")
        b = policy.default_batch_size if isinstance(policy, OffersBatchSizes) else None
        return int(b) if b is not None else self.default_batch_size

    def summary(self, job: JobSummary) -> dict[str, Any]:
        out = report.compare(job.records, self._default_for_report()).to_json()
        if self.allocation is not None:
            out["allocation"] = self.allocation.to_json()
        return out

    def baselines(self, job: JobSummary) -> dict[str, dict[str, float]]:
        """The default's and the best fixed batch size's totals over the job's recurrences (the verdict's reference)."""
        return report.compare(job.records, self._default_for_report()).totals() if job.records else {}

    def write_outputs(self, out_dir: Path, job: JobSummary) -> list[Path]:
        """The trace workload's figures, from this job's measured tries."""
        if not job.records:
            return []
        c = report.compare(job.records, self._default_for_report())
        return report.plots(Path(out_dir), c, job.records, self.job.name, self.job.eta_knob)

    def report(self, console: Console, job: JobSummary) -> None:
        if self.allocation is not None:
            report.print_allocation(console, self.allocation)
        if job.records:
            report.print_table(console, report.compare(job.records, self._default_for_report()))

    def close(self) -> None:
        if self.leader is not None:
            leader, self.leader = self.leader, None
            leader.close()

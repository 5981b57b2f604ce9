"""The ``torch`` workload part: calls the user's training function once per try."""

from __future__ import annotations

import os
from typing import Any

import torch

from zeus_plugins_torch import report
from zeus_plugins_torch.entry import load_entry
from zeus_plugins_torch.loop import LocalDriver, ZeusLoop, install_synced_policy
from zeus_plugins_torch.options import TorchWorkloadOptions
from zeus_plugins_torch.accelerator import resolve_accelerator, torch_device
from zeus_plugins_torch.control import try_seed
from zeus_plugins_torch.leader import DataParallelDevices, Leader


class TorchWorkload:
    """Trains ``workload.entry`` at each try's batch size, in one process or ``job.processes``.

    With several processes the other ranks start when the job's parts are
    built (so a rank that cannot build its device fails the job before any
    training) and end when the job closes.
    """

    Options = TorchWorkloadOptions

    def __init__(self, options: TorchWorkloadOptions, context: Any) -> None:
        self.options = options
        self.job = context.job
        self.batch_sizes = list(options.batch_sizes) or None
        self.default_batch_size = options.default_batch_size
        self.search_path = [context.resolve_path(p) for p in options.python_path]
        self.fn = load_entry(options.entry, self.search_path)
        self.accelerator = resolve_accelerator(options.accelerator)
        self.device = torch_device(self.accelerator)
        self.world_size = int(context.job.processes)
        self.context_parts = context.parts
        self.leader: Leader | None = None
        if self.world_size > 1:
            threads = options.threads or max(1, (os.cpu_count() or 1) // self.world_size)
            torch.set_num_threads(threads)
            local = context.parts["device"]
            self.leader = Leader(context, options, self.accelerator, threads)
            self.leader.start(float(local.max_power_w))
            context.parts["device"] = DataParallelDevices(local, self.leader.max_power_w, self.world_size)
        elif options.threads:
            torch.set_num_threads(options.threads)

    def _loop(self, driver: Any, session: Any, seed: int) -> ZeusLoop:
        return ZeusLoop(
            driver,
            batch_size=session.batch_size,
            base_batch_size=self.default_batch_size,
            lr_scaling=self.options.lr_scaling,
            rank=0,
            world_size=self.world_size,
            recurrence=session.recurrence,
            try_index=session.try_index,
            args=self.options.args,
            device=self.device,
            seed=seed,
        )

    def run(self, session: Any) -> None:
        seed = try_seed(self.job.seed, session.recurrence, session.try_index)
        if self.options.seed_each_try:
            torch.manual_seed(seed)
        if self.leader is None:
            install_synced_policy(session)
            loop = self._loop(LocalDriver(session), session, seed)
            self.fn(loop.local_batch_size, loop)
        else:
            self.leader.run_try(session, self.fn, lambda driver: self._loop(driver, session, seed))

    # -- results --

    def _default_for_report(self) -> int | None:
        b = getattr(self.context_parts.get("batch_size"), "default_batch_size", None)
        return int(b) if b is not None else self.default_batch_size

    def summary(self, summary: Any) -> dict[str, Any]:
        return report.compare(summary.records, self._default_for_report()).to_json()

    def report(self, console: Any, summary: Any) -> None:
        if summary.records:
            report.print_table(console, report.compare(summary.records, self._default_for_report()))

    def close(self) -> None:
        if self.leader is not None:
            leader, self.leader = self.leader, None
            leader.close()

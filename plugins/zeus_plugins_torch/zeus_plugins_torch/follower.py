"""Data-parallel jobs, ranks 1..N-1: what a rank does with each of rank 0's messages.

Every rank other than 0 follows rank 0 through the core's protocol
(:mod:`zeus_core.engine.ranks`): rank 0 broadcasts ``(op, *args)`` over the
job's :class:`zeus_core.backends.ProcessGroup` and this rank's
:class:`~zeus_core.engine.ranks.Follower` reads each one where its program is.
The ops, in the order a try sends them (:mod:`zeus_plugins_torch.leader` sends
them; ``limit`` and ``error`` are the core's and may come before any other):

=============================== ==========================================================
``("limit", watts)``            rank 0's devices hold a new limit: this rank's take it too
                                (not under an allocation, where each rank holds its own)
``("try", batch, rec, try)``    train one try: call the training function (:class:`ServingRank`)
``("epoch", n, profiling)``     one more epoch: measure it (and, when ``profiling``, follow
                                rank 0 at every iteration)
``("iteration", None)``         rank 0's power policy acted before this iteration (a decision)
``("epoch_end",)``              the epoch ended: every rank's measurement is gathered
``("metric",)``                 every rank's validation metric is gathered; then
``("reached", (mean, bool))``   their mean, and whether it reached the target (a decision)
``("stop", reached, stopped)``  the epochs ended (``stopped``: why, when not reached)
``("try_end",)``                the try ended: every rank's whole-try measurement is gathered
``("end",)``                    the job ended: close the device (restore it) and stop
``("error", message)``          rank 0 failed at a decision: stop too
=============================== ==========================================================

A rank whose training function makes other calls than rank 0's gets an op it
does not expect and stops with :class:`~zeus_core.engine.ranks.ProtocolError`
naming both.

Spawned ranks (``job.processes``) rebuild the job's device from the same
``[device]`` table (their own device: ``CUDA_VISIBLE_DEVICES`` names one GPU per
rank) and report a failure on the start-up queue before leaving the group and
closing (restoring) the device; ranks a launcher started serve from their own
``zeus run`` or script (:meth:`zeus_plugins_torch.workload.TorchWorkload.serve_rank`).
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import torch
import torch.distributed as dist

from zeus_core import AllocationPlan, Measurement, Monitor
from zeus_core.backends import ProcessGroup
from zeus_core.engine import Follower
from zeus_plugins_torch.accelerator import torch_device
from zeus_plugins_torch.allocated import LimitHolder
from zeus_plugins_torch.group import TorchProcessGroup, is_secondary
from zeus_plugins_torch.loop import ZeusLoop, device_sync, try_seed


def describe(e: BaseException) -> str:
    """``Type: message (at file:line)``, the line being the innermost frame of the error."""
    tb = traceback.extract_tb(e.__traceback__) if e.__traceback__ else []
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    return f"{type(e).__name__}: {e}{where}"


@attrs.frozen
class FollowerConfig:
    """What a spawned rank needs to rebuild its part of the job."""

    rank: int
    world_size: int
    job_path: str
    overrides: tuple[str, ...]
    extra_plugins: tuple[tuple[str, str], ...]
    init_method: str
    backend: str
    accelerator: str
    timeout_s: float
    threads: int
    cuda_visible: str | None
    #: ``workload.allocation`` as rank 0 read it (one reading for every rank), or None.
    allocation: AllocationPlan | None = None


class FollowerDriver:
    """A rank other than 0 inside one try: does what rank 0 says, measures its own device."""

    def __init__(self, rank: ServingRank) -> None:
        self.rank = rank
        self.reached = False
        self.stopped: str | None = None
        self.metric: float | None = None
        self.epochs_done = 0
        self.local_measurements: list[Measurement] = []
        self.pending: Measurement | None = None
        self.got_try_end = False
        self.profiling = False

    def epochs(self):
        r = self.rank
        while True:
            msg = r.follower.receive("epoch", "stop", "try_end")
            if msg[0] == "try_end":
                self.got_try_end = True
                return
            if msg[0] == "stop":
                self.reached, self.stopped = bool(msg[1]), msg[2]
                return
            epoch, self.profiling = msg[1], bool(msg[2])
            name = f"epoch-{epoch}"
            r.monitor.begin_window(name)
            try:
                yield epoch
            except GeneratorExit:
                # Left mid-epoch (a break, or an exception on the way out): no collective
                # may run now; rank 0 combines this measurement when the try ends.
                self.profiling = False
                self.pending = r.monitor.end_window(name)
                self.local_measurements.append(self.pending)
                raise
            self.profiling = False
            m = r.monitor.end_window(name)
            self.local_measurements.append(m)
            self.epochs_done += 1
            r.follower.receive("epoch_end")
            r.group.gather(m)

    def iterate(self, iterable, count: int):
        r = self.rank
        for item in iterable:
            if self.profiling:
                r.sync()
                r.follower.follow("iteration")
            yield item

    def report_metric(self, value: float) -> bool:
        r = self.rank
        r.follower.receive("metric")
        r.group.gather(float(value))
        self.metric, self.reached = r.follower.follow("reached")
        return self.reached

    def mark_reached(self) -> None:
        """Rank 0 decides; this rank learns it when the epochs end."""

    @property
    def state(self):
        return self.reached, self.stopped, self.metric, self.epochs_done

    def measurements(self) -> list[Measurement]:
        return list(self.local_measurements)


class ServingRank:
    """A rank other than 0 for the whole job: trains each try rank 0 starts, until it ends the job.

    ``device`` is this rank's own device group; under an allocation ``holder`` holds this
    rank's allocated limit (set at its first try), and rank 0 sends no limits.
    """

    def __init__(
        self,
        group: ProcessGroup,
        job: Any,
        options: Any,
        device: Any,
        fn: Any,
        accelerator: str,
        allocation: AllocationPlan | None = None,
        holder: LimitHolder | None = None,
    ) -> None:
        self.group = group
        self.job = job
        self.options = options
        self.fn = fn
        self.accelerator = accelerator
        self.allocation = allocation
        self.holder = holder
        self.monitor = Monitor(device, attribute_min_s=0.0)  # a try's energy is attributed whatever its epochs' length
        self.sync = device_sync(device)
        self.follower = Follower(group, devices=holder if holder is not None else device, monitor=self.monitor)

    def serve(self) -> None:
        tdev = torch_device(self.accelerator, self.group.local_rank)
        while True:
            msg = self.follower.receive("try", "end")
            if msg[0] == "end":
                return
            _, batch_size, rec, try_index = msg
            if self.holder is not None:
                self.holder.hold()
            seed = try_seed(self.job.seed, rec, try_index)
            if self.options.seed_each_try:
                torch.manual_seed(seed)
            driver = FollowerDriver(self)
            loop = ZeusLoop(
                driver,
                batch_size=batch_size,
                base_batch_size=self.options.default_batch_size,
                lr_scaling=self.options.lr_scaling,
                rank=self.group.rank,
                world_size=self.group.world_size,
                recurrence=rec,
                try_index=try_index,
                args=self.options.args,
                device=tdev,
                seed=seed,
                allocation=self.allocation,
            )
            self.monitor.begin_window("run", restart=True)
            self.fn(loop.local_batch_size, loop)
            whole = self.monitor.end_window("run")
            if not driver.got_try_end:
                self.follower.receive("try_end")
            self.group.gather({"whole": whole, "pending": driver.pending})


def follower_main(cfg: FollowerConfig, queue: Any) -> None:
    """Entry point of a spawned rank: rebuild the device, join the group, serve tries."""
    os.environ.update(RANK=str(cfg.rank), LOCAL_RANK=str(cfg.rank), WORLD_SIZE=str(cfg.world_size), LOCAL_WORLD_SIZE=str(cfg.world_size))
    if cfg.cuda_visible is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = cfg.cuda_visible
    from rich.console import Console

    from zeus_core.engine import Assembly, load_job, load_plugins
    from zeus_plugins_torch.entry import load_entry

    code, device, joined = 1, None, False
    try:
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        reg = load_plugins(extra_plugins=[(n, importlib.import_module(m)) for n, m in cfg.extra_plugins])
        spec = load_job(cfg.job_path, reg, list(cfg.overrides))
        part = spec.parts["device"]  # this rank's own device, built as rank 0 built its own; rank 0 alone keeps the store
        device = Assembly(spec, reg, console=Console(stderr=True)).build(("device",)).parts["device"]
        options = spec.parts["workload"].options
        fn = load_entry(options.entry, [spec.job_dir / p for p in options.python_path])
        holder = None
        if cfg.allocation is not None:  # checked now, set before the first try
            holder = LimitHolder(device, cfg.allocation, cfg.rank, f"device {part.plugin!r} (rank {cfg.rank})")
        queue.put(("ready", cfg.rank, float(device.max_power_w)))
        dist.init_process_group(
            cfg.backend, init_method=cfg.init_method, rank=cfg.rank, world_size=cfg.world_size, timeout=timedelta(seconds=cfg.timeout_s)
        )
        joined = True
        group = TorchProcessGroup(timeout=cfg.timeout_s)
        ServingRank(group, spec.job, options, device, fn, cfg.accelerator, cfg.allocation, holder).serve()
        code = 0
    except BaseException as e:  # noqa: BLE001 - every failure is reported to rank 0
        queue.put(("error", cfg.rank, describe(e), is_secondary(e)))
    finally:
        if joined:
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001
                pass
        if device is not None:
            try:
                device.close()
            except Exception as e:  # noqa: BLE001
                queue.put(("error", cfg.rank, f"restoring the device failed: {describe(e)}", False))
                code = 1
        queue.close()
        queue.join_thread()
    sys.exit(code)

"""Data-parallel jobs, ranks 1..N-1: spawned processes that do what rank 0 says.

A rank rebuilds the job's device from the same ``[device]`` table (its own
device: ``CUDA_VISIBLE_DEVICES`` names one GPU per rank), joins the group and
serves tries: for each, it calls the training function with its share of the
batch, measures its own device epoch by epoch, and sends the measurements to
rank 0. A failure is reported on the start-up queue before the rank leaves the
group and closes (restores) its device.
"""

from __future__ import annotations

import importlib
import os
import sys
from datetime import timedelta
from typing import Any

import attrs
import torch
import torch.distributed as dist

from zeus_core import AllocationPlan, Measurement, Monitor, PowerLimitControl
from zeus_core.engine.session import target_reached
from zeus_plugins_torch.accelerator import torch_device
from zeus_plugins_torch.allocated import LimitHolder
from zeus_plugins_torch.control import (
    OP_END,
    OP_EPOCH,
    OP_ITER,
    OP_STOP,
    OP_TRY,
    OP_TRY_END,
    STOP_NAMES,
    Control,
    describe,
    is_lost_contact,
    try_seed,
)
from zeus_plugins_torch.loop import ZeusLoop, device_sync


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
    #: This rank's index on its machine (its GPU under a launcher that does not narrow CUDA_VISIBLE_DEVICES).
    local_rank: int = 0


class FollowerDriver:
    """A rank other than 0: does what rank 0 says, measures its own device."""

    def __init__(self, follower: Follower) -> None:
        self.f = follower
        self.reached = False
        self.stopped: str | None = None
        self.metric: float | None = None
        self.epochs_done = 0
        self.local_measurements: list[Measurement] = []
        self.pending: Measurement | None = None
        self.got_try_end = False
        self.profiling = False

    def epochs(self):
        f = self.f
        while True:
            op, epoch, a, b, limit = f.ctrl.recv(OP_EPOCH, OP_STOP, OP_TRY_END)
            if op == OP_TRY_END:
                self.got_try_end = True
                return
            if op == OP_STOP:
                self.reached, self.stopped = bool(epoch), STOP_NAMES.get(a)
                return
            f.apply_limit(limit)
            self.profiling = bool(a)
            name = f"epoch-{epoch}"
            f.monitor.begin_window(name)
            try:
                yield epoch
            except GeneratorExit:
                self.profiling = False
                self.pending = f.monitor.end_window(name)
                self.local_measurements.append(self.pending)
                raise
            self.profiling = False
            m = f.monitor.end_window(name)
            self.local_measurements.append(m)
            self.epochs_done += 1
            f.ctrl.gather(m)

    def iterate(self, iterable, count: int):
        f = self.f
        for item in iterable:
            if self.profiling:
                f.sync()
                f.apply_limit(f.ctrl.recv(OP_ITER)[4])
            yield item

    def report_metric(self, value: float) -> bool:
        v = self.f.ctrl.mean(value)
        self.metric = v
        if target_reached(v, self.f.job.target_metric, self.f.job.higher_is_better):
            self.reached = True
        return self.reached

    def mark_reached(self) -> None:
        """Rank 0 decides; this rank learns it when the epochs end."""

    @property
    def state(self):
        return self.reached, self.stopped, self.metric, self.epochs_done

    def measurements(self) -> list[Measurement]:
        return list(self.local_measurements)


class Follower:
    """The serving loop of one spawned rank."""

    def __init__(self, cfg: FollowerConfig, job: Any, options: Any, device: Any, ctrl: Control, fn: Any,
                 holder: LimitHolder | None = None) -> None:
        self.cfg = cfg
        self.job = job
        self.options = options
        self.device = device
        self.ctrl = ctrl
        self.fn = fn
        self.monitor = Monitor(device)
        self.sync = device_sync(device)
        self._limit: float | None = None
        self.holder = holder

    def apply_limit(self, limit: float | None) -> None:
        if self.holder is not None:  # under an allocation this rank holds its own limit, not rank 0's
            self.holder.hold()
            return
        if limit is None or limit == self._limit:
            return
        if isinstance(self.device, PowerLimitControl):
            self.device.set_power_limit(limit)
            self._limit = limit

    def serve(self) -> None:
        tdev = torch_device(self.cfg.accelerator, self.cfg.local_rank)
        while True:
            op, batch_size, rec, try_index, limit = self.ctrl.recv(OP_TRY, OP_END)
            if op == OP_END:
                return
            self.apply_limit(limit)
            seed = try_seed(self.job.seed, rec, try_index)
            if self.options.seed_each_try:
                torch.manual_seed(seed)
            driver = FollowerDriver(self)
            loop = ZeusLoop(
                driver, batch_size=batch_size, base_batch_size=self.options.default_batch_size,
                lr_scaling=self.options.lr_scaling, rank=self.cfg.rank, world_size=self.cfg.world_size,
                recurrence=rec, try_index=try_index, args=self.options.args, device=tdev, seed=seed,
                allocation=self.cfg.allocation,
            )
            self.monitor.begin_window("run", restart=True)
            self.fn(loop.local_batch_size, loop)
            whole = self.monitor.end_window("run")
            if not driver.got_try_end:
                self.ctrl.recv(OP_TRY_END)
            self.ctrl.gather({"whole": whole, "pending": driver.pending})


def follower_main(cfg: FollowerConfig, queue: Any) -> None:
    """Entry point of a spawned rank: rebuild the device, join the group, serve tries."""
    os.environ.update(RANK=str(cfg.rank), LOCAL_RANK=str(cfg.rank), WORLD_SIZE=str(cfg.world_size),
                      LOCAL_WORLD_SIZE=str(cfg.world_size))
    if cfg.cuda_visible is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = cfg.cuda_visible
    from rich.console import Console

    from zeus_core.engine.assembly import Assembly
    from zeus_core.engine.registry import load as load_plugins
    from zeus_core.engine.validation import load_job
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
        dist.init_process_group(cfg.backend, init_method=cfg.init_method, rank=cfg.rank, world_size=cfg.world_size,
                                timeout=timedelta(seconds=cfg.timeout_s))
        joined = True
        ctrl = Control(dist.new_group(backend="gloo"), cfg.rank, cfg.world_size)
        Follower(cfg, spec.job, options, device, ctrl, fn, holder).serve()
        code = 0
    except BaseException as e:  # noqa: BLE001 - every failure is reported to rank 0
        queue.put(("error", cfg.rank, describe(e), is_lost_contact(e)))
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

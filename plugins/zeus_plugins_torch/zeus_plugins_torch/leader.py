"""Data-parallel jobs, rank 0: one process per device, rank 0 deciding.

Rank 0 trains in the ``zeus run`` process, next to the runner's session and
policies; ranks 1..N-1 are spawned processes that build their own device from
the same ``[device]`` table and train the same function. Rank 0 tells them what
it decided in the core's protocol (:mod:`zeus_core.engine.ranks`): messages
``(op, *args)`` broadcast over the job's process group (for spawned ranks a
:class:`~zeus_plugins_torch.group.TorchProcessGroup` over the group they form
with rank 0), each followed where the other ranks' programs are; the ops and
what a rank does with each are listed in :mod:`zeus_plugins_torch.follower`.
Before each message rank 0 sends the limit its devices hold when it changed
(``limit``), so the other ranks hold rank 0's limit from every point where they
hear from it: the start of a try and of each epoch and, in epochs the power
policy profiles, every iteration, where the policy's action is a decision
(:func:`zeus_core.engine.ranks.lead`) the others follow.

After each epoch every rank's own measurement is gathered on rank 0 and
combined: energy summed over ranks, time of the slowest rank (the try's
``session.ranks``, a :class:`zeus_core.RankCombiner`). The runner sees all
ranks' devices as one group
(:class:`zeus_plugins_torch.devices.DataParallelDevices`): its maximum power
is the sum, so the cost metric weighs time against the whole job's power.

A rank that fails reports why on a queue, closes its device (restoring it)
and leaves the group; the others' next collective fails, rank 0 tears the
group down and the try fails with that rank's message. A rank killed outright
cannot restore its device; the journal of device settings (where every
device plugin records an original through :class:`zeus_core.SettingsGuard`)
does, from rank 0, right after.

Under a launcher (``torchrun``) the ranks exist already: rank 0 *attaches*
(:meth:`Leader.attach`) to the launcher's ranks (the ``torch`` process group)
instead of spawning, and the other ranks serve it from their own ``zeus run``
or script (``TorchWorkload.serve_rank``). A rank that fails there exits; the
launcher stops the others (each restores its own device on the way out) and
prints every rank's error.
"""

from __future__ import annotations

import os
import queue as _queue
import shutil
import signal
import tempfile
import time
import types
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from zeus_core import Measurement
from zeus_core.backends import ProcessGroup
from zeus_core.engine import combine_measurements, lead
from zeus_core.journal import restore_pending
from zeus_plugins_torch.follower import FollowerConfig, describe, follower_main
from zeus_plugins_torch.group import TorchProcessGroup, is_secondary
from zeus_plugins_torch.loop import install_synced_policy, iterate_session

if TYPE_CHECKING:  # annotations only
    from zeus_core import AllocationPlan, BuildContext
    from zeus_core.engine import RunSession
    from zeus_plugins_torch.loop import SyncedPolicy


def _extra_plugin_modules(registry: Any, device_plugin: str) -> tuple[tuple[str, str], ...]:
    """Plugins registered in-process (not through an entry point), as (name, module) to import again."""
    from_entry_points = {registry.pm.get_name(p) for p, _ in registry.pm.list_plugin_distinfo()}
    out = []
    for name, plugin in registry.pm.list_name_plugin():
        if name in from_entry_points or plugin is None:
            continue
        if isinstance(plugin, types.ModuleType) and plugin.__name__.startswith("zeus_core."):
            continue  # the core's own (hook specs, the SQLite store): every load_plugins registers them
        module = getattr(plugin, "__name__", None) if isinstance(plugin, types.ModuleType) else None
        if module is None:
            if name == device_plugin:
                raise ValueError(
                    f"device plugin {name!r} was registered in-process as an object, so the other ranks cannot load it; "
                    "install it as a distribution with a `zeus` entry point"
                )
            continue
        out.append((name, module))
    return tuple(out)


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class _EpochGather:
    """While the loop runs: each epoch's measurement gathered from every rank and combined."""

    def __init__(self, driver: LeaderDriver) -> None:
        self.driver = driver

    def combine_ranks(self, measurement: Measurement) -> Measurement:
        return self.driver.epoch_end(measurement)


class _WholeTry:
    """After the loop: rank 0's whole-try measurement combined with the others' (already gathered)."""

    def __init__(self, others: list[Measurement]) -> None:
        self.others = others

    def combine_ranks(self, measurement: Measurement) -> Measurement:
        return combine_measurements([measurement, *self.others])


class Leader:
    """Rank 0: starts the other ranks, runs each try with them, and tears the group down."""

    def __init__(
        self, context: BuildContext, options: Any, accelerator: str, threads: int, allocation: AllocationPlan | None = None
    ) -> None:
        spec = context.spec
        assert spec is not None  # built for a job
        self.world_size = int(spec.job.processes)
        self.allocation = allocation
        self.options = options
        self.accelerator = accelerator
        self.backend = "nccl" if accelerator == "cuda" else "gloo"
        self.threads = threads
        self.registry = context.registry
        self.spec = spec
        self.procs: list[Any] = []
        #: the ranks of the job: formed with the spawned ranks (start) or the launcher's (attach)
        self.group: ProcessGroup | None = None
        self.broken: str | None = None
        self.max_power_w = 0.0
        self._tmp: str | None = None
        self._queue: Any = None
        self._joined = False
        self.local: list[Measurement] = []
        self.gather_enabled = True
        #: under a launcher: the ranks were not spawned here, and the group is not ours to tear down
        self.attached = False
        #: rank 0's limit as the other ranks last heard it; under an allocation each rank holds its own
        self.mirrors_limit = allocation is None
        self.sent_limit: float | None = None

    # -- start and stop --

    def _follower_configs(self, init_method: str) -> list[FollowerConfig]:
        cuda_visible: list[str] | None = None
        if self.accelerator == "cuda":
            env = os.environ.get("CUDA_VISIBLE_DEVICES")
            cuda_visible = [x.strip() for x in env.split(",") if x.strip()] if env else [str(i) for i in range(torch.cuda.device_count())]
            if len(cuda_visible) < self.world_size:
                raise ValueError(
                    f"job.processes = {self.world_size} but only {len(cuda_visible)} CUDA devices are visible; one process per device"
                )
        extra = _extra_plugin_modules(self.registry, self.spec.parts["device"].plugin)
        return [
            FollowerConfig(
                rank=r,
                world_size=self.world_size,
                job_path=str(Path(self.spec.path).resolve()),
                overrides=tuple(self.spec.overrides.values()),
                extra_plugins=extra,
                init_method=init_method,
                backend=self.backend,
                accelerator=self.accelerator,
                timeout_s=float(self.options.timeout_s),
                threads=self.threads,
                cuda_visible=None if cuda_visible is None else cuda_visible[r],
                allocation=self.allocation,
            )
            for r in range(1, self.world_size)
        ]

    def start(self, local_max_power_w: float) -> None:
        """Spawn ranks 1..N-1, wait until each has built its device, then form the group."""
        if dist.is_initialized():
            raise ValueError("torch.distributed is already initialised in this process; zeus forms the group itself")
        self._tmp = tempfile.mkdtemp(prefix="zeus-torch-")
        init_method = Path(self._tmp, "rendezvous").as_uri()
        configs = self._follower_configs(init_method)
        ctx = mp.get_context("spawn")
        self._queue = ctx.Queue()
        try:
            for cfg in configs:
                p = ctx.Process(target=follower_main, args=(cfg, self._queue), name=f"zeus-rank{cfg.rank}")
                p.start()
                self.procs.append(p)
            powers = self._wait_ready()
            dist.init_process_group(
                self.backend,
                init_method=init_method,
                rank=0,
                world_size=self.world_size,
                timeout=timedelta(seconds=self.options.timeout_s),
            )
            self._joined = True
            self.group = TorchProcessGroup(timeout=float(self.options.timeout_s))
        except BaseException:
            self._teardown()
            raise
        self.max_power_w = float(local_max_power_w) + sum(powers.values())

    def attach(self, group: ProcessGroup, rank_max_power_w: list[float] | None) -> None:
        """Lead ranks a launcher started (``group``: the job's ranks, rank 0 being this one)."""
        self.attached = True
        self.group = group
        self.max_power_w = float(sum(rank_max_power_w or ()))

    def _wait_ready(self) -> dict[int, float]:
        ready: dict[int, float] = {}
        deadline = time.monotonic() + self.options.timeout_s
        while len(ready) < self.world_size - 1:
            try:
                msg = self._queue.get(timeout=0.2)
            except _queue.Empty:
                for rank, p in enumerate(self.procs, start=1):
                    if p.exitcode is not None and rank not in ready:
                        raise ValueError(f"rank {rank} of {self.world_size} exited with code {p.exitcode} while starting") from None
                if time.monotonic() > deadline:
                    raise ValueError(
                        f"ranks {sorted(set(range(1, self.world_size)) - set(ready))} did not start within "
                        f"workload.timeout_s = {self.options.timeout_s:g} s"
                    ) from None
                continue
            if msg[0] == "ready":
                ready[msg[1]] = msg[2]
            elif msg[0] == "error":
                raise ValueError(f"rank {msg[1]} of {self.world_size} could not start: {msg[2]}")
        return ready

    def _teardown(self, grace_s: float = 20.0) -> list[tuple]:
        """Leave the group, wait for the other ranks to exit (kill stragglers); return their reports."""
        if self._joined:
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001 - the group may already be broken
                pass
            self._joined = False
        deadline = time.monotonic() + grace_s
        for p in self.procs:
            p.join(timeout=max(0.1, deadline - time.monotonic()))
        for p in self.procs:
            if p.exitcode is None:
                p.kill()
                p.join(timeout=5)
        reports = []
        while self._queue is not None:
            try:
                reports.append(self._queue.get(timeout=0.05))
            except (_queue.Empty, OSError, ValueError):
                break
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        return reports

    def close(self) -> None:
        """End the other ranks after the last try (they close and restore their devices)."""
        if self.attached:
            if self.broken is None and self.group is not None:
                self.group.broadcast(("end",))
            self.group = None
            return
        if not self.procs:
            return
        if self.broken is None and self.group is not None:
            try:
                self.group.broadcast(("end",))
            except Exception:  # noqa: BLE001 - a rank already gone: teardown reports it
                pass
        reports = self._teardown()
        self.procs = []
        failed = [r for r in reports if r[0] == "error"]
        if failed and self.broken is None:
            raise RuntimeError("; ".join(f"rank {r[1]}: {r[2]}" for r in failed))

    # -- one try --

    def tell(self, session: RunSession, op: str, *args: Any) -> None:
        """Send ``(op, *args)`` to the other ranks, after the limit rank 0's devices hold when it changed."""
        self.sync_limit(session)
        assert self.group is not None
        self.group.broadcast((op, *args))

    def sync_limit(self, session: RunSession) -> None:
        if not self.mirrors_limit:
            return
        watts = session.power_limit
        if watts is not None and watts != self.sent_limit:
            assert self.group is not None
            self.group.broadcast(("limit", watts))
            self.sent_limit = watts

    def run_try(self, session: RunSession, fn: Any, make_loop: Any) -> None:
        """Train one try on every rank; raise with the failing rank's story if any rank fails."""
        if self.broken is not None:
            raise RuntimeError(self.broken)
        group = self.group
        assert group is not None
        self.local = []
        self.gather_enabled = True
        session.rank, session.world_size = 0, self.world_size
        driver = LeaderDriver(session, self)
        try:
            driver.policy = install_synced_policy(session, lead=driver.iteration)
            session.ranks = _EpochGather(driver)
            self.tell(session, "try", session.batch_size, session.recurrence, session.try_index)
            loop = make_loop(driver)
            fn(loop.local_batch_size, loop)
            self.tell(session, "try_end")
            parts = group.gather(None)
        except BaseException as e:
            session.ranks = None
            message = self._abort(e)
            if message:
                raise RuntimeError(message) from e
            raise
        assert parts is not None  # rank 0 gathers
        wholes = [p["whole"] for p in parts[1:]]
        pending = [p["pending"] for p in parts[1:]]
        if driver.left_early and session.epoch_measurements and self.local and all(p is not None for p in pending):
            # The loop was left mid-epoch on every rank (a break): that epoch was
            # not gathered then, so it is combined now.
            session.epoch_measurements[-1] = combine_measurements([self.local[-1], *pending])
        session.ranks = _WholeTry(wholes)

    def _abort(self, error: BaseException) -> str | None:
        """Tear the group down after a failure; the message to raise, or None when rank 0's own error is the story."""
        self.broken = "an earlier try failed on a rank; the data-parallel group is gone"
        if self.attached:  # the launcher owns the ranks: it stops them and prints each one's error
            if not is_secondary(error):
                return None
            return (
                f"rank 0 lost contact with the other ranks: {describe(error)}; a rank failed or was killed "
                "(the launcher prints each rank's error), and every rank restores its own device as it stops"
            )
        pids = {rank: p.pid for rank, p in enumerate(self.procs, start=1)}
        reports = self._teardown()
        codes = {rank: p.exitcode for rank, p in enumerate(self.procs, start=1)}
        self.procs = []
        reported = {r[1]: r for r in reports if r[0] == "error"}
        genuine = [f"rank {rank} of {self.world_size} failed: {r[2]}" for rank, r in sorted(reported.items()) if not r[3]]
        died = []
        for rank, code in sorted(codes.items()):
            if rank in reported and code == 1:
                continue
            how = "was killed by " + _signal_name(code) if code is not None and code < 0 else f"exited with code {code}"
            died.append(f"rank {rank} of {self.world_size} (pid {pids[rank]}) {how}")
        restored = ""
        if died:
            restored = self._restore_dead()
        if not genuine and not died:
            if not is_secondary(error):
                return None
            genuine = [f"rank 0 lost contact with the other ranks: {describe(error)}"]
        return "; ".join(genuine + died) + "; every rank was stopped" + restored

    def _restore_dead(self) -> str:
        """Put back what a killed rank left changed, now rather than at the next ``zeus`` start."""
        try:
            n = restore_pending(self.registry.restorers)
        except Exception as e:  # noqa: BLE001 - report, the job already failed
            return f" (restoring the killed rank's device settings failed: {e})"
        return f" and {n} device setting(s) the killed rank left changed were restored" if n else ""


class LeaderDriver:
    """Rank 0's side of the loop: the runner's session decides, the other ranks are told."""

    def __init__(self, session: RunSession, leader: Leader) -> None:
        self.session = session
        self.leader = leader
        self.policy: SyncedPolicy | None = None
        self.left_early = False

    def epochs(self):
        s, leader = self.session, self.leader
        it = s.epochs()
        finished = False
        try:
            for epoch in it:
                profiling = bool(self.policy is not None and self.policy.profiling)
                leader.tell(s, "epoch", epoch, profiling)
                try:
                    yield epoch
                except GeneratorExit:
                    # Left mid-epoch (a break, or an exception on the way out):
                    # no collective may run now; a break is reconciled at try end.
                    self.left_early = True
                    leader.gather_enabled = False
                    raise
            finished = True
        finally:
            it.close()
        if finished:
            leader.tell(s, "stop", s.reached, s.stopped)

    def epoch_end(self, m: Measurement) -> Measurement:
        """The epoch's measurement, combined with the other ranks' (rank 0's alone when the loop was left)."""
        leader = self.leader
        leader.local.append(m)
        if not leader.gather_enabled:
            return m
        leader.tell(self.session, "epoch_end")
        assert leader.group is not None
        every = leader.group.gather(m)
        assert every is not None  # rank 0 gathers
        return combine_measurements(every)

    def iteration(self, act: Any, session: RunSession, iteration: int) -> None:
        """The power policy acts before ``iteration``: a decision the other ranks follow, limit included."""
        assert self.leader.group is not None
        lead(self.leader.group, "iteration", self._act, act, session, iteration)

    def _act(self, act: Any, session: RunSession, iteration: int) -> None:
        act(session, iteration)
        self.leader.sync_limit(session)

    def iterate(self, iterable, count: int):
        return iterate_session(self.session, iterable, count)

    def report_metric(self, value: float) -> bool:
        """Every rank's metric, averaged; rank 0's session judges it and every rank learns the verdict."""
        leader = self.leader
        assert leader.group is not None
        leader.tell(self.session, "metric")
        values = leader.group.gather(float(value))
        assert values is not None  # rank 0 gathers
        mean = sum(values) / len(values)
        return lead(leader.group, "reached", self._judge, mean)[1]

    def _judge(self, mean: float) -> tuple[float, bool]:
        return mean, self.session.report_metric(mean)

    def mark_reached(self) -> None:
        self.session.mark_reached()

    @property
    def state(self):
        s = self.session
        return s.reached, s.stopped, s.metric, s.epochs_done

    @property
    def local_measurements(self) -> list[Measurement]:
        return self.leader.local

    def measurements(self) -> list[Measurement]:
        return list(self.session.epoch_measurements)

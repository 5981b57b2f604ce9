"""Data-parallel jobs: one process per device, rank 0 deciding.

Rank 0 trains in the ``zeus run`` process, next to the runner's session and
policies; ranks 1..N-1 are spawned processes that build their own device from
the same ``[device]`` table and train the same function. Every point where the
ranks must agree begins with one broadcast from rank 0 over a gloo group of
its own (CPU tensors, whatever backend the training uses):

* ``TRY``: the global batch size, recurrence, try and power limit;
* ``EPOCH`` / ``STOP``: one more epoch (and whether the power policy profiles
  it), or the loop's end (reached, or why not);
* ``ITER``: in profiled epochs, the limit after the policy acted;
* ``TRY_END`` then a gather of each rank's whole-try measurement.

After each epoch every rank's own measurement is gathered on rank 0 and
combined: energy summed over ranks, time of the slowest rank
(``RunSession.reduce_measurement``). The runner sees all ranks' devices as one
group (:class:`DataParallelDevices`): its maximum power is the sum, so the
cost metric weighs time against the whole job's power.

A rank that fails reports why on a queue, closes its device (restoring it)
and leaves the group; the others' next collective fails, rank 0 tears the
group down and the try fails with that rank's message. A rank killed outright
cannot restore its device; the journal of device settings
(:mod:`zeus_core.journal`) does, from rank 0, right after.
"""

from __future__ import annotations

import importlib
import math
import os
import queue as _queue
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from zeus_core.measurement import Measurement, Monitor, make_sync

from zeus_plugins_torch.loop import ZeusLoop, install_synced_policy, iterate_session

OP_END, OP_TRY, OP_EPOCH, OP_STOP, OP_ITER, OP_TRY_END = range(6)
_OP_NAMES = {OP_END: "END", OP_TRY: "TRY", OP_EPOCH: "EPOCH", OP_STOP: "STOP", OP_ITER: "ITER", OP_TRY_END: "TRY_END"}
_STOP_CODES = {None: 0, "early-stop": 1, "max-epochs": 2, "never-ran": 3}
_STOP_NAMES = {v: k for k, v in _STOP_CODES.items()}

_GPU = re.compile(r"gpu(\d+)$")


class ProtocolError(RuntimeError):
    """The ranks' training functions did not make the same calls."""


def try_seed(job_seed: int, recurrence: int, try_index: int) -> int:
    """One seed per try, the same on every rank."""
    return (int(job_seed) * 1_000_003 + int(recurrence) * 1_009 + int(try_index)) % (2**63)


# --------------------------------------------------------------------------- combining measurements


def combine(measurements: list[Measurement]) -> Measurement:
    """All ranks' measurements of one window as one: energy summed, time of the slowest.

    Rank 0's device names stay; a GPU of rank r>0 is numbered after the GPUs
    of the ranks before it (``gpu<i>``, as upstream names every GPU of a job);
    any other device of rank r>0 is named ``rank<r>/<name>``.
    """
    first = measurements[0]
    energy = dict(first.energy)
    sources = dict(first.sources)
    offset = max((int(_GPU.match(n).group(1)) + 1 for n in first.energy if _GPU.match(n)), default=0)
    for r, m in enumerate(measurements[1:], start=1):
        gpus = sorted(int(_GPU.match(n).group(1)) for n in m.energy if _GPU.match(n))
        for name, joules in m.energy.items():
            g = _GPU.match(name)
            new = f"gpu{offset + gpus.index(int(g.group(1)))}" if g else f"rank{r}/{name}"
            energy[new] = joules
            if name in m.sources:
                sources[new] = m.sources[name]
        offset += len(gpus)
    return Measurement(max(m.time for m in measurements), energy, sources)


# --------------------------------------------------------------------------- the control channel


class Control:
    """Broadcasts from rank 0, gathers to rank 0, and a mean, over one gloo group."""

    def __init__(self, group: Any, rank: int, world_size: int) -> None:
        self.group = group
        self.rank = rank
        self.world_size = world_size
        self._buf = torch.zeros(5, dtype=torch.float64)

    def send(self, op: int, a: int = 0, b: int = 0, c: int = 0, limit: float | None = None) -> None:
        self._buf.copy_(torch.tensor([op, a, b, c, math.nan if limit is None else float(limit)], dtype=torch.float64))
        dist.broadcast(self._buf, src=0, group=self.group)

    def recv(self, *expected: int) -> tuple[int, int, int, int, float | None]:
        dist.broadcast(self._buf, src=0, group=self.group)
        op, a, b, c, limit = self._buf.tolist()
        op = int(op)
        if expected and op not in expected:
            want = " or ".join(_OP_NAMES[e] for e in expected)
            raise ProtocolError(
                f"rank {self.rank} expected {want} from rank 0 but got {_OP_NAMES.get(op, op)}: the ranks' training "
                "functions diverged; call epochs(), iterate() and report_metric() the same number of times on every rank"
            )
        return op, int(a), int(b), int(c), None if math.isnan(limit) else float(limit)

    def gather(self, obj: Any) -> list[Any] | None:
        out = [None] * self.world_size if self.rank == 0 else None
        dist.gather_object(obj, out, dst=0, group=self.group)
        return out

    def mean(self, value: float) -> float:
        t = torch.tensor([float(value)], dtype=torch.float64)
        dist.all_reduce(t, group=self.group)
        return float(t.item()) / self.world_size


def is_lost_contact(e: BaseException) -> bool:
    """Whether ``e`` only says that another rank went away (not the first failure)."""
    if isinstance(e, ProtocolError):
        return False
    dist_error = getattr(dist, "DistError", None)
    if dist_error is not None and isinstance(e, dist_error):
        return True
    text = str(e).lower()
    return any(s in text for s in ("connection closed", "connection reset", "broken pipe", "gloo", "timed out"))


def describe(e: BaseException) -> str:
    """``Type: message (at file:line)``, the line being the innermost frame of the error."""
    tb = traceback.extract_tb(e.__traceback__) if e.__traceback__ else []
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    return f"{type(e).__name__}: {e}{where}"


def resolve_accelerator(accelerator: str) -> str:
    if accelerator == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if accelerator == "cuda" and not torch.cuda.is_available():
        raise ValueError("accelerator = \"cuda\" but torch sees no CUDA device; use \"cpu\" or \"auto\"")
    return accelerator


def torch_device(accelerator: str) -> torch.device:
    return torch.device("cuda", 0) if accelerator == "cuda" else torch.device("cpu")


# --------------------------------------------------------------------------- rank 0


class DataParallelDevices:
    """Rank 0's device group standing for every rank's: what the runner measures and steers.

    Reads, the clock and power control are rank 0's own (other ranks follow
    the limits rank 0 sets); ``max_power_w`` is the sum over ranks.
    """

    def __init__(self, local: Any, max_power_w: float, world_size: int) -> None:
        self.local = local
        self.max_power_w = float(max_power_w)
        self.world_size = world_size
        self.names = list(local.names)
        self.energy_sources = dict(local.energy_sources)

    def clock(self) -> float:
        return self.local.clock()

    def read_energy(self) -> dict[str, float]:
        return self.local.read_energy()

    def close(self) -> None:
        self.local.close()

    def __getattr__(self, name: str) -> Any:
        if name == "local":  # not set yet (unpickling); avoid recursing
            raise AttributeError(name)
        return getattr(self.local, name)


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


def _extra_plugin_modules(registry: Any, device_plugin: str) -> tuple[tuple[str, str], ...]:
    """Plugins registered in-process (not through an entry point), as (name, module) to import again."""
    from_entry_points = {registry.pm.get_name(p) for p, _ in registry.pm.list_plugin_distinfo()}
    out = []
    for name, plugin in registry.pm.list_name_plugin():
        if name in from_entry_points or plugin is None or getattr(plugin, "__name__", "") == "zeus_core.hookspecs":
            continue
        module = getattr(plugin, "__name__", None) if isinstance(plugin, type(sys)) else None
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


class Leader:
    """Rank 0: starts the other ranks, runs each try with them, and tears the group down."""

    def __init__(self, context: Any, options: Any, accelerator: str, threads: int) -> None:
        self.world_size = int(context.job.processes)
        self.options = options
        self.accelerator = accelerator
        self.backend = "nccl" if accelerator == "cuda" else "gloo"
        self.threads = threads
        self.registry = context.registry
        self.spec = context.spec
        self.procs: list[Any] = []
        self.ctrl: Control | None = None
        self.broken: str | None = None
        self.max_power_w = 0.0
        self._tmp: str | None = None
        self._queue: Any = None
        self._joined = False
        self.local: list[Measurement] = []
        self.gather_enabled = True

    # -- start and stop --

    def _follower_configs(self, init_method: str) -> list[FollowerConfig]:
        cuda_visible: list[str] | None = None
        if self.accelerator == "cuda":
            env = os.environ.get("CUDA_VISIBLE_DEVICES")
            cuda_visible = [x.strip() for x in env.split(",") if x.strip()] if env else [str(i) for i in range(torch.cuda.device_count())]
            if len(cuda_visible) < self.world_size:
                raise ValueError(
                    f"job.processes = {self.world_size} but only {len(cuda_visible)} CUDA devices are visible; "
                    "one process per device"
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
                self.backend, init_method=init_method, rank=0, world_size=self.world_size,
                timeout=timedelta(seconds=self.options.timeout_s),
            )
            self._joined = True
            self.ctrl = Control(dist.new_group(backend="gloo"), 0, self.world_size)
        except BaseException:
            self._teardown()
            raise
        self.max_power_w = float(local_max_power_w) + sum(powers.values())

    def _wait_ready(self) -> dict[int, float]:
        ready: dict[int, float] = {}
        deadline = time.monotonic() + self.options.timeout_s
        while len(ready) < self.world_size - 1:
            try:
                msg = self._queue.get(timeout=0.2)
            except _queue.Empty:
                for rank, p in enumerate(self.procs, start=1):
                    if p.exitcode is not None and rank not in ready:
                        raise ValueError(f"rank {rank} of {self.world_size} exited with code {p.exitcode} while starting")
                if time.monotonic() > deadline:
                    raise ValueError(
                        f"ranks {sorted(set(range(1, self.world_size)) - set(ready))} did not start within "
                        f"workload.timeout_s = {self.options.timeout_s:g} s"
                    )
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
        if not self.procs:
            return
        if self.broken is None and self.ctrl is not None:
            try:
                self.ctrl.send(OP_END)
            except Exception:  # noqa: BLE001 - a rank already gone: teardown reports it
                pass
        reports = self._teardown()
        self.procs = []
        failed = [r for r in reports if r[0] == "error"]
        if failed and self.broken is None:
            raise RuntimeError("; ".join(f"rank {r[1]}: {r[2]}" for r in failed))

    # -- one try --

    def _reduce_epoch(self, m: Measurement) -> Measurement:
        self.local.append(m)
        if not self.gather_enabled:
            return m
        return combine(self.ctrl.gather(m))

    def run_try(self, session: Any, fn: Any, make_loop: Any) -> None:
        """Train one try on every rank; raise with the failing rank's story if any rank fails."""
        if self.broken is not None:
            raise RuntimeError(self.broken)
        ctrl = self.ctrl
        self.local = []
        self.gather_enabled = True
        session.rank, session.world_size = 0, self.world_size
        driver = LeaderDriver(session, self)
        try:
            policy = install_synced_policy(session, lambda: ctrl.send(OP_ITER, limit=session.power_limit))
            driver.policy = policy
            session.reduce_measurement = self._reduce_epoch
            ctrl.send(OP_TRY, session.batch_size, session.recurrence, session.try_index, session.power_limit)
            loop = make_loop(driver)
            fn(loop.local_batch_size, loop)
            ctrl.send(OP_TRY_END)
            parts = ctrl.gather(None)
        except BaseException as e:
            session.reduce_measurement = None
            message = self._abort(e)
            if message:
                raise RuntimeError(message) from e
            raise
        wholes = [p["whole"] for p in parts[1:]]
        pending = [p["pending"] for p in parts[1:]]
        if driver.left_early and session.epoch_measurements and self.local and all(p is not None for p in pending):
            # The loop was left mid-epoch on every rank (a break): that epoch was
            # not gathered then, so it is combined now.
            session.epoch_measurements[-1] = combine([self.local[-1], *pending])
        session.reduce_measurement = lambda m: combine([m, *wholes])

    def _abort(self, error: BaseException) -> str | None:
        """Tear the group down after a failure; the message to raise, or None when rank 0's own error is the story."""
        self.broken = "an earlier try failed on a rank; the data-parallel group is gone"
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
            if not is_lost_contact(error):
                return None
            genuine = [f"rank 0 lost contact with the other ranks: {describe(error)}"]
        return "; ".join(genuine + died) + "; every rank was stopped" + restored

    def _restore_dead(self) -> str:
        try:
            from zeus_core.journal import restore_pending
        except ImportError:  # pragma: no cover - older cores
            return " (settings a killed rank changed are restored at the next `zeus` start)"
        try:
            n = restore_pending(self.registry.restorers)
        except Exception as e:  # noqa: BLE001 - report, the job already failed
            return f" (restoring the killed rank's device settings failed: {e})"
        return f" and {n} device setting(s) the killed rank left changed were restored" if n else ""


class LeaderDriver:
    """Rank 0's side of the loop: the runner's session decides, the other ranks are told."""

    def __init__(self, session: Any, leader: Leader) -> None:
        self.session = session
        self.leader = leader
        self.policy = None
        self.left_early = False

    def epochs(self):
        s, ctrl = self.session, self.leader.ctrl
        it = s.epochs()
        finished = False
        try:
            for epoch in it:
                profiling = bool(self.policy is not None and self.policy.profiling)
                ctrl.send(OP_EPOCH, epoch, int(profiling), 0, s.power_limit)
                try:
                    yield epoch
                except GeneratorExit:
                    # Left mid-epoch (a break, or an exception on the way out):
                    # no collective may run now; a break is reconciled at try end.
                    self.left_early = True
                    self.leader.gather_enabled = False
                    raise
            finished = True
        finally:
            it.close()
        if finished:
            ctrl.send(OP_STOP, int(s.reached), _STOP_CODES.get(s.stopped, 0), 0, s.power_limit)

    def iterate(self, iterable, count: int):
        return iterate_session(self.session, iterable, count)

    def report_metric(self, value: float) -> bool:
        return self.session.report_metric(self.leader.ctrl.mean(value))

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


# --------------------------------------------------------------------------- ranks 1..N-1


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
                self.reached, self.stopped = bool(epoch), _STOP_NAMES.get(a)
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
        target = self.f.job.target_metric
        if target is not None and ((v >= target) if self.f.job.higher_is_better else (v <= target)):
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

    def __init__(self, cfg: FollowerConfig, job: Any, options: Any, device: Any, ctrl: Control, fn: Any) -> None:
        self.cfg = cfg
        self.job = job
        self.options = options
        self.device = device
        self.ctrl = ctrl
        self.fn = fn
        self.monitor = Monitor(device)
        self.sync = make_sync("torch", getattr(device, "sync_indices", None))
        self._limit: float | None = None

    def apply_limit(self, limit: float | None) -> None:
        if limit is None or limit == self._limit:
            return
        setter = getattr(self.device, "set_power_limit", None)
        if callable(setter):
            setter(limit)
            self._limit = limit

    def serve(self) -> None:
        tdev = torch_device(self.cfg.accelerator)
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

    from zeus_core import registry as zreg
    from zeus_core.job import load_job
    from zeus_core.runner import BuildContext
    from zeus_core.store import Store

    from zeus_plugins_torch.entry import load_entry

    code, device, store, joined = 1, None, None, False
    try:
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        reg = zreg.load(extra_plugins=[(n, importlib.import_module(m)) for n, m in cfg.extra_plugins])
        spec = load_job(cfg.job_path, reg, list(cfg.overrides))
        store = Store(spec.store_path())
        part = spec.parts["device"]
        device = part.registration.factory(part.options, BuildContext(spec, store, Console(stderr=True), reg))
        options = spec.parts["workload"].options
        fn = load_entry(options.entry, [spec.job_dir / p for p in options.python_path])
        queue.put(("ready", cfg.rank, float(device.max_power_w)))
        dist.init_process_group(cfg.backend, init_method=cfg.init_method, rank=cfg.rank, world_size=cfg.world_size,
                                timeout=timedelta(seconds=cfg.timeout_s))
        joined = True
        ctrl = Control(dist.new_group(backend="gloo"), cfg.rank, cfg.world_size)
        Follower(cfg, spec.job, options, device, ctrl, fn).serve()
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
        if store is not None:
            store.close()
        queue.close()
        queue.join_thread()
    sys.exit(code)

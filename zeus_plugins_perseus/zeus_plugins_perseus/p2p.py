"""The P2P blocking power: what a GPU draws while it waits on pipeline communication.

Perseus charges every GPU this power whenever it is not computing. Two ranks
warm up with a few send/receive round trips; then rank 0 opens a measurement
window on its device and blocks in ``recv`` while rank 1 sleeps ``duration_s``
and only then sends. Blocking power = the window's energy / its time.

With ``backend="nccl"`` rank r uses GPU ``gpus[r]`` and the receive really
spins on rank 0's GPU, as during training; ``gloo`` runs on CPU tensors (for
tests, or to measure what a host-staged pipeline costs). ``make_device`` builds
rank 0's device group in its own process, so it must be picklable: a
module-level function or a ``functools.partial`` of one, e.g.
``functools.partial(zeus_core.open_device, "nvml", {"gpus": [0]})``
for a device plugin by name.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs


@attrs.frozen
class BlockingPower:
    watts: float
    seconds: float
    joules: float
    devices: list[str]
    backend: str


class P2PError(RuntimeError):
    """The measurement job failed; the message carries the failing rank's error."""


def _worker(rank: int, make_device, duration_s: float, backend: str, init_file: str, gpus, rounds: int, out) -> None:
    import torch
    import torch.distributed as dist

    device = None
    try:
        dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=2)
        where = torch.device(f"cuda:{gpus[rank]}") if backend == "nccl" else torch.device("cpu")
        if where.type == "cuda":
            torch.cuda.set_device(where)
            a = torch.randn(2048, 2048, device=where)
            for _ in range(10):  # wake the GPU up like training would
                a = a @ a / a.norm()
            torch.cuda.synchronize(where)
        buf = torch.zeros(1024, device=where)
        peer = 1 - rank
        for _ in range(rounds):
            if rank == 0:
                dist.send(buf, peer)
                dist.recv(buf, peer)
            else:
                dist.recv(buf, peer)
                dist.send(buf, peer)
        if rank == 0:
            from zeus_core import Monitor

            device = make_device()
            monitor = Monitor(device, sync="torch" if where.type == "cuda" else "none")
            dist.barrier()
            monitor.begin_window("perseus-p2p-blocking")
            dist.recv(buf, peer)
            if where.type == "cuda":
                torch.cuda.synchronize(where)
            m = monitor.end_window("perseus-p2p-blocking", sync_execution=False)
            joules = float(sum(m.energy.values()))
            out.put(("ok", rank, (joules, m.time, list(m.energy))))
        else:
            dist.barrier()
            time.sleep(duration_s)
            dist.send(buf, peer)
            out.put(("ok", rank, None))
        dist.barrier()  # both ranks done before either tears gloo down (a peer left talking aborts at exit)
        dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001 - reported to the parent with the rank
        out.put(("error", rank, f"{type(e).__name__}: {e}"))
    finally:
        if device is not None:
            close = getattr(device, "close", None)
            if callable(close):
                close()


def measure_blocking_power(
    make_device: Callable[[], Any],
    duration_s: float = 60.0,
    backend: str = "nccl",
    gpus: tuple[int, int] = (0, 1),
    warmup_rounds: int = 5,
    timeout_s: float | None = None,
) -> BlockingPower:
    """Run the two-rank job and return rank 0's blocking power."""
    if not duration_s > 0:
        raise ValueError(f"duration_s must be > 0, got {duration_s}")
    if backend not in ("nccl", "gloo"):
        raise ValueError(f"backend must be 'nccl' (GPUs) or 'gloo' (CPU), got {backend!r}")
    timeout_s = timeout_s if timeout_s is not None else duration_s + 180.0
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="zeus-p2p-") as tmp:
        init_file = str(Path(tmp) / "rendezvous")
        procs = [
            ctx.Process(
                target=_worker,
                args=(r, make_device, duration_s, backend, init_file, tuple(gpus), warmup_rounds, out),
                name=f"zeus-perseus-p2p-rank{r}",
            )
            for r in range(2)
        ]
        for p in procs:
            p.start()
        results: dict[int, Any] = {}
        deadline = time.monotonic() + timeout_s
        try:
            while len(results) < 2:
                try:
                    status, rank, value = out.get(timeout=max(0.1, min(1.0, deadline - time.monotonic())))
                except queue.Empty:
                    if time.monotonic() > deadline:
                        raise P2PError(f"the measurement did not finish in {timeout_s:g} s") from None
                    dead = [p.name for p in procs if not p.is_alive() and p.exitcode not in (0, None)]
                    if dead:
                        raise P2PError(f"{', '.join(dead)} died without a result") from None
                    continue
                if status != "ok":
                    raise P2PError(f"rank {rank}: {value}")
                results[rank] = value
        finally:
            for p in procs:
                p.join(10)
                if p.is_alive():
                    p.terminate()
                    p.join(5)
    joules, seconds, names = results[0]
    if not seconds > 0:
        raise P2PError("the blocking window measured no time")
    return BlockingPower(watts=joules / seconds, seconds=seconds, joules=joules, devices=names, backend=backend)

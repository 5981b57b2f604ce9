"""What one message between the ranks of a data-parallel job costs, on two real gloo ranks (loopback).

In an epoch the power policy profiles, rank 0 tells the other ranks after every
iteration what its policy did, so this message is paid once per training step.
Timed in the same run, on two spawned ranks, each way interleaved with the others:

* ``tensor of 5 float64``: ``dist.broadcast`` of a preallocated tensor of five
  numbers, the smallest message a collective can carry (the yardstick);
* ``broadcast_object_list``: torch's own object broadcast of ``("iteration", None)``;
* ``TorchProcessGroup.broadcast``: the torch plugin's transport, the same tuple
  pickled into one fixed tensor;
* ``iteration decision``: a whole profiled step's exchange as the ranks make it
  (``lead(group, "iteration", ...)`` on rank 0, ``Follower.follow("iteration")``
  on rank 1), with a limit message every 10 steps as a JIT profile sends them;
* ``gather_object`` / ``TorchProcessGroup.gather`` of one ``Measurement`` (once
  per epoch, and per profiled window in the in-loop optimizer).

Prints the median CPU time (user + system of the process, both ranks) and wall
time per message over ``--repeats`` rounds, and each one's ratio to the
yardstick (broadcasts) or to ``gather_object`` (gathers). CPU time is the
figure to quote on a busy machine: a rank waiting for the other sleeps.

    python benchmarks/rank_messages.py [--messages 2000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from rich.console import Console
from rich.table import Table

BROADCASTS = ("tensor of 5 float64", "broadcast_object_list", "TorchProcessGroup.broadcast", "iteration decision")
GATHERS = ("gather_object", "TorchProcessGroup.gather")


class _Limits:
    """Rank 1's devices in the decision: takes the limits rank 0 sends."""

    def power_limit_range(self) -> tuple[float, float]:
        return (100.0, 400.0)

    def power_limit(self) -> float:
        return 0.0

    def set_power_limit(self, watts: float) -> None:
        pass


def _rank(rank: int, port: int, n: int, repeats: int, results: Any) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    from zeus_core import Measurement
    from zeus_core.engine.ranks import Follower, lead
    from zeus_plugins_torch.group import TorchProcessGroup

    group = TorchProcessGroup(timeout=120)
    tensor = torch.zeros(5, dtype=torch.float64)
    follower = Follower(group, devices=_Limits())
    m = Measurement(12.5, {"gpu0": 1234.5}, {"gpu0": "counter"})
    step = [0]

    def act() -> None:
        step[0] += 1
        if step[0] % 10 == 0:
            group.broadcast(("limit", 250.0))

    def tensor_broadcast() -> None:
        if rank == 0:
            tensor.copy_(torch.tensor([4.0, 0.0, 0.0, 0.0, 250.0], dtype=torch.float64))
        dist.broadcast(tensor, src=0, group=group.gloo)
        tensor.tolist()

    def object_broadcast() -> None:
        box: list[Any] = [("iteration", None) if rank == 0 else None]
        dist.broadcast_object_list(box, src=0, group=group.gloo)

    def group_broadcast() -> None:
        group.broadcast(("iteration", None) if rank == 0 else None)

    def decision() -> None:
        if rank == 0:
            lead(group, "iteration", act)
        else:
            follower.follow("iteration")

    def object_gather() -> None:
        dist.gather_object(m, [None, None] if rank == 0 else None, dst=0, group=group.gloo)

    def group_gather() -> None:
        group.gather(m)

    ways = dict(zip(BROADCASTS + GATHERS, (tensor_broadcast, object_broadcast, group_broadcast, decision, object_gather, group_gather)))
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for _ in range(repeats):
        for name, fn in ways.items():
            for _ in range(50):  # warm up
                fn()
            dist.barrier(group=group.gloo)
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(n):
                fn()
            times[name].append(((time.process_time() - c0) / n, (time.perf_counter() - w0) / n))
    results.put((rank, times))
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=2000, help="messages per timing")
    ap.add_argument("--repeats", type=int, default=7, help="rounds (every way once per round); medians are printed")
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank, args=(r, port, args.messages, args.repeats, results)) for r in (0, 1)]
    for p in procs:
        p.start()
    got = dict(results.get(timeout=3600) for _ in procs)
    for p in procs:
        p.join()

    def median(name: str, rank: int, k: int) -> float:
        return statistics.median(t[k] for t in got[rank][name])

    load = os.getloadavg()
    table = Table(
        title=f"one message between 2 gloo ranks, median of {args.repeats} x {args.messages} (load {load[0]:.1f} on {os.cpu_count()} CPUs)"
    )
    for col in ("message", "CPU rank 0 (us)", "CPU rank 1 (us)", "wall (us)", "CPU ratio", "wall ratio"):
        table.add_column(col, justify="right")
    for names, base in ((BROADCASTS, BROADCASTS[0]), (GATHERS, GATHERS[0])):
        base_cpu = median(base, 0, 0) + median(base, 1, 0)
        base_wall = median(base, 0, 1)
        for name in names:
            cpu0, cpu1, wall = median(name, 0, 0), median(name, 1, 0), median(name, 0, 1)
            table.add_row(
                name,
                f"{cpu0 * 1e6:,.1f}",
                f"{cpu1 * 1e6:,.1f}",
                f"{wall * 1e6:,.1f}",
                f"{(cpu0 + cpu1) / base_cpu:.2f}",
                f"{wall / base_wall:.2f}",
            )
    Console(width=120).print(table)


if __name__ == "__main__":
    main()

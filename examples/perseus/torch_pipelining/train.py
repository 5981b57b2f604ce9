"""A 2-stage MLP pipeline on torch.distributed.pipelining (PipelineStage + Schedule1F1B) under Perseus.

    torchrun --standalone --nproc-per-node 2 train.py --profile out/torch-pipe/profile.csv
    torchrun --standalone --nproc-per-node 2 train.py --plan out/torch-pipe/plans/chosen_plan.json
    torchrun --standalone --nproc-per-node 2 train.py --plan http://127.0.0.1:7787     # zeus perseus serve

``--profile``: every rank profiles its stage online, through the same wrapper
(``perseus_pipeline(schedule, hooks=OnlineProfiler(...))``: each SM clock from
the highest down to 800 MHz for one warm-up and two measured steps), and rank
0 writes both stages' rows as the planner's profile CSV.
``--plan``: every forward and backward of every step runs at the clock the
plan gives it (a plan file of ``zeus run``, or the plan server, which then gets
the job registered by rank 0). One line per rank says what ran.

Each rank uses GPU ``LOCAL_RANK`` through the ``nvml`` device plugin (on the
simulated driver where ``ZEUS_FAKE_NVML`` names one) and computes on CUDA when
torch sees a GPU, else on the CPU with gloo.
"""

from __future__ import annotations

import argparse
import csv
import functools
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, Schedule1F1B

from zeus_core import open_device
from zeus_plugins_perseus.pipelining import perseus_pipeline
from zeus_plugins_perseus.runtime import OnlineProfiler

STAGES = 2
MICROBATCHES = 4  # plan.toml's microbatches
MICROBATCH_SIZE = 32
WIDTH = 256


def build(rank: int, where: torch.device):
    torch.manual_seed(rank)
    layers = [torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU(), torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU()]
    if rank == STAGES - 1:
        layers.append(torch.nn.Linear(WIDTH, 10))
    module = torch.nn.Sequential(*layers).to(where)
    stage = PipelineStage(module, stage_index=rank, num_stages=STAGES, device=where)
    schedule = Schedule1F1B(stage, n_microbatches=MICROBATCHES, loss_fn=torch.nn.functional.cross_entropy)
    optimizer = torch.optim.SGD(module.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(MICROBATCHES * MICROBATCH_SIZE, WIDTH, generator=g).to(where)
    y = torch.randint(0, 10, (MICROBATCHES * MICROBATCH_SIZE,), generator=g).to(where)

    def step():
        if rank == 0:
            schedule.step(x)
        elif rank == STAGES - 1:
            schedule.step(target=y)
        else:
            schedule.step()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return schedule, step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--profile", type=Path, help="write the profile CSV here (rank 0)")
    what.add_argument("--plan", help="plan file (plans/NNNNN.json, chosen_plan.json) or plan server URL")
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, local_rank = dist.get_rank(), int(os.environ.get("LOCAL_RANK", 0))
    if dist.get_world_size() != STAGES:
        raise SystemExit(f"run {STAGES} ranks (torchrun --nproc-per-node {STAGES}), one per stage")
    where = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if not cuda:
        torch.set_num_threads(1)
    schedule, step = build(rank, where)
    gpu = functools.partial(open_device, "nvml", {"gpus": [local_rank]})  # picklable: built in the controller

    if args.profile:
        profiler = OnlineProfiler(gpu(), stage=rank, min_frequency=800, warmup_steps=1, profile_steps=2)
        with perseus_pipeline(schedule, hooks=profiler):
            while not profiler.done:
                step()
        rows = [None] * STAGES if rank == 0 else None
        dist.gather_object(profiler.rows(), rows, dst=0)
        if rank == 0:
            args.profile.parent.mkdir(parents=True, exist_ok=True)
            with args.profile.open("w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["stage", "instruction", "frequency", "time", "energy"])
                w.writerows(row for stage_rows in rows for row in stage_rows)
            print(f"wrote {args.profile}: {sum(len(r) for r in rows)} rows", flush=True)
    else:
        with perseus_pipeline(schedule, args.plan, device=gpu) as pipe:
            for _ in range(args.steps):
                step()
            clocks = sorted({f for _, f in pipe.hooks.schedule}, reverse=True)
            print(
                f"rank {rank}: {pipe.hooks.steps} steps, {len(pipe.hooks.schedule)} instructions each at {clocks} MHz as planned",
                flush=True,
            )
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

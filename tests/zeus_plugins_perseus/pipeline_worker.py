"""One rank of a real 1F1B pipeline on CPU (gloo), driven by Perseus hooks.

    python pipeline_worker.py --rank R --world W --store DIR --out DIR --microbatches M --steps S
                              (--plan PLAN_JSON | --server URL --deadline SECONDS)
                              [--nvml DRIVER_JSON]

The plan comes from a plan file, or from the plan server: rank 0 registers the
job and broadcasts its id, every rank registers with the clocks its device
supports, fetches its schedule, trains, and uploads what it measured per
(instruction, clock) as profiling results (bearer token from
``$ZEUS_PERSEUS_TOKEN``). Clocks are set by a FrequencyController on a fake
clock device (``OUT/device{R}.json``), or, with ``--nvml``, on the real
``nvml`` device plugin over the simulated driver, GPU R. Before each
instruction the rank reads the clocks the device really holds and records them
in ``OUT/rank{R}.json``, with the clocks left after the controller closed.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perseus_fakes import FakeClockDevice, locked, nvml_clocks, nvml_device  # noqa: E402

from zeus_plugins_perseus.runtime import FrequencyController, PerseusHooks, load_stage_schedule  # noqa: E402
from zeus_plugins_perseus.schedule import one_f_one_b_order  # noqa: E402


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    for name in ("--rank", "--world", "--microbatches", "--steps"):
        p.add_argument(name, type=int, required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--out", required=True, type=Path)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--plan")
    src.add_argument("--server")
    p.add_argument("--deadline", type=float)
    p.add_argument("--nvml")
    return p.parse_args()


def server_schedule(args, dist, supported):
    """Register (the job on rank 0, then this rank) and fetch this rank's schedule from the plan server."""
    from zeus_plugins_perseus.client import PlanClient, PlanServerError

    client = PlanClient(args.server, token=os.environ.get("ZEUS_PERSEUS_TOKEN"), timeout_s=30)
    job = [None]
    if args.rank == 0:
        deadline = time.monotonic() + 30
        while True:  # the server starts beside the ranks
            try:
                client.health()
                break
            except PlanServerError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        job = [client.register_job(pp_degree=args.world, microbatches=args.microbatches, deadline_s=args.deadline,
                                   metadata={"test": "pipeline_worker"})]
    dist.broadcast_object_list(job, src=0)
    client.register_rank(job[0], rank=args.rank, pp_rank=args.rank, available_frequencies=supported)
    return client, job[0], client.schedule(job[0], args.rank)


def main() -> None:
    # torch is imported here, not at the top: the controller's spawned process re-imports
    # this module and needs none of it.
    import torch
    import torch.distributed as dist

    args = parse()
    rank, world, mbs, out = args.rank, args.world, args.microbatches, args.out
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(args.store, world), rank=rank, world_size=world)
    layer = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU()) if rank == 0 else torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(layer.parameters(), lr=0.01)
    x = torch.randn(mbs, 4, 8)
    y = torch.randn(mbs, 4, 1)

    monitor = None
    if args.nvml:
        from zeus_core import Monitor

        controller = FrequencyController(functools.partial(nvml_device, args.nvml, [rank]))
        clocks = functools.partial(nvml_clocks, args.nvml, rank)
        meter = nvml_device(args.nvml, [rank])  # measures only; the controller's device sets the clocks
        monitor = Monitor(meter, sync="none")
    else:
        state = str(out / f"device{rank}.json")
        controller = FrequencyController(functools.partial(FakeClockDevice, state))
        clocks = functools.partial(locked, state)
    if args.server:
        client, job_id, schedule = server_schedule(args, dist, controller.supported_clocks or [])
    else:
        client, job_id, schedule = None, None, load_stage_schedule(args.plan, rank)
    hooks = PerseusHooks(schedule, controller.set_frequency)
    seen, losses, pending = [], [], []
    measured: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for _ in range(args.steps):
        hooks.on_step_begin()
        acts, outs = {}, {}
        for k, (inst, j) in enumerate(one_f_one_b_order(world, mbs, rank)):
            hooks.on_instruction_begin(inst)
            seen.append([inst, j, clocks()])
            if monitor is not None:
                monitor.begin_window(inst)
            if inst == "forward" and rank == 0:
                acts[j] = layer(x[j])
                pending.append(dist.isend(acts[j].detach(), 1))
            elif inst == "forward":
                h = torch.empty(4, 16)
                dist.recv(h, 0)
                h.requires_grad_()
                acts[j] = h
                outs[j] = torch.nn.functional.mse_loss(layer(h), y[j])
                losses.append(float(outs[j]))
            elif rank == 1:
                outs[j].backward()
                pending.append(dist.isend(acts[j].grad, 0))
            else:
                g = torch.empty(4, 16)
                dist.recv(g, 1)
                acts[j].backward(g)
            if monitor is not None:
                m = monitor.end_window(inst)
                measured.setdefault((inst, schedule[k][1]), []).append((m.time, m.total_energy))
            hooks.on_instruction_end(inst)
        hooks.on_step_end()
        opt.step()
        opt.zero_grad()
    for p in pending:
        p.wait()
    controller.close()
    result = {"seen": seen, "losses": losses, "after": clocks(), "schedule": schedule, "job_id": job_id}
    if monitor is not None:
        meter.close()
    if client is not None:
        # the rank's results: mean time and energy (nvml on the simulated driver) per (instruction, clock)
        rows = [(i, f, sum(t for t, _ in ms) / len(ms), sum(e for _, e in ms) / len(ms))
                for (i, f), ms in sorted(measured.items())]
        result["uploaded"] = client.upload_profile(job_id, rank, rows)
        client.close()
    (out / f"rank{rank}.json").write_text(json.dumps(result))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

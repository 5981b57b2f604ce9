"""One rank of a real ``torch.distributed.pipelining`` pipeline on CPU (gloo) under ``perseus_pipeline``.

    python pipelining_worker.py --rank R --world W --store FILE --out DIR --nvml DRIVER_JSON
                                --schedule 1f1b|gpipe --microbatches M --steps S
                                (--plan PLAN_JSON | --server URL --deadline SECONDS)
                                [--wrong-plan PLAN_JSON] [--profile-steps N] [--fail-at STEP] [--kill-at STEP]

Each rank holds one stage (a Linear layer; the last ends in an MSE loss) in a
``PipelineStage`` driven by ``Schedule1F1B`` or ``ScheduleGPipe``, and its
clocks are set by the ``nvml`` device plugin on the simulated driver, GPU R.
Each call of the stage's ``forward_one_chunk`` / ``backward_one_chunk`` records
(instruction, microbatch, SM clock, memory clock) read from the simulated
driver as the computation starts: what the driver held, not what the wrapper
meant to set.

Phases, in one process group (starting ranks is what costs):
``--wrong-plan``: wrap with a plan made for another order; the PlanMismatch
message is recorded and nothing may have touched the clocks.
``--profile-steps``: profile the stage online through the same wrapper
(``hooks=OnlineProfiler``, one step per clock). Then ``--steps`` planned
steps; with ``--server`` the wrapper registers the job itself and, after the
steps, the rank uploads its online profile to that job. ``--fail-at K``: the last stage's loss
raises in step K; every rank records its clocks after the error (the other
ranks fail on gloo's timeout when their peer stops talking). ``--kill-at K``:
rank 1 SIGKILLs itself during the first backward of step K.
Writes ``OUT/rank{R}.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perseus_fakes import nvml_clocks, nvml_device  # noqa: E402

MB_SIZE, WIDTH = 2, 8


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    for name in ("--rank", "--world", "--microbatches", "--steps"):
        p.add_argument(name, type=int, required=True)
    for name in ("--store", "--nvml", "--schedule"):
        p.add_argument(name, required=True)
    p.add_argument("--out", required=True, type=Path)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--plan")
    src.add_argument("--server")
    p.add_argument("--deadline", type=float)
    p.add_argument("--wrong-plan")
    p.add_argument("--profile-steps", type=int, default=0)
    p.add_argument("--fail-at", type=int)
    p.add_argument("--kill-at", type=int)
    return p.parse_args()


def main() -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    from zeus_plugins_perseus.pipelining import PlanMismatch, perseus_pipeline
    from zeus_plugins_perseus.runtime import OnlineProfiler

    args = parse()
    rank, world, mbs = args.rank, args.world, args.microbatches
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    short = args.fail_at is not None or args.kill_at is not None  # a dead peer must fail the others quickly
    dist.init_process_group(
        "gloo", store=dist.FileStore(args.store, world), rank=rank, world_size=world, timeout=timedelta(seconds=5 if short else 120)
    )
    last = rank == world - 1
    module = torch.nn.Linear(WIDTH, 1) if last else torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU())
    clocks = functools.partial(nvml_clocks, args.nvml, rank)
    seen: list[list] = []
    kill = {"armed": False}
    step_no = {"k": 0}

    def loss_fn(out, target):
        if args.fail_at is not None and step_no["k"] == args.fail_at:
            raise RuntimeError("injected failure in the loss")
        return torch.nn.functional.mse_loss(out, target)

    stage = PipelineStage(module, stage_index=rank, num_stages=world, device=torch.device("cpu"))

    def record(run, kind):
        """Inside perseus_pipeline's wrapper (installed later, around this one): what the driver holds
        when the instruction's computation starts."""

        def instruction(chunk, *a, **k):
            seen.append([kind, int(chunk), *clocks()])
            if kind == "backward" and kill["armed"]:
                os.kill(os.getpid(), signal.SIGKILL)  # mid-instruction, its clock locked
            return run(chunk, *a, **k)

        return instruction

    stage.forward_one_chunk = record(stage.forward_one_chunk, "forward")
    stage.backward_one_chunk = record(stage.backward_one_chunk, "backward")
    kind = {"1f1b": Schedule1F1B, "gpipe": ScheduleGPipe}[args.schedule]
    schedule = kind(stage, n_microbatches=mbs, loss_fn=loss_fn)
    opt = torch.optim.SGD(module.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(mbs * MB_SIZE, WIDTH, generator=g)
    y = torch.randn(mbs * MB_SIZE, 1, generator=g)
    result: dict = {"rank": rank}
    device = functools.partial(nvml_device, args.nvml, [rank])

    def run_step():
        kwargs = {"target": y, "losses": []} if last else {}
        if rank == 0:
            schedule.step(x, **kwargs)
        else:
            schedule.step(**kwargs)
        opt.step()
        opt.zero_grad()
        return kwargs.get("losses")

    if args.wrong_plan:
        try:
            perseus_pipeline(schedule, args.wrong_plan, device=device)
            result["mismatch"] = None
        except PlanMismatch as e:
            result["mismatch"] = str(e)
        result["after_mismatch"] = clocks()

    token = os.environ.get("ZEUS_PERSEUS_TOKEN")
    if args.profile_steps:
        profiler = OnlineProfiler(
            nvml_device(args.nvml, [rank]), rank, frequencies=[1410, 1200, 1000, 800], warmup_steps=0, profile_steps=1
        )
        with perseus_pipeline(schedule, hooks=profiler):
            for _ in range(args.profile_steps):
                run_step()
        result["profiled"] = profiler.measurements()
        result["profile_seen"] = seen[:]
        seen.clear()
    source = args.plan or args.server
    losses = []
    pipe = perseus_pipeline(schedule, source, device=device, token=token, deadline_s=args.deadline)
    result["planned"] = pipe.hooks.schedule
    result["microbatches"] = pipe.hooks.microbatches
    result["job_id"] = pipe.job_id
    try:
        with pipe:
            for k in range(args.steps):
                step_no["k"] = k
                kill["armed"] = args.kill_at == k and rank == 1
                got = run_step()
                if got:
                    losses += [float(v.detach()) for v in got]
            result["error"] = None
    except Exception as e:  # noqa: BLE001 - the failure the test injected, or a peer's death seen by gloo
        result["error"] = f"{type(e).__name__}: {e}"[:300]
        result["after_error"] = clocks()
    result["seen"] = seen
    result["losses"] = losses
    if args.server and args.profile_steps:  # the online profile goes to the job the wrapper registered
        from zeus_plugins_perseus.client import PlanClient

        with PlanClient(args.server, token=token) as c:
            result["uploaded"] = c.upload_profile(pipe.job_id, rank, result["profiled"])
    result["after_close"] = clocks()
    (args.out / f"rank{rank}.json").write_text(json.dumps(result))
    if result["error"] is None:
        dist.barrier()
        dist.destroy_process_group()
    else:
        os._exit(0)  # a broken process group cannot be torn down cleanly


if __name__ == "__main__":
    main()

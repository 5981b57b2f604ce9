"""A NeMo/Megatron-style pipeline training loop driving upstream's ``PipelineFrequencyOptimizer``.

    python benchmarks/downstream_pipeline_frequency.py [--stages 2] [--dp 1] [--microbatches 4] [--steps 4] [--json OUT]

What a NeMo/Megatron integration of upstream's optimizer does, on zeus-compat and the simulated
NVIDIA driver (no GPU needed):

* every rank builds ``PipelineFrequencyOptimizer(rank=..., dp_rank=..., pp_rank=..., tp_rank=...,
  device_id=..., dp_degree=..., pp_degree=..., tp_degree=..., world_size=..., server_url=...,
  job_metadata=...)`` after ``init_process_group``, as the integrations do with Megatron's
  ``parallel_state`` ranks;
* the integration monkey-patches the pipeline schedule's ``forward_step`` / ``backward_step`` to
  call ``on_instruction_begin(name)`` / ``on_instruction_end(name)`` around them, and the training
  step to call ``on_step_begin()`` / ``on_step_end()`` around it;
* the schedule is Megatron's non-interleaved 1F1B (``forward_backward_pipelining_without_interleaving``:
  ``stages - stage - 1`` warm-up forwards, then one forward and one backward at a time, then the
  cool-down backwards), with activations and gradients sent between stages over gloo.

The plan server is ``zeus perseus serve`` on loopback (started here). The optimizer first profiles
every instruction at each SM clock of the simulated GPUs (1410, 1200, 1005, 810 MHz), uploads the
means, and gets its stage's schedule from the Perseus planner; then it locks each instruction's clock.
On the simulated driver a lower clock draws less power; the "kernels" here sleep longer at a lower
clock (time ~ (1410 / clock) ** 0.5, the last stage 1.6 times as long as the others), so the plan has
a real trade-off. The script prints the profile, the plan, and for every planned step whether each
instruction ran at its planned clock, and checks that the clocks are reset at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

CLOCKS = [1410, 1200, 1005, 810]
BASE_S = {"forward": 0.010, "backward": 0.020}
LAST_STAGE_SCALE = 1.6


# ----------------------------------------------------------------------------- a rank


def locked_clock(driver: str, index: int) -> int | None:
    from zeus_plugins_nvml import fake_pynvml

    locked = fake_pynvml.read_state(driver)["gpus"][index]["locked_clocks"]
    return locked[1] if locked else None


def make_megatron_like(stage: int, stages: int, driver: str, gpu: int, seen: list, dp: int = 1):
    """A stand-in for ``megatron.core.pipeline_parallel.schedules``: the functions an integration patches."""
    import torch
    import torch.distributed as dist

    schedules = types.ModuleType("schedules")
    pending: list = []

    def kernel(name: str) -> None:
        mhz = locked_clock(driver, gpu)
        seen.append((name, mhz))
        scale = LAST_STAGE_SCALE if stage == stages - 1 else 1.0
        time.sleep(BASE_S[name] * scale * (CLOCKS[0] / (mhz or CLOCKS[0])) ** 0.5)

    def forward_step(microbatch: int) -> None:  # the model's forward of one microbatch
        kernel("forward")

    def backward_step(microbatch: int) -> None:  # its backward
        kernel("backward")

    def recv_forward() -> None:
        if stage > 0:
            dist.recv(torch.empty(4), src=gpu - dp)

    def send_forward(microbatch: int) -> None:
        if stage < stages - 1:
            pending.append(dist.isend(torch.full((4,), float(microbatch)), dst=gpu + dp))

    def recv_backward() -> None:
        if stage < stages - 1:
            dist.recv(torch.empty(4), src=gpu + dp)

    def send_backward(microbatch: int) -> None:
        if stage > 0:
            pending.append(dist.isend(torch.full((4,), float(microbatch)), dst=gpu - dp))

    def forward(j: int) -> None:
        recv_forward()
        schedules.forward_step(j)
        send_forward(j)

    def backward(j: int) -> None:
        recv_backward()
        schedules.backward_step(j)
        send_backward(j)

    def forward_backward_pipelining_without_interleaving(num_microbatches: int) -> None:
        """Megatron's order; the P2P transfers are outside forward_step / backward_step, as there."""
        warmup = min(stages - stage - 1, num_microbatches)
        for j in range(warmup):
            forward(j)
        for k in range(num_microbatches - warmup):
            forward(warmup + k)
            backward(k)
        for j in range(num_microbatches - warmup, num_microbatches):
            backward(j)
        for work in pending:
            work.wait()
        pending.clear()

    schedules.forward_step = forward_step
    schedules.backward_step = backward_step
    schedules.forward_backward_pipelining_without_interleaving = forward_backward_pipelining_without_interleaving
    return schedules


def instrument(pfo, schedules, training) -> None:
    """What an integration does: wrap the schedule's forward/backward steps and the training step."""
    forward_step, backward_step, train_step = schedules.forward_step, schedules.backward_step, training.train_step

    def wrapped_forward_step(*args, **kwargs):
        pfo.on_instruction_begin("forward")
        try:
            return forward_step(*args, **kwargs)
        finally:
            pfo.on_instruction_end("forward")

    def wrapped_backward_step(*args, **kwargs):
        pfo.on_instruction_begin("backward")
        try:
            return backward_step(*args, **kwargs)
        finally:
            pfo.on_instruction_end("backward")

    def wrapped_train_step(*args, **kwargs):
        pfo.on_step_begin()
        out = train_step(*args, **kwargs)
        pfo.on_step_end()
        return out

    schedules.forward_step = wrapped_forward_step
    schedules.backward_step = wrapped_backward_step
    training.train_step = wrapped_train_step


def run_rank(args: argparse.Namespace) -> None:
    import torch.distributed as dist
    from zeus.optimizer.pipeline_frequency import PipelineFrequencyOptimizer

    rank = args.rank
    world = args.stages * args.dp
    dist.init_process_group("gloo", init_method=f"file://{args.store}", rank=rank, world_size=world)
    pp_rank, dp_rank = divmod(rank, args.dp)  # Megatron's order (tp 1): data-parallel ranks of a stage adjacent
    seen: list = []
    schedules = make_megatron_like(pp_rank, args.stages, args.driver, rank, seen, args.dp)
    training = types.SimpleNamespace()
    training.train_step = lambda: schedules.forward_backward_pipelining_without_interleaving(args.microbatches)

    pfo = PipelineFrequencyOptimizer(
        rank=dist.get_rank(),
        dp_rank=dp_rank,
        pp_rank=pp_rank,
        tp_rank=0,
        device_id=rank,
        dp_degree=args.dp,
        pp_degree=args.stages,
        tp_degree=1,
        world_size=dist.get_world_size(),
        server_url=args.server,
        job_metadata="megatron-style",
        profile_steps=1,
        warmup_steps=1,
        max_slowdown=args.max_slowdown,
    )
    instrument(pfo, schedules, training)
    steps = []  # (planned?, [(instruction, clock)]) per iteration
    profiling_steps = 0
    while len([s for s in steps if s[0]]) < args.steps:
        planned = pfo.planned
        seen.clear()
        training.train_step()
        steps.append((planned, list(seen)))
        profiling_steps += not planned
        if profiling_steps > 100:
            raise RuntimeError("still profiling after 100 steps")
    rows = pfo.profiler.measurements() if pfo.profiler is not None else []
    pfo.close()
    record = {
        "rank": rank,
        "pp_rank": pp_rank,
        "dp_rank": dp_rank,
        "job_id": pfo.job_id,
        "schedule": pfo.freq_schedule,
        "info": pfo.schedule_info,
        "profiling_steps": profiling_steps,
        "rows": rows,
        "steps": steps,
        "after_close": locked_clock(args.driver, rank),
    }
    Path(args.out, f"rank{rank}.json").write_text(json.dumps(record))
    dist.destroy_process_group()


# ----------------------------------------------------------------------------- the launcher


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(url: str, server: subprocess.Popen, timeout_s: float = 60.0) -> None:
    import httpx

    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if server.poll() is not None:
            raise RuntimeError(f"the plan server exited ({server.returncode})")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"the plan server at {url} did not answer in {timeout_s:g} s")


def launch(args: argparse.Namespace) -> dict:
    from zeus_plugins_nvml import fake_pynvml

    work = Path(tempfile.mkdtemp(prefix="zeus-pfo-"))
    driver = fake_pynvml.create(
        work / "nvml.json", [fake_pynvml.FakeGpu(graphics_clocks=CLOCKS) for _ in range(args.stages * args.dp)], privileged=True
    )
    env = dict(os.environ, ZEUS_FAKE_NVML=str(driver), ZEUS_STATE_DIR=str(work / "state"), ZEUS_GPU_DEVICE="nvml", OMP_NUM_THREADS="1")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "zeus_core.cli",
            "perseus",
            "serve",
            "--port",
            str(port),
            "--blocking-power-w",
            "60",
            "--unit-time-s",
            "0.0005",
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_healthy(url, server)
        common = [
            "--stages",
            str(args.stages),
            "--dp",
            str(args.dp),
            "--microbatches",
            str(args.microbatches),
            "--steps",
            str(args.steps),
            "--max-slowdown",
            repr(args.max_slowdown),
            "--server",
            url,
            "--driver",
            str(driver),
            "--store",
            str(work / "store"),
            "--out",
            str(work),
        ]
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, "--rank", str(r), *common], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            for r in range(args.stages * args.dp)
        ]
        outs = [p.communicate(timeout=600)[0] for p in procs]
        failed = [(r, p.returncode, out) for r, (p, out) in enumerate(zip(procs, outs)) if p.returncode != 0]
        if failed:
            raise RuntimeError("\n".join(f"--- rank {r} exited {code}:\n{out}" for r, code, out in failed))
    finally:
        server.terminate()
        server.communicate(timeout=30)
    records = [json.loads((work / f"rank{r}.json").read_text()) for r in range(args.stages * args.dp)]
    state = fake_pynvml.read_state(driver)
    return {"records": records, "reset": [g["locked_clocks"] is None and g["locked_mem_clocks"] is None for g in state["gpus"]]}


def report(result: dict) -> bool:
    ok = True
    for rec in result["records"]:
        r = rec["rank"]
        info = rec["info"]
        print(f"rank {r} (stage {rec['pp_rank']}, data-parallel rank {rec['dp_rank']}): job {rec['job_id']}")
        print(f"  profiled {len({f for _, f, _, _ in rec['rows']})} clocks in {rec['profiling_steps']} steps:")
        for inst, mhz, t, e in rec["rows"]:
            print(f"    {inst:8s} {mhz:5d} MHz  {t * 1e3:7.2f} ms  {e:7.3f} J")
        print(
            f"  plan {info['plan']} of {info['plans']} ({info['schedule_name']}, {info['profile']} profile): "
            f"{info['emulated_time_s'] * 1e3:.1f} ms, {info['emulated_energy_j']:.2f} J per iteration "
            f"(all max clocks: {info['max_frequency_time_s'] * 1e3:.1f} ms, {info['max_frequency_energy_j']:.2f} J)"
        )
        planned = [tuple(x) for x in rec["schedule"]]
        print(f"  schedule: {planned}")
        for i, (is_planned, seen) in enumerate(rec["steps"]):
            if not is_planned:
                continue
            follows = [tuple(x) for x in seen] == planned
            ok &= follows
            print(f"  step {i}: {'every instruction at its planned clock' if follows else f'DIFFERS: {seen}'}")
    print(f"clocks reset at the end: {result['reset']}")
    ok &= all(result["reset"])
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stages", type=int, default=2)
    p.add_argument("--dp", type=int, default=1, help="data-parallel replicas of each stage")
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--steps", type=int, default=4, help="planned iterations after profiling")
    p.add_argument("--max-slowdown", type=float, default=1.05)
    p.add_argument("--json", help="also write the ranks' records here")
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    for hidden in ("--server", "--driver", "--store", "--out"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.rank is not None:
        run_rank(args)
        return 0
    result = launch(args)
    if args.json:
        Path(args.json).write_text(json.dumps(result))
    return 0 if report(result) else 1


if __name__ == "__main__":
    sys.exit(main())

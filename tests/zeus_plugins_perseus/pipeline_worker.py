"""One rank of a real 2-stage 1F1B pipeline on CPU (gloo), driven by Perseus hooks.

    python pipeline_worker.py RANK WORLD STORE_DIR OUT_DIR PLAN_JSON MICROBATCHES STEPS

Each rank runs its stage's instructions in the plan's order, with a
FrequencyController on a fake clock device; before each instruction it reads
the clock the device really holds and records it in OUT_DIR/rank{R}.json.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perseus_fakes import FakeClockDevice, locked  # noqa: E402

from zeus_plugins_perseus.runtime import FrequencyController, PerseusHooks, load_stage_schedule  # noqa: E402
from zeus_plugins_perseus.schedule import one_f_one_b_order  # noqa: E402


def main() -> None:
    # torch is imported here, not at the top: the controller's spawned process re-imports
    # this module and needs none of it.
    import torch
    import torch.distributed as dist

    rank, world, store_dir, out_dir, plan, mbs, steps = sys.argv[1:8]
    rank, world, mbs, steps = int(rank), int(world), int(mbs), int(steps)
    out = Path(out_dir)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store_dir, world), rank=rank, world_size=world)
    layer = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU()) if rank == 0 else torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(layer.parameters(), lr=0.01)
    x = torch.randn(mbs, 4, 8)
    y = torch.randn(mbs, 4, 1)

    state = str(out / f"device{rank}.json")
    controller = FrequencyController(functools.partial(FakeClockDevice, state))
    hooks = PerseusHooks(load_stage_schedule(plan, rank), controller.set_frequency)
    seen = []
    losses = []
    pending = []
    for _ in range(steps):
        hooks.on_step_begin()
        acts, outs = {}, {}
        for inst, j in one_f_one_b_order(world, mbs, rank):
            hooks.on_instruction_begin(inst)
            seen.append([inst, j, locked(state)])
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
            hooks.on_instruction_end(inst)
        hooks.on_step_end()
        opt.step()
        opt.zero_grad()
    for p in pending:
        p.wait()
    controller.close()
    (out / f"rank{rank}.json").write_text(json.dumps({"seen": seen, "losses": losses, "after": locked(state)}))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

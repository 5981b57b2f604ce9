"""One stage of a 2-stage pipeline of an MLP, trained microbatch by microbatch for the ``perseus-stage`` profiler.

The profiler hands :func:`make_step` its hooks; the step runs the stage's
forwards and backwards in synchronous 1F1B order and wraps each in
``on_instruction_begin/end`` and the whole step in ``on_step_begin/end``,
exactly where a pipeline engine (DeepSpeed's ``_exec_forward_pass``,
Megatron's ``forward_step``) would call them. Stage 0 holds the first half of
the layers and, in place of the gradient that would arrive from stage 1,
back-propagates a fixed random gradient of the same shape; stage 1 starts from
a fixed random activation of stage 0's output shape and ends in the loss. The
computation per instruction is the real one; only the P2P transfers are left
out, since the profile times computation alone (Perseus charges waiting at the
blocking power).

It runs on the GPU when torch sees one (each instruction then ends with a
CUDA synchronisation through the profiler's measurement windows) and on the
CPU otherwise.
"""

from __future__ import annotations

import torch

from zeus_plugins_perseus.schedule import one_f_one_b_order

STAGES = 2
MICROBATCHES = 4
MICROBATCH_SIZE = 64
WIDTH = 512
LAYERS_PER_STAGE = 3


def make_step(hooks, devices):
    """One training step of stage ``hooks.stage``: 1F1B over MICROBATCHES microbatches, then an optimizer step."""
    stage = hooks.stage
    if not 0 <= stage < STAGES:
        raise ValueError(f"this pipeline has stages 0..{STAGES - 1}; the profiler asked for stage {stage}")
    where = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    torch.manual_seed(stage)
    if where.type == "cpu":
        torch.set_num_threads(1)  # steady timings on a shared machine
    layers = []
    for _ in range(LAYERS_PER_STAGE):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU()]
    if stage == STAGES - 1:
        layers.append(torch.nn.Linear(WIDTH, 10))
    model = torch.nn.Sequential(*layers).to(where)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    g = torch.Generator(device="cpu").manual_seed(100 + stage)
    inputs = torch.randn(MICROBATCHES, MICROBATCH_SIZE, WIDTH, generator=g).to(where)
    labels = torch.randint(0, 10, (MICROBATCHES, MICROBATCH_SIZE), generator=g).to(where)
    upstream_grads = torch.randn(MICROBATCHES, MICROBATCH_SIZE, WIDTH, generator=g).to(where)
    order = one_f_one_b_order(STAGES, MICROBATCHES, stage)

    def step():
        hooks.on_step_begin()
        outputs = {}
        for instruction, j in order:
            hooks.on_instruction_begin(instruction)
            if instruction == "forward":
                out = model(inputs[j])
                if stage == STAGES - 1:
                    out = torch.nn.functional.cross_entropy(out, labels[j])
                outputs[j] = out
            else:
                out = outputs.pop(j)
                if stage == STAGES - 1:
                    out.backward()
                else:
                    out.backward(upstream_grads[j])
            hooks.on_instruction_end(instruction)
        hooks.on_step_end()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step

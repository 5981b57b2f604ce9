"""What framing a training loop with the ``zeus`` handle costs, against the bare loop.

One epoch of a small MLP on CPU (small on purpose: the smaller the step, the
larger the handle's share), timed three ways in the same run, interleaved:

* ``bare``: ``for batch in batches: step()``;
* ``zeus``: ``for epoch in zeus.epochs(): for batch in zeus.iterate(batches)``
  with a power policy that does not profile (one measurement window per epoch);
* ``zeus, profiled``: the same with a policy that acts on every iteration
  (synchronisation plus a policy call per step, what a JIT profiling epoch
  pays).

Prints the median time per step of each and its ratio to ``bare``. Target:
under 2 % for ``zeus`` even at this sub-millisecond step.

    python benchmarks/torch_loop_overhead.py [--steps 400] [--repeats 7]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
from rich.console import Console
from rich.table import Table

from zeus_core import JobOptions, Monitor
from zeus_core.engine.session import RunSession
from zeus_plugins_torch.loop import LocalDriver, ZeusLoop, install_synced_policy


class Clock:
    """A device with a real clock and no energy: the handle's cost is all that is timed."""

    names = ["cpu0-package"]
    energy_sources = {"cpu0-package": "estimate"}
    max_power_w = 100.0

    def clock(self) -> float:
        return time.monotonic()

    def read_energy(self) -> dict[str, float]:
        return {"cpu0-package": 0.0}

    def close(self) -> None:
        pass


class Policy:
    """A power policy that does nothing but (when ``profile``) ask for every iteration."""

    def __init__(self, profile: bool) -> None:
        self.profile = profile
        self.calls = 0

    def begin_run(self, session) -> None:
        pass

    def on_epoch_end(self, session, epoch, measurement) -> None:
        pass

    def end_run(self, session) -> None:
        pass

    def get_state(self) -> None:
        return None

    def set_state(self, state) -> None:
        pass

    def wants_iterations(self, session) -> bool:
        return self.profile

    def on_iteration(self, session, i) -> None:
        self.calls += 1


def make_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def bare(step, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return time.perf_counter() - t0


def framed(step, steps: int, profile: bool) -> float:
    device = Clock()
    job = JobOptions(name="bench", target_metric=None, max_epochs=1)
    session = RunSession(
        job=job,
        batch_size=32,
        recurrence=1,
        try_index=1,
        cost_bound=math.inf,
        devices=device,
        monitor=Monitor(device),
        power_policy=Policy(profile),
    )
    install_synced_policy(session)
    zeus = ZeusLoop(LocalDriver(session), batch_size=32, base_batch_size=32)
    batches = range(steps)
    t0 = time.perf_counter()
    for _epoch in zeus.epochs():
        for _ in zeus.iterate(batches):
            step()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    torch.set_num_threads(1)
    step = make_step()
    for _ in range(50):  # warm up allocator and autograd
        step()
    times: dict[str, list[float]] = {"bare": [], "zeus": [], "zeus, profiled": []}
    for _ in range(args.repeats):
        times["bare"].append(bare(step, args.steps))
        times["zeus"].append(framed(step, args.steps, profile=False))
        times["zeus, profiled"].append(framed(step, args.steps, profile=True))
    base = statistics.median(times["bare"])
    table = Table(title=f"one epoch of {args.steps} steps, median of {args.repeats} (interleaved)")
    for col in ("loop", "per step (us)", "ratio to bare"):
        table.add_column(col, justify="right")
    for name, ts in times.items():
        med = statistics.median(ts)
        table.add_row(name, f"{med / args.steps * 1e6:,.1f}", f"{med / base:.4f}")
    Console().print(table)


if __name__ == "__main__":
    main()

"""The real-GPU run: the paths that read and steer real NVIDIA hardware, checked in one command.

    python benchmarks/real_gpu.py [--gpu 0] [--timeout 480] [--fake]

One NVIDIA GPU, at most ``--timeout`` seconds (8 minutes by default and at most), nothing
downloaded. Each check prints one row of a Markdown table (check, what was measured, what is
expected, pass/FAIL); the exit status is 0 when every row passed, 1 when one failed, 2 when a
module is missing (with what to ``pip install``), 130 on Ctrl-C. The checks:

* counter vs polled energy: the GPU's energy counter (``nvmlDeviceGetTotalEnergyConsumption``)
  and ``nvmlDeviceGetPowerUsage`` polled and integrated by the plugin's poller, over one window
  of a matmul load in torch; their relative difference;
* the counter's update period as measured (the interval between changes of the counter read as
  fast as it answers, the idea of upstream's ``infer_counter_update_period``), the power
  reading's, and the power reading under a bursty load (how much of the load it sees: Yang et
  al., SC'24, found the A100's and H100's reading covers 25 ms of each 100 ms);
* a power limit set, read back, held under load, and restored, through the ``nvml`` device
  plugin (``zeus_plugins_nvml``), journaled as every zeus change is;
* the SM clock locked, read under load, and reset, through the plugin;
* a short PyTorch training loop (an MLP on random tensors made on the GPU) under the in-loop
  ``PowerLimitOptimizer`` with the ``jit`` policy: its chosen limit, and its energy and cost per
  step against the same loop at the maximum limit;
* the Perseus online profiler (the ``perseus-stage`` profiler's sweep) on two stages of a model,
  and the planner on their profile;
* the daemon path: ``zeus daemon`` started here as root, an unprivileged client (uid 65534)
  setting a limit through it and exiting without putting it back, the daemon restoring it.

Every setting changed is put back when its check ends, also when it fails, on Ctrl-C, on the
time budget, or on SIGTERM (the journal, ``zeus_core.journal``); after a SIGKILL the next
``zeus`` start restores it. The last row checks that the GPU's power limit is the one it had.

``--fake`` runs the same checks on the simulated driver (``zeus_plugins_nvml.fake_pynvml``,
through ``ZEUS_FAKE_NVML``) with torch on the CPU and shorter durations, so that the script is
checked on a machine without a GPU (``tests/benchmarks/test_real_gpu_script.py``). The simulated
GPU's counter moves in 100 ms steps for the counter checks, as a real one does; rows whose
figures say nothing about hardware there say ``simulated``. A real run's table goes to
``docs/real-hardware.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
NOBODY = 65534
ZEUS = "import sys; from zeus_core.cli.main import main; main(sys.argv[1:])"
#: the longest a run may take (seconds): what a lent GPU machine's single call allows
LONGEST_S = 480.0
#: module -> what to install for it (from the repository root)
NEEDED = {
    "torch": "torch (with CUDA, e.g. pip install torch)",
    "pynvml": "nvidia-ml-py",
    "zeus_core": "-e .",
    "zeus_plugins_nvml": "-e plugins/zeus_plugins_nvml",
    "zeus_plugins_baseline": "-e plugins/zeus_plugins_baseline",
    "zeus_plugins_mab": "-e zeus_plugins_mab",
    "zeus_plugins_perseus": "-e zeus_plugins_perseus",
}
#: the simulated GPU's counter period during the counter checks (s): a real NVIDIA counter's order
FAKE_COUNTER_PERIOD_S = 0.1


class BudgetSpent(BaseException):
    """The run's time budget (``--timeout``) ran out: the checks stop, the settings are put back.

    A ``BaseException``, as ``KeyboardInterrupt`` is: code that turns any ``Exception`` into its own
    error must not take the end of the budget for a failure and carry on."""


@dataclass
class Row:
    check: str
    measured: str
    expected: str
    ok: bool
    simulated: bool = False

    def cells(self) -> list[str]:
        verdict = "pass" if self.ok else "FAIL"
        return [self.check, self.measured, self.expected, f"{verdict} (simulated)" if self.simulated else verdict]


@dataclass
class Durations:
    """How long each check's loads run (seconds), and the sizes of its work."""

    load_s: float
    probe_s: float
    bursty_s: float
    limit_load_s: float
    jit_warmup_s: float
    jit_measure_s: float
    jit_steady_s: float
    jit_step_w: float
    perseus_instruction_s: float
    perseus_clocks: int
    matmul: int
    mlp_width: int
    mlp_batch: int


#: each size: (on a real GPU, with ``--fake``)
SIZES = {
    "load_s": (20.0, 1.5),
    "probe_s": (3.0, 1.2),
    "bursty_s": (8.0, 0.8),
    "limit_load_s": (6.0, 0.3),
    "jit_warmup_s": (0.5, 0.02),
    "jit_measure_s": (2.0, 0.1),
    "jit_steady_s": (4.0, 0.2),
    "jit_step_w": (100.0, 100.0),
    "perseus_instruction_s": (0.6, 0.005),
    "perseus_clocks": (3, 3),
    "matmul": (8192, 128),
    "mlp_width": (4096, 32),
    "mlp_batch": (8192, 64),
}
REAL = Durations(**{name: real for name, (real, _) in SIZES.items()})
FAKE = Durations(**{name: fake for name, (_, fake) in SIZES.items()})


@dataclass
class Run:
    """What every check shares: the options, the GPU, the budget, the rows so far."""

    fake: bool
    gpu: int
    deadline: float
    sizes: Durations
    workdir: Path
    torch: Any = None
    device: Any = None  # the torch device the loads run on
    uuid: str = ""
    original_limit_w: float | None = None
    #: the counter's update period as measured (s; before it is: 0.1 s, NVIDIA's order)
    counter_period_s: float = 0.1
    rows: list[Row] = field(default_factory=list)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def add(self, check: str, measured: str, expected: str, ok: bool, simulated: bool = False) -> bool:
        self.rows.append(Row(check, measured, expected, bool(ok), simulated and self.fake))
        return bool(ok)

    # -- loads --

    def sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def matmul_load(self, seconds: float) -> int:
        """Matrix products on the GPU (the CPU with ``--fake``) for ``seconds``; how many were done."""
        torch, n = self.torch, self.sizes.matmul
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        a = torch.randn(n, n, device=self.device, dtype=dtype)
        b = torch.randn(n, n, device=self.device, dtype=dtype)
        done = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for _ in range(4):
                a = a @ b
                a = a / a.norm()
                done += 1
            self.sync()
        return done

    def bursty_load(self, seconds: float, on_s: float = 0.02, off_s: float = 0.08) -> None:
        """``on_s`` of matrix products, ``off_s`` idle, repeated for ``seconds``."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.matmul_load(on_s)
            time.sleep(off_s)


# --------------------------------------------------------------------------- NVML, read directly


class Nvml:
    """The NVML module the plugin uses (the simulated driver with ``ZEUS_FAKE_NVML``), for reads only:
    identity, versions, the raw counter and power, the clock as NVML reports it."""

    def __init__(self, gpu_uuid: str = "", index: int = 0) -> None:
        from zeus_plugins_nvml.control import nvml_module

        self.nvml = nvml_module()
        self.nvml.nvmlInit()
        self.handle = self.nvml.nvmlDeviceGetHandleByUUID(gpu_uuid) if gpu_uuid else self.nvml.nvmlDeviceGetHandleByIndex(index)

    def close(self) -> None:
        self.nvml.nvmlShutdown()

    def __enter__(self) -> Nvml:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def text(self, value: str | bytes) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    def energy_mj(self) -> int:
        return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def power_mw(self) -> int:
        return int(self.nvml.nvmlDeviceGetPowerUsage(self.handle))

    def limit_w(self) -> float:
        return self.nvml.nvmlDeviceGetPowerManagementLimit(self.handle) / 1000.0

    def sm_clock(self) -> int:
        return int(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))


def change_periods(read: Callable[[], int], seconds: float) -> tuple[list[float], int]:
    """Read ``read()`` as fast as it answers for ``seconds``; the intervals between its changes, and the reads made."""
    changes: list[float] = []
    last = read()
    reads = 1
    end = time.monotonic() + seconds
    while (now := time.monotonic()) < end:
        value = read()
        reads += 1
        if value != last:
            changes.append(now)
            last = value
    return [b - a for a, b in zip(changes, changes[1:])], reads


@contextlib.contextmanager
def in_background(action: Callable[[], Any]) -> Iterator[None]:
    """Run ``action`` in a thread while the block runs (a load beside a probe)."""
    import threading

    t = threading.Thread(target=action, daemon=True)
    t.start()
    try:
        yield
    finally:
        t.join()


# --------------------------------------------------------------------------- the checks


def check_counter_vs_polled(run: Run) -> None:
    """The counter and polled power over one window of a steady load."""
    from zeus_core import Monitor
    from zeus_plugins_nvml.device import NvmlGpus
    from zeus_plugins_nvml.options import NvmlOptions

    counter = NvmlGpus(NvmlOptions(gpus=[run.gpu]))
    try:
        polled = NvmlGpus(NvmlOptions(gpus=[run.gpu], energy="polling", poll_interval_s=0.02))
        try:
            source = counter.energy_sources[f"gpu{run.gpu}"]
            mon_c, mon_p = Monitor(counter), Monitor(polled)
            run.matmul_load(min(2.0, run.sizes.load_s / 4))  # warm up: clocks and power settle
            mon_c.begin_window("load")
            mon_p.begin_window("load")
            run.matmul_load(run.sizes.load_s)
            mp = mon_p.end_window("load")
            mc = mon_c.end_window("load")
        finally:
            polled.close()
    finally:
        counter.close()
    name = f"gpu{run.gpu}"
    ec, ep = mc.energy[name], mp.energy[name]
    diff = abs(ep - ec) / ec if ec > 0 else math.inf
    # 3 %, plus what a counter that moves once a period can miss at the window's two edges
    period = run.counter_period_s
    bound = 0.03 + 2 * period / max(mc.time, 1e-9)
    run.add(
        "counter vs polled energy (steady load)",
        f"counter {ec:,.1f} J (source {source}), polled {ep:,.1f} J over {mc.time:.1f} s ({ec / mc.time:.0f} W); difference {diff:.2%}",
        f"difference <= {bound:.1%} (3 % + 2 x the counter's period {period * 1000:.0f} ms / window)",
        source == "counter" and diff <= bound,
        simulated=True,
    )


def check_update_periods(run: Run) -> None:
    """How often the counter and the power reading change, under load."""
    with Nvml(run.uuid) as nv:
        with in_background(lambda: run.matmul_load(run.sizes.probe_s + 0.5)):
            time.sleep(0.3)
            energy_iv, energy_reads = change_periods(nv.energy_mj, run.sizes.probe_s)
        with in_background(lambda: run.matmul_load(run.sizes.probe_s + 0.5)):
            time.sleep(0.3)
            power_iv, power_reads = change_periods(nv.power_mw, run.sizes.probe_s)
    if energy_iv:
        median = statistics.median(energy_iv)
        run.counter_period_s = median
        measured = (
            f"median {median * 1000:.1f} ms, shortest {min(energy_iv) * 1000:.1f} ms over {len(energy_iv)} changes "
            f"({energy_reads:,} reads in {run.sizes.probe_s:g} s)"
        )
        if run.fake:
            ok = abs(median - FAKE_COUNTER_PERIOD_S) <= 0.1 * FAKE_COUNTER_PERIOD_S
            expected = f"the simulated counter's {FAKE_COUNTER_PERIOD_S * 1000:.0f} ms, within 10 %"
        else:
            ok = 0.0005 <= median <= 1.0
            expected = "between 0.5 ms and 1 s (about 100 ms reported for NVIDIA boards)"
    else:
        measured, ok, expected = f"the counter changed {len(energy_iv)} times in {run.sizes.probe_s:g} s under load", False, "it moves"
    run.add("energy counter update period", measured, expected, ok, simulated=True)
    if power_iv:
        median = statistics.median(power_iv)
        measured = (
            f"median {median * 1000:.1f} ms, shortest {min(power_iv) * 1000:.1f} ms over {len(power_iv)} changes ({power_reads:,} reads)"
        )
        ok = 0.0005 <= median <= 2.0
    else:
        measured = f"the reading did not change in {run.sizes.probe_s:g} s ({power_reads:,} reads)"
        ok = run.fake  # the simulated draw is constant under a constant demand
    run.add(
        "power reading update period",
        measured,
        "measured (informational; real boards: 20 ms to 1 s)" if not run.fake else "constant: the simulated draw",
        ok,
        simulated=True,
    )


def check_bursty_coverage(run: Run) -> None:
    """Polled power against the counter under a load of 20 ms bursts every 100 ms: a reading that
    covers only part of each update period sees the bursts by chance, and the ratio wanders."""
    from zeus_core import Monitor
    from zeus_plugins_nvml.device import NvmlGpus
    from zeus_plugins_nvml.options import NvmlOptions

    counter = NvmlGpus(NvmlOptions(gpus=[run.gpu]))
    polled = NvmlGpus(NvmlOptions(gpus=[run.gpu], energy="polling", poll_interval_s=0.01))
    name = f"gpu{run.gpu}"
    ratios = []
    try:
        mon_c, mon_p = Monitor(counter), Monitor(polled)
        parts = 4
        for i in range(parts):
            mon_c.begin_window(f"b{i}")
            mon_p.begin_window(f"b{i}")
            run.bursty_load(run.sizes.bursty_s / parts)
            mp = mon_p.end_window(f"b{i}")
            mc = mon_c.end_window(f"b{i}")
            if mc.energy[name] > 0:
                ratios.append(mp.energy[name] / mc.energy[name])
    finally:
        polled.close()
        counter.close()
    if len(ratios) < 2:
        run.add("power reading under a bursty load", f"{len(ratios)} windows with energy", "4 windows measured", False)
        return
    spread = max(ratios) - min(ratios)
    run.add(
        "power reading under a bursty load (coverage)",
        f"polled / counter per {run.sizes.bursty_s / 4:g} s window: {', '.join(f'{r:.3f}' for r in ratios)} (spread {spread:.3f})",
        "measured (informational: a mean far from 1 or a wide spread is a reading that covers part of each period)",
        all(math.isfinite(r) and r > 0 for r in ratios),
        simulated=True,
    )


def check_power_limit(run: Run) -> None:
    """A limit set, read back, held under load, and put back when the device closes."""
    from zeus_core import Monitor
    from zeus_plugins_nvml.device import NvmlGpus
    from zeus_plugins_nvml.options import NvmlOptions

    dev = NvmlGpus(NvmlOptions(gpus=[run.gpu]))
    name = f"gpu{run.gpu}"
    try:
        lo, hi = dev.power_limit_range()
        before = dev.power_limit()
        target = float(lo)
        dev.set_power_limit(target)
        read = dev.power_limit()
        with Nvml(run.uuid) as nv:
            enforced = nv.limit_w()
        run.add(
            "power limit set and read (plugin)",
            f"{before:g} W -> set {target:g} W -> plugin reads {read:g} W, NVML {enforced:g} W (range {lo:g}..{hi:g} W); "
            f"path {dev.control_paths[name]}",
            "both read the limit set",
            read == target and enforced == target,
        )
        mon = Monitor(dev)
        run.matmul_load(min(1.0, run.sizes.limit_load_s / 3))
        mon.begin_window("limited")
        run.matmul_load(run.sizes.limit_load_s)
        m = mon.end_window("limited")
        watts = m.energy[name] / m.time
        run.add(
            "power limit held under load",
            f"{watts:.1f} W average over {m.time:.1f} s at the {target:g} W limit",
            f"<= {target * 1.05:g} W (the limit + 5 %)",
            watts <= target * 1.05,
            simulated=True,
        )
    finally:
        dev.close()
    with Nvml(run.uuid) as nv:
        after = nv.limit_w()
    run.add("power limit restored on close", f"{after:g} W after close (was {before:g} W)", "the limit it had", after == before)


def check_clocks(run: Run) -> None:
    """The SM clock locked to a middle supported clock, read under load, then reset."""
    from zeus_plugins_nvml.control import key_for
    from zeus_plugins_nvml.device import NvmlGpus
    from zeus_plugins_nvml.options import NvmlOptions

    dev = NvmlGpus(NvmlOptions(gpus=[run.gpu]))
    try:
        g = dev.gpus[0]
        clocks = dev.supported_clocks()
        mid = clocks[len(clocks) // 2]
        dev.lock_clocks(mid)
        with Nvml(run.uuid) as nv, in_background(lambda: run.matmul_load(1.5 if not run.fake else 0.2)):
            time.sleep(1.0 if not run.fake else 0.1)
            locked = nv.sm_clock()
        run.add(
            "SM clock locked and read (plugin)",
            f"locked {mid} MHz (of {len(clocks)} clocks, {min(clocks)}..{max(clocks)}); NVML reads {locked} MHz under load; "
            f"memory clock lock: {g.memory_clock_lockable}",
            f"{mid} MHz, within 5 % (the SM clock NVML reports)",
            abs(locked - mid) <= 0.05 * mid,
        )
        dev.reset_clocks()
        held = dev.settings.holds(key_for(g.uuid, "locked_clocks")) or dev.settings.holds(key_for(g.uuid, "locked_memory_clocks"))
        with Nvml(run.uuid) as nv, in_background(lambda: run.matmul_load(1.5 if not run.fake else 0.2)):
            time.sleep(1.0 if not run.fake else 0.1)
            free = nv.sm_clock()
        run.add(
            "SM clock reset (plugin)",
            f"NVML reads {free} MHz under load after the reset; journal entries left: {'yes' if held else 'none'}",
            f"above the locked {mid} MHz, no entry left",
            free > mid and not held,
        )
    finally:
        dev.close()


def _mlp(run: Run, layers: int) -> Any:
    torch = run.torch
    width = run.sizes.mlp_width
    mods: list[Any] = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.GELU()]
    return torch.nn.Sequential(*mods).to(run.device)


def check_jit(run: Run) -> None:
    """An MLP trained under the JIT power policy, and the same loop at the maximum limit."""
    from zeus_core import PowerLimitOptimizer, ZeusMonitor

    torch = run.torch
    torch.manual_seed(0)
    if run.device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    width, batch = run.sizes.mlp_width, run.sizes.mlp_batch
    model = _mlp(run, 4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(batch, width, device=run.device)
    y = torch.randint(0, width, (batch,), device=run.device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if run.fake:
            time.sleep(0.005)  # a step of a few ms, as a small GPU step takes

    for _ in range(3):
        step()
    run.sync()
    t0 = time.perf_counter()
    for _ in range(10):
        step()
    run.sync()
    step_s = max((time.perf_counter() - t0) / 10, 1e-4)
    warmup = max(1, math.ceil(run.sizes.jit_warmup_s / step_s))
    measure = max(2, math.ceil(run.sizes.jit_measure_s / step_s))
    steady = max(3, math.ceil(run.sizes.jit_steady_s / step_s))

    monitor = ZeusMonitor(gpu_indices=[run.gpu], cpu_indices=[], device="nvml")
    try:

        def epoch(plo: PowerLimitOptimizer, steps: int) -> None:
            plo.on_epoch_begin(steps)
            for _ in range(steps):
                plo.on_step_begin()
                step()
                plo.on_step_end()
            plo.on_epoch_end()

        with PowerLimitOptimizer(monitor, policy="max") as at_max:
            epoch(at_max, steady)
            base = at_max.epochs[-1]
            max_limit = at_max.held_limit
        lo, hi = monitor.controllable()[0].power_limit_range()  # type: ignore[index]
        limits = math.floor((hi - lo) / run.sizes.jit_step_w) + 1
        # thermally stable profiling (the JIT's default) warms each limit up until power and temperature
        # settle, here at most 3x the planned warm-up: the epoch has room for that, and steps left over
        # run at the chosen limit
        profile_steps = limits * (3 * warmup + measure) + 2
        options = {"step_w": run.sizes.jit_step_w, "warmup_iters": warmup, "measure_iters": measure, "max_warmup_iters": 3 * warmup}
        with PowerLimitOptimizer(monitor, policy="jit", options=options) as plo:
            epoch(plo, profile_steps)
            profiled = plo.epochs[-1]
            epoch(plo, steady)
            chosen = plo.held_limit
            held = plo.epochs[-1]
        with Nvml(run.uuid) as nv:
            after = nv.limit_w()
    finally:
        monitor.close()
    e_max, e_jit = base["energy_j"] / steady, held["energy_j"] / steady
    c_max, c_jit = base["cost"] / steady, held["cost"] / steady
    t_max, t_jit = base["time_s"] / steady, held["time_s"] / steady
    saving = 1 - e_jit / e_max if e_max > 0 else math.nan
    if run.fake:
        # a step's time on a shared CPU says nothing of a GPU's: what the simulated GPU shows is that
        # the chosen limit holds its draw at or below the maximum's (equal where the JIT, misled by a
        # busy CPU's step times, chose a limit above the simulated load's 250 W; 2 % for the window edges)
        expected = "average power at the chosen limit <= 1.02 x at max power"
        ok = held["energy_j"] / held["time_s"] <= 1.02 * base["energy_j"] / base["time_s"]
    else:
        expected, ok = "cost per step at the chosen limit <= 1.05 x at max power", c_jit <= 1.05 * c_max
    run.add(
        "JIT power limit in a training loop",
        f"{limits} limits x ({warmup} + {measure}) steps of {step_s * 1000:.1f} ms profiled in {profiled['time_s']:.1f} s; "
        f"chose {chosen:g} W (range {lo:g}..{hi:g} W); limit after close {after:g} W",
        f"a limit in the range; back to {run.original_limit_w:g} W after close",
        chosen is not None and lo <= chosen <= hi and after == run.original_limit_w,
    )
    run.add(
        "JIT energy saving against max power",
        f"per step at {chosen:g} W: {e_jit:.2f} J, {t_jit * 1000:.1f} ms, cost {c_jit:.2f}; at {max_limit:g} W: {e_max:.2f} J, "
        f"{t_max * 1000:.1f} ms, cost {c_max:.2f}; energy saving {saving:.1%}",
        expected,
        ok,
        simulated=True,
    )


def check_perseus(run: Run) -> None:
    """The Perseus online profiler (what ``perseus-stage`` runs) on two stages, then the planner.

    Each stage is two layers of an MLP; an instruction is ``reps`` microbatches, as many as last
    ``perseus_instruction_s`` at the top clock (long enough for the counter's period), run with
    activation checkpointing so that their activations need no memory until the backward.
    """
    from torch.utils.checkpoint import checkpoint

    from zeus_core import Monitor
    from zeus_plugins_nvml.control import key_for
    from zeus_plugins_nvml.device import NvmlGpus
    from zeus_plugins_nvml.options import NvmlOptions
    from zeus_plugins_perseus.planner import plan_frontier
    from zeus_plugins_perseus.profile import InstructionProfile
    from zeus_plugins_perseus.runtime import OnlineProfiler

    torch = run.torch
    torch.manual_seed(1)
    stages = [_mlp(run, 2), _mlp(run, 2)]
    x0 = torch.randn(run.sizes.mlp_batch, run.sizes.mlp_width, device=run.device)

    def forward(stage: Any, xin: Any, reps: int) -> Any:
        return torch.stack([checkpoint(stage, xin, use_reentrant=False).float().mean() for _ in range(reps)]).sum()

    def calibrate(stage: Any) -> int:
        """Microbatches per instruction: a forward lasts about ``perseus_instruction_s`` at the top clock."""
        xin = x0.detach().requires_grad_()
        forward(stage, xin, 2).backward()
        run.sync()
        t0 = time.perf_counter()
        with torch.no_grad():
            for _ in range(5):
                stage(xin)
        run.sync()
        per = max((time.perf_counter() - t0) / 5, 1e-5)
        return max(1, math.ceil(run.sizes.perseus_instruction_s / per))

    dev = NvmlGpus(NvmlOptions(gpus=[run.gpu]))
    rows = []
    sim: list[str] = []
    try:
        supported = dev.supported_clocks()
        n = run.sizes.perseus_clocks
        # the top clock down to half the range: lower ones only cost time here
        picks = sorted({supported[round(i * (len(supported) - 1) / (2 * (n - 1)))] for i in range(n)}, reverse=True)
        for index, stage in enumerate(stages):
            reps = calibrate(stage)
            prof = OnlineProfiler(dev, index, frequencies=picks, warmup_steps=1, profile_steps=2, monitor=Monitor(dev))
            while not prof.done:
                prof.on_step_begin()
                xin = x0.detach().requires_grad_()
                prof.on_instruction_begin("forward", 0)
                loss = forward(stage, xin, reps)
                prof.on_instruction_end("forward")
                prof.on_instruction_begin("backward", 0)
                loss.backward()
                prof.on_instruction_end("backward")
                prof.on_step_end()
            rows += prof.rows()
            sim = prof.simulated_drivers
        left = [s for s in ("locked_clocks", "locked_memory_clocks") if dev.settings.holds(key_for(run.uuid, s))]
    finally:
        dev.close()
    seen = {(s, i, f) for s, i, f, _, _ in rows}
    complete = seen == {(s, i, f) for s in (0, 1) for i in ("forward", "backward") for f in picks}
    positive = all(t > 0 and e > 0 for *_, t, e in rows)
    watts = {f: statistics.fmean([e / t for _, _, ff, t, e in rows if ff == f]) for f in picks}
    times = {f: statistics.fmean([t for _, _, ff, t, _ in rows if ff == f]) for f in picks}
    top, low = picks[0], picks[-1]
    run.add(
        "Perseus stage profiler, two stages",
        f"stages 0 and 1, forward and backward ({reps} microbatches) at {', '.join(map(str, picks))} MHz: {len(rows)} rows; "
        f"mean power {watts[top]:.0f} W at {top} MHz, {watts[low]:.0f} W at {low} MHz; time x{times[low] / times[top]:.2f} at "
        f"{low} MHz; clocks left locked: {', '.join(left) or 'none'}" + (f"; profile marked simulated ({', '.join(sim)})" if sim else ""),
        "every (stage, instruction, clock) measured; less power at the lowest clock"
        + ("" if run.fake else ", and more time (a compute-bound stage)")
        + "; clocks reset",
        complete and positive and watts[low] < watts[top] and not left and (run.fake or times[low] > times[top]),
        simulated=True,
    )
    profile = InstructionProfile.from_rows(rows, source="benchmarks/real_gpu.py", simulated=sim)
    unit = max(min(t for *_, t, _ in rows) / 10, 1e-6)
    plans = plan_frontier(profile, 2, 3, "1f1b", unit_time_s=unit, workers=1)
    run.add(
        "Perseus planner on the measured profile",
        f"{len(plans)} plan(s) on the frontier (2 stages, 3 microbatches, 1F1B, unit {unit * 1000:.2f} ms)",
        "at least one plan",
        len(plans) >= 1,
        simulated=True,
    )


def check_daemon(run: Run) -> None:
    """``zeus daemon`` as root; a client without privilege sets a limit through it and exits."""
    root = os.geteuid() == 0
    if not root and not run.fake:
        run.add("daemon path", "not run: this process is not root", "run as root (sudo -E) to start zeus daemon", False)
        return
    tmp = Path(tempfile.mkdtemp(prefix="zeus-real-gpu-daemon-"))
    tmp.chmod(0o755)
    daemon = None
    try:
        sock = tmp / "daemon.sock"
        user = NOBODY if root else os.geteuid()
        (tmp / "daemon.toml").write_text(
            textwrap.dedent(f"""
            socket = "{sock}"
            socket_mode = "0666"
            allow_users = ["{user}"]
            journal_dir = "{tmp / "journal"}"
            log = "{tmp / "daemon.log"}"
            plugins = ["nvml"]
            [serve.nvml]
            gpus = ["{run.uuid}"]
            """)
        )
        home = tmp / "client"
        home.mkdir()
        if root:
            os.chown(home, NOBODY, NOBODY)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZEUS_") or k == "ZEUS_FAKE_NVML"}
        env.update(HOME=str(home), ZEUS_STATE_DIR=str(home / "state"), PYTHONDONTWRITEBYTECODE="1")
        out = open(tmp / "daemon.out", "wb")
        daemon = subprocess.Popen(
            [sys.executable, "-c", ZEUS, "daemon", "--config", str(tmp / "daemon.toml")],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp,
        )
        out.close()
        deadline = time.monotonic() + min(60.0, max(run.left() - 20, 5))
        while not sock.exists():
            if daemon.poll() is not None or time.monotonic() > deadline:
                why = (tmp / "daemon.out").read_text()[-2000:]
                run.add("daemon path", f"zeus daemon did not start (exit {daemon.poll()}): {why.strip()}", "it serves", False)
                return
            time.sleep(0.05)
        with Nvml(run.uuid) as nv:
            before = nv.limit_w()
            lo, hi = (x / 1000.0 for x in nv.nvml.nvmlDeviceGetPowerManagementLimitConstraints(nv.handle))
        target = lo if before != lo else hi
        argv = [sys.executable, __file__, "--client", str(run.gpu), str(sock), repr(target)] + (["--drop"] if root else [])
        client = subprocess.run(argv, env=env, cwd=home, capture_output=True, text=True, timeout=max(10.0, min(120.0, run.left())))
        lines = client.stdout.strip().splitlines()
        said = json.loads(lines[-1]) if client.returncode == 0 and lines else None
        if said is None:
            run.add(
                "daemon path: limit set by a client",
                f"the client failed (exit {client.returncode}): {client.stderr.strip()[-1500:]}",
                "it sets the limit",
                False,
            )
            return
        who = "uid 65534" if root else "this user"
        run.add(
            "daemon path: limit set by an unprivileged client",
            f"client ({who}, pid {said['pid']}) path {said['path']}: {before:g} W -> {said['read']:g} W, then exited without closing",
            f"path daemon; {target:g} W read back",
            said["path"] == "daemon" and said["read"] == target,
        )
        t0 = time.monotonic()
        with Nvml(run.uuid) as nv:
            after = nv.limit_w()
            while after != before and time.monotonic() - t0 < 10:
                time.sleep(0.05)
                after = nv.limit_w()
        run.add(
            "daemon path: restored when the client exits",
            f"{after:g} W {time.monotonic() - t0:.2f} s after the client exited (was {before:g} W)",
            f"{before:g} W within 10 s",
            after == before,
        )
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


def client(argv: list[str]) -> None:
    """``--client GPU SOCKET WATTS [--drop]``: set a limit through the daemon, say what happened, exit
    without closing the device (as a crashed client would): the daemon is what puts the limit back."""
    gpu, sock, watts = int(argv[0]), argv[1], float(argv[2])
    if "--drop" in argv:
        sys.path.insert(0, str(REPO / "tests" / "_support"))
        from run_unprivileged import drop, keep_import_path

        # What the client runs, imported as root (see run_unprivileged): a folder root may read and the
        # client may not (a checkout under /root) would stop an import after the drop.
        import zeus_core.devicekit.settings  # noqa: F401
        import zeus_plugins_nvml.device  # noqa: F401
        import zeus_plugins_nvml.options  # noqa: F401
        from zeus_plugins_nvml.control import nvml_module

        nvml_module()  # pynvml, or the simulated driver
        keep_import_path()
        drop(NOBODY, NOBODY)
    from zeus_plugins_nvml.device import NvmlGpus
    from zeus_plugins_nvml.options import NvmlOptions

    dev = NvmlGpus(NvmlOptions(gpus=[gpu], daemon_socket=sock))
    dev.set_power_limit(watts)
    print(json.dumps({"pid": os.getpid(), "path": dev.control_paths[f"gpu{gpu}"], "read": dev.power_limit()}), flush=True)
    os._exit(0)


# --------------------------------------------------------------------------- the run

#: (name in the table, function, seconds it needs at most on a real GPU)
CHECKS: list[tuple[str, Callable[[Run], None], float]] = [
    ("update periods", check_update_periods, 15),
    ("counter vs polled energy", check_counter_vs_polled, 40),
    ("bursty load", check_bursty_coverage, 20),
    ("power limit", check_power_limit, 20),
    ("SM clocks", check_clocks, 15),
    ("JIT training loop", check_jit, 90),
    ("Perseus stage profiler", check_perseus, 120),
    ("daemon path", check_daemon, 60),
]


def missing_modules() -> list[str]:
    """What to install for each needed module that does not import."""
    out = []
    for module, hint in NEEDED.items():
        try:
            importlib.import_module(module)
        except ImportError as e:
            out.append(f"{module} ({e}): pip install {hint}")
    return out


def fake_driver(workdir: Path) -> Path:
    """A simulated GPU that only root may steer (as the real driver), its counter moving every 100 ms."""
    from zeus_plugins_nvml import fake_pynvml

    privileged: bool | str = "root" if os.geteuid() == 0 else True
    return fake_pynvml.create(workdir / "driver.json", [fake_pynvml.FakeGpu(counter_period_s=FAKE_COUNTER_PERIOD_S)], privileged=privileged)


def fake_counter_period(seconds: float) -> None:
    """Set the simulated GPU's counter period. The checks after the counter's own measure windows of
    a fraction of a second with ``--fake``, which a 100 ms counter cannot resolve; on a real GPU
    their windows are long enough for it."""
    from zeus_plugins_nvml import fake_pynvml

    with fake_pynvml._mutate() as state:  # the driver state, as set_demand changes it
        for g in state["gpus"]:
            fake_pynvml._reanchor(g)
            g["counter_period_s"] = seconds


def header(run: Run, started: datetime.datetime) -> list[str]:
    from zeus_plugins_nvml.device import NvmlGpus
    from zeus_plugins_nvml.options import NvmlOptions

    torch = run.torch
    dev = NvmlGpus(NvmlOptions(gpus=[run.gpu]))  # the plugin numbers GPUs as CUDA does (CUDA_VISIBLE_DEVICES)
    try:
        run.uuid, model = dev.gpus[0].uuid, dev.gpus[0].model
        driver = dev.driver_versions.get("NVIDIA driver", "unknown")
    finally:
        dev.close()
    with Nvml(run.uuid) as nv:
        run.original_limit_w = nv.limit_w()
    cuda = torch.version.cuda or "none (CPU build)"
    kind = "SIMULATED GPU (--fake: zeus_plugins_nvml.fake_pynvml), torch on the CPU" if run.fake else f"CUDA device {run.gpu}"
    return [
        f"# benchmarks/real_gpu.py, {started.strftime('%Y-%m-%d %H:%M UTC')}",
        "",
        f"- GPU: {model} ({run.uuid}), {kind}",
        f"- NVIDIA driver: {driver}; CUDA (torch): {cuda}; torch {torch.__version__}; Python {sys.version.split()[0]}",
        f"- power limit at start: {run.original_limit_w:g} W; time budget {run.left():.0f} s",
        "",
    ]


def table(rows: list[Row]) -> str:
    lines = ["| check | measured | expected | result |", "| --- | --- | --- | --- |"]
    for r in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in r.cells()) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--client"]:
        client(argv[1:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fake", action="store_true", help="the simulated driver and torch on the CPU (a machine without a GPU)")
    ap.add_argument("--gpu", type=int, default=0, help="the CUDA index of the GPU to check (default 0)")
    ap.add_argument(
        "--timeout", type=float, default=LONGEST_S, help=f"the run's time budget in seconds (at most {LONGEST_S:g}, the default)"
    )
    args = ap.parse_args(argv)
    if not 10 <= args.timeout <= LONGEST_S:
        ap.error(f"--timeout must be between 10 and {LONGEST_S:g} seconds, got {args.timeout:g}")
    started = datetime.datetime.now(datetime.UTC)
    deadline = time.monotonic() + args.timeout
    workdir = Path(tempfile.mkdtemp(prefix="zeus-real-gpu-"))
    workdir.chmod(0o755)
    if args.fake:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)  # the simulated GPU is GPU 0; torch runs on the CPU anyway
        os.environ["ZEUS_STATE_DIR"] = str(workdir / "state")  # the simulated GPU's journal stays here
        os.environ["ZEUS_FAKE_NVML"] = str(workdir / "driver.json")
        if args.gpu != 0:
            ap.error("--fake simulates one GPU: --gpu 0")
    missing = missing_modules()
    if missing:
        print("missing modules; from the repository root:\n  " + "\n  ".join(missing), file=sys.stderr)
        shutil.rmtree(workdir, ignore_errors=True)
        return 2

    import torch

    if args.fake:
        fake_driver(workdir)
        device = torch.device("cpu")
        torch.set_num_threads(1)  # tiny CPU steps: threads would only wait for each other on a shared machine
    else:
        if not torch.cuda.is_available():
            print(f"torch {torch.__version__} sees no CUDA GPU: install a CUDA build of torch, or run with --fake", file=sys.stderr)
            shutil.rmtree(workdir, ignore_errors=True)
            return 2
        device = torch.device("cuda", args.gpu)
    from zeus_core.engine.registry import get_registry
    from zeus_core.journal import restore_pending

    registry = get_registry()
    absent = [
        f"{kind} {name!r}"
        for kind, name in (("device", "nvml"), ("power_policy", "jit"), ("power_policy", "max"))
        if name not in registry.names(kind)
    ]
    if absent:
        print(f"not registered: {', '.join(absent)}; pip install -e the plugins ({', '.join(NEEDED.values())})", file=sys.stderr)
        shutil.rmtree(workdir, ignore_errors=True)
        return 2
    restore_pending(registry.restorers)  # what a killed earlier run left changed goes back first

    run = Run(
        fake=args.fake, gpu=args.gpu, deadline=deadline, sizes=FAKE if args.fake else REAL, workdir=workdir, torch=torch, device=device
    )

    def out_of_time(_signum: int, _frame: Any) -> None:
        raise BudgetSpent(f"the time budget of {args.timeout:g} s ran out")

    try:
        print("\n".join(header(run, started)), flush=True)
    except Exception as e:  # noqa: BLE001 - no GPU to check: nothing was changed
        print(f"cannot open GPU {args.gpu} through the nvml plugin: {e}", file=sys.stderr)
        shutil.rmtree(workdir, ignore_errors=True)
        return 1
    previous = signal.signal(signal.SIGALRM, out_of_time)
    signal.setitimer(signal.ITIMER_REAL, max(1.0, run.left() - 5))  # 5 s kept to put settings back and print
    status = 0
    name = "the start"
    try:
        for name, check, need in CHECKS:
            if args.fake and check is check_power_limit:
                fake_counter_period(0.0)
            if not args.fake and run.left() < need:
                run.add(name, f"not run: {run.left():.0f} s of the budget left", f"{need:g} s", False)
                continue
            print(f"... {name}", file=sys.stderr, flush=True)
            try:
                check(run)
            except Exception as e:  # noqa: BLE001 - a failed check is a FAIL row; the next one runs
                run.add(name, f"{type(e).__name__}: {e}".replace("\n", " ")[:600], "no error", False)
    except BudgetSpent as e:
        run.add("time budget", f"{e} during {name}", f"every check within {args.timeout:g} s", False)
    except KeyboardInterrupt:
        run.add("interrupted", f"Ctrl-C during {name}", "the whole run", False)
        status = 130
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        from zeus_core.journal import restore_all_guards

        restore_all_guards()  # anything a check left changed (an interrupted one) goes back now
        try:
            with Nvml(run.uuid, index=run.gpu) as nv:  # by index where the header did not get as far as the UUID
                final = nv.limit_w()
            run.add(
                "GPU as it was after the run",
                f"power limit {final:g} W",
                f"{run.original_limit_w:g} W (at start)",
                final == run.original_limit_w,
            )
        except Exception as e:  # noqa: BLE001
            run.add("GPU as it was after the run", f"cannot read it: {e}", f"{run.original_limit_w:g} W (at start)", False)
        shutil.rmtree(workdir, ignore_errors=True)
    elapsed = args.timeout - run.left()
    print(table(run.rows))
    failed = [r.check for r in run.rows if not r.ok]
    print(
        f"\n{len(run.rows) - len(failed)} of {len(run.rows)} checks passed in {elapsed:.0f} s"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return status or (1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main())

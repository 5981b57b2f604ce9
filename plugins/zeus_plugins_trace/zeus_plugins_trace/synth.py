"""A synthetic trace pair in the NSDI'23 format, from a small parametric model.

So that the README's main job runs on a fresh machine with no download, and so
that tests can make traces with known properties. The model is deliberately
simple and says nothing about any real GPU; reports flag such traces as
synthetic (the folder gets a ``synthetic.json`` with the parameters).

Train trace, per workload, batch size ``b`` and seeded run ``r``:

    epochs(b) = e0 x scale(target) x (1 + g x max(0, log2(b / b*))^2 + h x max(0, log2(b* / b)))
    target_epoch = ceil(epochs(b) x exp(sigma x z_r)),  z_r ~ N(0, 1)

so epochs to target are flat around the sweet spot ``b*``, grow quickly above
it (large batches generalise worse) and slowly below it; a run that would need
more than ``1.5 x max_epochs`` epochs never reaches the target (NaN).

Power trace, per GPU, batch size ``b`` and power limit ``p``:

    throughput(b) = speed x peak x b / (b + b_half)          samples/s, saturating
    demand(b)     = idle + (tdp - idle) x u x b / (b + b_half)   W the GPU would draw
    at p >= demand: average_power = demand,   time = samples / throughput
    at p <  demand: average_power = p,        time = samples / throughput x (demand / p)^alpha

with ``alpha = 0.35`` (speed scales with about the 0.35 power of the power cap),
``u`` the workload's utilisation at saturation, and ``tdp`` the GPU's highest
limit. Power thus rises with the limit until the GPU's demand is met, and the
time per epoch falls with it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import attrs
import numpy as np

from zeus_core import write_atomic
from zeus_plugins_trace.folders import POWER_PATTERN, TRAIN_FILE
from zeus_plugins_trace.traces import (
    POWER_COLUMNS,
    SYNTHETIC_MARKER,
    TRAIN_COLUMNS,
    PowerRow,
    TraceSet,
    TrainRow,
)

ALPHA = 0.35
RUNS = 5


@attrs.frozen
class SynthWorkload:
    """Parameters of one workload of the synthetic model (see the module docstring)."""

    dataset: str
    network: str
    optimizer: str
    max_epochs: int
    targets: tuple[tuple[float, float], ...]  # (target metric, scale of epochs)
    batch_sizes: tuple[int, ...]
    sweet_spot: int
    e0: float
    growth: float
    small_penalty: float
    sigma: float
    samples: int
    peak: float  # samples/s at saturation on the reference GPU (speed 1)
    b_half: float
    utilisation: float


@attrs.frozen
class SynthGpu:
    name: str
    limits: tuple[float, ...]
    idle: float
    speed: float


def _pow2(lo: int, hi: int) -> tuple[int, ...]:
    return tuple(2**k for k in range(int(math.log2(lo)), int(math.log2(hi)) + 1))


#: The six NSDI'23 workloads, with their identities, targets and max epochs.
WORKLOADS: tuple[SynthWorkload, ...] = (
    SynthWorkload(
        "cifar100",
        "shufflenetv2",
        "adadelta",
        100,
        ((0.5, 0.7), (0.6, 1.0), (0.65, 1.35)),
        _pow2(8, 4096),
        128,
        19.0,
        0.25,
        0.06,
        0.07,
        50_000,
        9_000.0,
        256.0,
        0.75,
    ),
    SynthWorkload(
        "imagenet",
        "resnet50",
        "adadelta",
        100,
        ((0.6, 0.8), (0.65, 1.0), (0.7, 1.3)),
        (64, 128, 192, 256, 360, 512),
        192,
        30.0,
        0.35,
        0.1,
        0.08,
        1_281_167,
        400.0,
        48.0,
        0.95,
    ),
    SynthWorkload(
        "librispeech",
        "deepspeech2",
        "adamw",
        16,
        ((45.0, 0.8), (40.0, 1.0), (35.0, 1.3)),
        (8, 16, 32, 48, 64, 96, 128, 192),
        32,
        8.0,
        0.12,
        0.05,
        0.08,
        281_241,
        180.0,
        24.0,
        0.9,
    ),
    SynthWorkload(
        "movielens-1m",
        "ncf",
        "adam",
        100,
        ((0.4, 0.8), (0.41, 1.0), (0.42, 1.4)),
        _pow2(64, 16384),
        4096,
        4.0,
        0.08,
        0.25,
        0.12,
        994_169,
        900_000.0,
        4096.0,
        0.55,
    ),
    SynthWorkload(
        "squad",
        "bert_base_uncased",
        "adamw",
        6,
        ((83.0, 0.8), (84.0, 1.0), (85.0, 1.25)),
        (8, 12, 16, 24, 32, 48),
        16,
        3.6,
        0.12,
        0.05,
        0.06,
        88_641,
        90.0,
        12.0,
        0.95,
    ),
    SynthWorkload(
        "sentiment140",
        "bert_base_uncased",
        "adamw",
        10,
        ((0.83, 0.8), (0.84, 1.0), (0.845, 1.3)),
        (8, 16, 32, 64, 128),
        64,
        2.8,
        0.1,
        0.05,
        0.05,
        1_600_000,
        500.0,
        32.0,
        0.9,
    ),
)

GPUS: tuple[SynthGpu, ...] = (
    SynthGpu("v100", tuple(float(p) for p in range(100, 251, 25)), 40.0, 1.0),
    SynthGpu("a40", tuple(float(p) for p in range(100, 301, 25)), 35.0, 1.3),
    SynthGpu("p100", tuple(float(p) for p in range(125, 251, 25)), 35.0, 0.6),
    SynthGpu("rtx6000", tuple(float(p) for p in range(100, 251, 25)) + (260.0,), 30.0, 0.9),
)


def _epochs(w: SynthWorkload, b: int, scale: float) -> float:
    up = max(0.0, math.log2(b / w.sweet_spot))
    down = max(0.0, math.log2(w.sweet_spot / b))
    return w.e0 * scale * (1.0 + w.growth * up * up + w.small_penalty * down)


def train_rows(seed: int = 0, workloads: tuple[SynthWorkload, ...] = WORKLOADS) -> list[TrainRow]:
    rng = np.random.default_rng(seed)
    rows = []
    for w in workloads:
        z = rng.standard_normal((len(w.batch_sizes), RUNS))
        for target, scale in w.targets:
            for i, b in enumerate(w.batch_sizes):
                for r in range(RUNS):
                    e = math.ceil(_epochs(w, b, scale) * math.exp(w.sigma * z[i, r]))
                    epoch = float(e) if e <= 1.5 * w.max_epochs else math.nan
                    rows.append(TrainRow(w.dataset, w.network, b, w.optimizer, r + 1, float(target), epoch))
    return rows


def power_rows(gpu: SynthGpu, workloads: tuple[SynthWorkload, ...] = WORKLOADS) -> list[PowerRow]:
    tdp = max(gpu.limits)
    rows = []
    for w in workloads:
        for b in w.batch_sizes:
            sat = b / (b + w.b_half)
            throughput = gpu.speed * w.peak * sat
            demand = gpu.idle + (tdp - gpu.idle) * w.utilisation * sat
            base = w.samples / throughput
            for p in gpu.limits:
                if p >= demand:
                    power, time = demand, base
                else:
                    power, time = p, base * (demand / p) ** ALPHA
                rows.append(PowerRow(w.dataset, w.network, b, w.optimizer, p, round(time, 6), round(power, 6)))
    return rows


def model_description(seed: int) -> dict:
    return {
        "synthetic": True,
        "seed": seed,
        "model": "zeus_plugins_trace.synth (see its docstring)",
        "alpha": ALPHA,
        "runs": RUNS,
        "workloads": [attrs.asdict(w) for w in WORKLOADS],
        "gpus": [attrs.asdict(g) for g in GPUS],
    }


def gpu(name: str) -> SynthGpu:
    for g in GPUS:
        if g.name == name:
            return g
    raise ValueError(f"unknown GPU {name!r} in the synthetic model; it has {', '.join(g.name for g in GPUS)}")


def synthetic_traces(gpu_name: str, seed: int = 0) -> TraceSet:
    """The synthetic trace pair for one GPU, in memory (what ``traces = "synthetic"`` reads)."""
    return TraceSet(f"synthetic trace (seed {seed})", gpu_name, train_rows(seed), power_rows(gpu(gpu_name)), True, model_description(seed))


def write(out: str | Path, seed: int = 0) -> list[Path]:
    """Write the synthetic train trace, one power trace per GPU and ``synthetic.json`` under ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []

    def fmt(v) -> str:
        if isinstance(v, float):
            return "nan" if math.isnan(v) else repr(v)
        return str(v)

    def dump(path: Path, columns, rows) -> None:
        lines = [",".join(columns)] + [",".join(fmt(getattr(r, c, "")) for c in columns) for r in rows]
        written.append(write_atomic(path, "\n".join(lines) + "\n"))

    # The public format also has a learning_rate column, which no simulation
    # reads; the synthetic model has none, so it is written empty.
    train_columns = TRAIN_COLUMNS[:4] + ("learning_rate",) + TRAIN_COLUMNS[4:]
    dump(out / TRAIN_FILE, train_columns, train_rows(seed))
    for g in GPUS:
        dump(out / POWER_PATTERN.format(gpu=g.name), POWER_COLUMNS, power_rows(g))
    marker = out / SYNTHETIC_MARKER
    written.append(write_atomic(marker, json.dumps(model_description(seed), indent=2) + "\n"))
    return written

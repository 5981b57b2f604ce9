"""Helpers for the tests of zeus inside the user's own loop (ZeusMonitor, PowerLimitOptimizer,
BatchSizeOptimizer, trainer callbacks): the simulated NVIDIA driver, and tiny training steps."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from zeus_plugins_nvml import fake_pynvml

#: jit options that profile every limit (400 W down to 100 W, 13 of them) in 117 steps
QUICK_JIT = {"warmup_iters": 1, "measure_iters": 8}


def fake_gpus(path: Path, monkeypatch: Any = None, gpus: int = 1, privileged: bool | str = True) -> Path:
    """A simulated driver with ``gpus`` A100s at ``path``, used by this process (and by children,
    through ``ZEUS_FAKE_NVML``)."""
    if monkeypatch is not None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    fake_pynvml.create(path, gpus, privileged=privileged)
    fake_pynvml.install(path, monkeypatch)
    return path


def limits(path: Path) -> list[float]:
    """Every simulated GPU's power limit now (W)."""
    return [g["limit_w"] for g in fake_pynvml.read_state(path)["gpus"]]


def spin(seconds: float) -> None:
    """Busy work of a fixed length (a training step)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def run_epochs(plo: Any, epochs: int, steps: int, step_s: float = 0.0005, seen: list | None = None) -> None:
    """The user's loop: ``epochs`` epochs of ``steps`` steps, with the optimizer's four calls."""
    for _ in range(epochs):
        plo.on_epoch_begin()
        for _ in range(steps):
            plo.on_step_begin()
            if seen is not None:
                seen.append(plo.power_limit)
            spin(step_s)
            plo.on_step_end()
        plo.on_epoch_end()


def train_to_target(batch_size: int, zeus: Any) -> None:
    """A ``torch`` workload entry: 60 quick steps per epoch, the target reached in the first epoch."""
    for _ in zeus.epochs():
        for _ in zeus.iterate(range(60)):
            spin(0.0003)
        zeus.report_metric(1.0)


def env_with_fake(path: Path) -> dict[str, str]:
    """The environment of a child process that uses the simulated driver at ``path``."""
    env = dict(os.environ)
    env["ZEUS_FAKE_NVML"] = str(path)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env

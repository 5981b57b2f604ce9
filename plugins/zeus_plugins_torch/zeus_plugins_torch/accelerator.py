"""Which torch device and distributed backend a rank uses."""

from __future__ import annotations

import torch


def resolve_accelerator(accelerator: str) -> str:
    if accelerator == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if accelerator == "cuda" and not torch.cuda.is_available():
        raise ValueError('accelerator = "cuda" but torch sees no CUDA device; use "cpu" or "auto"')
    return accelerator


def torch_device(accelerator: str, local_rank: int = 0) -> torch.device:
    """The device a rank trains on: its ``local_rank``-th visible GPU (the only one where
    ``CUDA_VISIBLE_DEVICES`` names one GPU per rank), or the CPU."""
    if accelerator != "cuda":
        return torch.device("cpu")
    return torch.device("cuda", local_rank if torch.cuda.device_count() > local_rank else 0)

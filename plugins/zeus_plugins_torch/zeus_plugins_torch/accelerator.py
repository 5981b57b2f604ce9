"""Which torch device and distributed backend a rank uses."""

from __future__ import annotations

import torch


def resolve_accelerator(accelerator: str) -> str:
    if accelerator == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if accelerator == "cuda" and not torch.cuda.is_available():
        raise ValueError("accelerator = \"cuda\" but torch sees no CUDA device; use \"cpu\" or \"auto\"")
    return accelerator


def torch_device(accelerator: str) -> torch.device:
    return torch.device("cuda", 0) if accelerator == "cuda" else torch.device("cpu")

"""Framework glue: execution sync before timestamps, and the reductions the optimizers run across ranks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from zeus_core.windows import make_sync


def sync_execution(gpu_indices: list[int], sync_with: str | Callable[[], Any] = "torch") -> None:
    """Wait for the work queued on ``gpu_indices`` (``torch``, ``jax``, ``cupy`` or a callable), as the core's monitors do."""
    make_sync(sync_with, gpu_indices)()


def is_distributed() -> bool:
    """True inside an initialised ``torch.distributed`` process group of more than one rank."""
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def all_reduce(object: list[int] | list[float], operation: Literal["sum", "max"]) -> list[int] | list[float]:
    """Element-wise ``sum`` or ``max`` of ``object`` over every rank (``object`` itself outside distributed runs)."""
    if operation not in ("sum", "max"):
        raise ValueError(f"all_reduce operation must be 'sum' or 'max', got {operation!r}")
    if not is_distributed():
        return object
    import torch
    import torch.distributed as dist

    device = "cuda" if torch.cuda.is_available() and dist.get_backend() == "nccl" else "cpu"
    tensor = torch.tensor(object, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM if operation == "sum" else dist.ReduceOp.MAX)
    return tensor.cpu().tolist()

"""Framework glue: execution sync before timestamps, and the reductions the optimizers run across ranks."""

from __future__ import annotations

import logging
import types
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Literal

from zeus_core.windows import make_sync

logger = logging.getLogger(__name__)


def sync_execution(gpu_devices: list[int], sync_with: str | Callable[[], Any] = "torch") -> None:
    """Wait for the work queued on ``gpu_devices`` (``torch``, ``jax``, ``cupy`` or a callable), as the core's
    monitors do; upstream's keyword names."""
    make_sync(sync_with, gpu_devices)()


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


# -- which frameworks this process has, and its rank (upstream's names) --

#: the framework modules found by the ``*_is_available`` checks, by name (``"torch"``, ``"jax"``, ``"cupy"``)
MODULE_CACHE: dict[str, types.ModuleType] = {}


@lru_cache(maxsize=1)
def torch_is_available(ensure_available: bool = False, ensure_cuda: bool = True) -> bool:
    """True where ``torch`` imports. ``ensure_cuda``: a torch without CUDA raises ``RuntimeError``;
    ``ensure_available``: no torch raises ``RuntimeError``. The answer is cached, as upstream."""
    try:
        import torch
    except ImportError as e:
        logger.info("PyTorch is not available.")
        if ensure_available:
            raise RuntimeError("Failed to import Pytorch") from e
        return False
    cuda = bool(torch.cuda.is_available())
    if ensure_cuda and not cuda:
        raise RuntimeError("PyTorch is available but does not have CUDA support.")
    MODULE_CACHE["torch"] = torch
    logger.info("PyTorch %s CUDA support is available.", "with" if cuda else "without")
    return True


@lru_cache(maxsize=1)
def jax_is_available(ensure_available: bool = False, ensure_cuda: bool = True) -> bool:
    """True where ``jax`` imports; ``ensure_cuda`` and ``ensure_available`` as :func:`torch_is_available`'s."""
    try:
        import jax  # type: ignore[import-not-found]
    except ImportError as e:
        logger.info("JAX is not available")
        if ensure_available:
            raise RuntimeError("Failed to import JAX") from e
        return False
    try:
        cuda = bool(jax.devices("gpu"))
    except RuntimeError:  # jax raises where it has no backend of that kind
        cuda = False
    if ensure_cuda and not cuda:
        raise RuntimeError("JAX is available but does not have CUDA support.")
    MODULE_CACHE["jax"] = jax
    logger.info("JAX %s CUDA support is available.", "with" if cuda else "without")
    return True


@lru_cache(maxsize=1)
def cupy_is_available(ensure_available: bool = False) -> bool:
    """True where ``cupy`` imports; ``ensure_available``: no CuPy raises ``RuntimeError``."""
    try:
        import cupy  # type: ignore[import-not-found]
    except ImportError as e:
        logger.info("CuPy is not available.")
        if ensure_available:
            raise RuntimeError("Failed to import CuPy") from e
        return False
    MODULE_CACHE["cupy"] = cupy
    logger.info("CuPy is available.")
    return True


def _torch_group() -> Any:
    """``torch.distributed`` where torch is here and a process group is initialised, else None."""
    if not torch_is_available(ensure_cuda=False):
        return None
    dist = MODULE_CACHE["torch"].distributed
    return dist if dist.is_available() and dist.is_initialized() else None


def get_rank() -> int:
    """This process's rank: ``torch.distributed``'s inside a process group, JAX's process index where
    torch is absent and JAX present, else 0."""
    dist = _torch_group()
    if dist is not None:
        return int(dist.get_rank())
    if not torch_is_available(ensure_cuda=False) and jax_is_available(ensure_cuda=False):
        return int(MODULE_CACHE["jax"].process_index())
    return 0


def get_world_size() -> int:
    """How many processes the job has: ``torch.distributed``'s world size inside a process group, JAX's
    process count where torch is absent and JAX present, else 1."""
    dist = _torch_group()
    if dist is not None:
        return int(dist.get_world_size())
    if not torch_is_available(ensure_cuda=False) and jax_is_available(ensure_cuda=False):
        return int(MODULE_CACHE["jax"].process_count())
    return 1

"""``torch.distributed`` ranks as one zeus job: the ``torch`` process group (``zeus_register_process_groups``).

A launcher (``torchrun``, SLURM's ``srun`` with the torch variables, a
``torch.multiprocessing`` script) starts the ranks; the user may initialise the
default process group (any backend) or leave it to zeus, which then initialises
it from the launcher's environment (``init_method="env://"``: ``MASTER_ADDR``,
``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``; ``cpu:gloo,cuda:nccl`` where CUDA is
there, else ``gloo``), so ranks on several machines meet through the launcher's
rendezvous. zeus's own messages (decisions, measurements) travel on a gloo group
of its own over every rank, whatever backend the training uses.

Every rank must join at the same point of its program (creating zeus's group is
a collective): the first zeus object that needs the ranks (``ZeusMonitor``
does not; ``PowerLimitOptimizer``, ``BatchSizeOptimizer``, ``zeus run``,
``run_job`` do) joins, later ones reuse the group.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

#: How long a rank waits for the others at one of zeus's collectives (``ZEUS_DIST_TIMEOUT_S``).
DEFAULT_TIMEOUT_S = 300.0


def timeout_s() -> float:
    raw = os.environ.get("ZEUS_DIST_TIMEOUT_S", "")
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        raise ValueError(f"ZEUS_DIST_TIMEOUT_S={raw!r} is not a number of seconds") from None
    if not value > 0:
        raise ValueError(f"ZEUS_DIST_TIMEOUT_S must be positive, got {raw!r}")
    return value


class TorchProcessGroup:
    """The ranks of the default ``torch.distributed`` group, as a :class:`zeus_core.engine.ranks.ProcessGroup`.

    ``gloo`` is zeus's own gloo group over every rank (CPU tensors and pickled
    objects); ``created`` says whether zeus initialised the default group.
    """

    def __init__(self, created: bool) -> None:
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.local_rank = int(os.environ.get("LOCAL_RANK", self.rank))
        self.created = created
        self.world = dist.group.WORLD
        self.timeout_s = timeout_s()
        self.gloo = dist.new_group(backend="gloo", timeout=timedelta(seconds=self.timeout_s))

    def broadcast(self, obj: Any) -> Any:
        box = [obj]
        try:
            dist.broadcast_object_list(box, src=0, group=self.gloo)
        except Exception as e:  # noqa: BLE001 - a rank went away, or never came
            raise self._lost(e) from e
        return box[0]

    def gather(self, obj: Any) -> list[Any] | None:
        out = [None] * self.world_size if self.rank == 0 else None
        try:
            dist.gather_object(obj, out, dst=0, group=self.gloo)
        except Exception as e:  # noqa: BLE001
            raise self._lost(e) from e
        return out

    def _lost(self, e: Exception) -> RuntimeError:
        return RuntimeError(
            f"rank {self.rank} of {self.world_size} lost contact with the other ranks of the job "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}): a rank failed, was killed or "
            f"stopped calling zeus (the launcher names it), or did not answer within {self.timeout_s:g} s "
            "(ZEUS_DIST_TIMEOUT_S); this rank's devices are put back as it stops"
        )

    def __repr__(self) -> str:
        return f"TorchProcessGroup(rank={self.rank}, world_size={self.world_size}, local_rank={self.local_rank})"


_joined: TorchProcessGroup | None = None


def join() -> TorchProcessGroup | None:
    """This process's rank in the default group (initialised from the launcher's environment when
    nobody has yet); None when there is one process only."""
    global _joined
    if dist.is_initialized():
        if _joined is not None and _joined.world is dist.group.WORLD:
            return _joined
        created = False
    else:
        if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
            return None
        missing = [v for v in ("RANK", "MASTER_ADDR", "MASTER_PORT") if not os.environ.get(v)]
        if missing:
            raise RuntimeError(
                f"WORLD_SIZE={os.environ['WORLD_SIZE']} but {', '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} not set: start the ranks with torchrun (or srun with the "
                "torch.distributed variables), or initialise the process group before creating zeus objects"
            )
        backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend, init_method="env://", timeout=timedelta(seconds=timeout_s()))
        created = True
    if dist.get_world_size() == 1:
        return None
    _joined = TorchProcessGroup(created)
    return _joined

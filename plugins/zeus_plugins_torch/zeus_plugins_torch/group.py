"""``torch.distributed`` ranks as one zeus job: the ``torch`` process group (``zeus_register_process_groups``).

A launcher (``torchrun``, SLURM's ``srun`` with the torch variables, a
``torch.multiprocessing`` script) starts the ranks; the user may initialise the
default process group (any backend) or leave it to zeus, which then initialises
it from the launcher's environment (``init_method="env://"``: ``MASTER_ADDR``,
``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``; ``cpu:gloo,cuda:nccl`` where CUDA is
there, else ``gloo``), so ranks on several machines meet through the launcher's
rendezvous. zeus's own messages (decisions, measurements) travel on a gloo group
of its own over every rank, whatever backend the training uses; the ranks the
torch workload spawns itself (``job.processes``) talk over the same kind of group.

Every rank must join at the same point of its program (creating zeus's group is
a collective): the first zeus object that needs the ranks (``ZeusMonitor``
does not; ``PowerLimitOptimizer``, ``BatchSizeOptimizer``, ``zeus run``,
``run_job`` do) joins, later ones reuse the group.
"""

from __future__ import annotations

import os
import pickle
import struct
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from zeus_core.engine import LeaderFailed, ProtocolError
from zeus_core.errors import RunFailed

#: How long a rank waits for the others at one of zeus's collectives (``ZEUS_DIST_TIMEOUT_S``).
DEFAULT_TIMEOUT_S = 300.0

#: Bytes of the tensor one message travels in: rank 0's messages (``("limit", 250.0)``,
#: ``("epoch", 3, True)``) and the ranks' measurements fit, pickled, behind an 8-byte length.
SLOT_BYTES = 512
_HEAD = struct.Struct("<Q")
_ROOM = SLOT_BYTES - _HEAD.size


def timeout_s() -> float:
    raw = os.environ.get("ZEUS_DIST_TIMEOUT_S", "")
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        raise ValueError(f"ZEUS_DIST_TIMEOUT_S={raw!r} is not a number of seconds") from None
    if not value > 0:
        raise ValueError(f"ZEUS_DIST_TIMEOUT_S must be positive, got {raw!r}")
    return value


class LostContact(RunFailed):
    """A collective of zeus's group failed: another rank went away (failed, killed, or stopped calling zeus)."""


class _Slot:
    """One message's tensor and a writable view of its bytes: a length, then the pickle (its head)."""

    def __init__(self) -> None:
        self.tensor = torch.zeros(SLOT_BYTES, dtype=torch.uint8)
        # ndarray has the buffer protocol; numpy's stubs declare __buffer__ for Python 3.12 and later only
        self.view = memoryview(self.tensor.numpy())  # type: ignore[arg-type]

    def pack(self, data: bytes) -> None:
        _HEAD.pack_into(self.view, 0, len(data))
        head = data[:_ROOM]
        self.view[_HEAD.size : _HEAD.size + len(head)] = head

    def length(self) -> int:
        return _HEAD.unpack_from(self.view, 0)[0]

    def head(self, n: int) -> bytes:
        return bytes(self.view[_HEAD.size : _HEAD.size + min(n, _ROOM)])


def _encode(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


class TorchProcessGroup:
    """The ranks of the default ``torch.distributed`` group, as a :class:`zeus_core.backends.ProcessGroup`.

    Messages travel on ``gloo``, zeus's own gloo group over every rank, pickled into
    one preallocated tensor of :data:`SLOT_BYTES` each: a message costs one collective,
    as a tensor of numbers would, where ``broadcast_object_list`` and ``gather_object``
    take two (the size first) and build a tensor for every object; in an epoch the
    power policy profiles, one message is paid per training step
    (``benchmarks/rank_messages.py`` times both). A larger object follows its head
    in a second message. Ranks unpickle what rank 0 (or, for a gather, every rank)
    sent: the ranks of one job trust each other, as torch's object collectives do.
    """

    def __init__(self, timeout: float | None = None) -> None:
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.local_rank = int(os.environ.get("LOCAL_RANK", self.rank))
        self.world = dist.group.WORLD
        self.timeout_s = timeout_s() if timeout is None else float(timeout)
        self.gloo = dist.new_group(backend="gloo", timeout=timedelta(seconds=self.timeout_s))
        self._out = _Slot()
        self._slots = [_Slot() for _ in range(self.world_size)] if self.rank == 0 else []

    def broadcast(self, obj: Any) -> Any:
        try:
            slot = self._out
            data = b""
            if self.rank == 0:
                data = _encode(obj)
                slot.pack(data)
            dist.broadcast(slot.tensor, group_src=0, group=self.gloo)
            n = slot.length()
            if n > _ROOM:
                rest = (
                    torch.frombuffer(bytearray(data[_ROOM:]), dtype=torch.uint8)
                    if self.rank == 0
                    else torch.empty(n - _ROOM, dtype=torch.uint8)
                )
                dist.broadcast(rest, group_src=0, group=self.gloo)
                if self.rank != 0:
                    data = slot.head(n) + rest.numpy().tobytes()
            elif self.rank != 0:
                data = slot.head(n)
        except Exception as e:  # noqa: BLE001 - a rank went away, or never came
            raise self._lost(e) from e
        return obj if self.rank == 0 else pickle.loads(data)

    def gather(self, obj: Any) -> list[Any] | None:
        try:
            data = _encode(obj)
            self._out.pack(data)
            if self.rank != 0:
                dist.gather(self._out.tensor, None, group_dst=0, group=self.gloo)
                if len(data) > _ROOM:
                    dist.send(torch.frombuffer(bytearray(data[_ROOM:]), dtype=torch.uint8), group_dst=0, group=self.gloo)
                return None
            dist.gather(self._out.tensor, [s.tensor for s in self._slots], group_dst=0, group=self.gloo)
            out: list[Any] = [obj]
            for r, slot in enumerate(self._slots[1:], start=1):
                n = slot.length()
                got = slot.head(n)
                if n > _ROOM:
                    rest = torch.empty(n - _ROOM, dtype=torch.uint8)
                    dist.recv(rest, group_src=r, group=self.gloo)
                    got += rest.numpy().tobytes()
                out.append(pickle.loads(got))
        except Exception as e:  # noqa: BLE001
            raise self._lost(e) from e
        return out

    def _lost(self, e: Exception) -> LostContact:
        return LostContact(
            f"rank {self.rank} of {self.world_size} lost contact with the other ranks of the job "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}): a rank failed, was killed or "
            f"stopped calling zeus (the launcher names it), or did not answer within {self.timeout_s:g} s "
            "(ZEUS_DIST_TIMEOUT_S); this rank's devices are put back as it stops"
        )

    def __repr__(self) -> str:
        return f"TorchProcessGroup(rank={self.rank}, world_size={self.world_size}, local_rank={self.local_rank})"


def is_secondary(e: BaseException) -> bool:
    """Whether ``e`` only follows from another rank's failure (not the first failure): zeus's group lost
    contact, torch.distributed's own collectives (DDP's) failed for it, or rank 0 said it failed."""
    if isinstance(e, (LostContact, LeaderFailed)):
        return True
    if isinstance(e, ProtocolError):
        return False
    dist_error = getattr(dist, "DistError", None)
    if dist_error is not None and isinstance(e, dist_error):
        return True
    text = str(e).lower()
    return any(s in text for s in ("connection closed", "connection reset", "broken pipe", "gloo", "timed out"))


_joined: TorchProcessGroup | None = None


def join() -> TorchProcessGroup | None:
    """This process's rank in the default group (initialised from the launcher's environment when
    nobody has yet); None when there is one process only."""
    global _joined
    if dist.is_initialized():
        if _joined is not None and _joined.world is dist.group.WORLD:
            return _joined
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
    if dist.get_world_size() == 1:
        return None
    _joined = TorchProcessGroup()
    return _joined

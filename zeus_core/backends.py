"""The contract of the backends a plugin may provide: where a job's history is kept (a
:class:`JobStore`, its transactions, what it holds and its errors) and the ranks of a job that
runs as several processes (a :class:`ProcessGroup`).

A store plugin's ``zeus_open_store`` returns a :class:`JobStore`; a launcher plugin's
``zeus_process_group`` returns a :class:`ProcessGroup`. Every store keeps the promises the SQLite
one does: opening writes nothing and refuses a store it cannot trust; a transaction commits all
or nothing; a store records the identity of the job it learned. This module imports nothing of
the engine, which implements and uses these.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar, runtime_checkable

from zeus_core.errors import EXIT_FAILED, BadInput

if TYPE_CHECKING:  # annotations only
    from zeus_core.results import TryRecord

# --------------------------------------------------------------------------- stores


class StoreError(BadInput):
    """The store cannot be used (not a zeus store, newer schema, damaged, unwritable, a folder).

    The message names the file and the fix; a refused file is left unchanged.
    """


class StoreUnavailable(StoreError):
    """The store's server cannot be reached now (down, restarting, network): a failure
    while running (exit 1), not bad input. What was committed before is kept, and
    the job continues from it once the server is back.
    """

    exit_code = EXIT_FAILED


class StoreWriteFailed(StoreError):
    """The store's file system refused a write: full, read-only, or an I/O error (exit 1). The store
    is not damaged: nothing of the unfinished transaction was stored, and what was committed
    before is kept; the job continues from it once the cause is fixed. The message names the
    file, what happened and the fix (never "damaged", never ``--fresh``). ``kind``: ``full``,
    ``read-only`` or ``io``; ``detail``: what the file system or server said.
    """

    exit_code = EXIT_FAILED

    def __init__(self, message: str, kind: str = "io", detail: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.detail = detail


class TransactionConflict(StoreError):
    """A transaction that could not commit because what it read is out of date: another runner of
    the job committed meanwhile, or the transaction lost its hold on the state (a service that
    restarted, a lease that ran out while the store could not be reached). Nothing of it was
    written; run it again on what is committed now (:func:`transact` does).
    """

    exit_code = EXIT_FAILED


T = TypeVar("T")


def transact(store: JobStore, body: Callable[[StoreTransaction], T], attempts: int = 100) -> T:
    """``body(tx)`` in one transaction of ``store``, run again from the start on what is committed
    now for as long as it meets a :class:`TransactionConflict` (``attempts`` at most). A part
    that reads and writes its own state (a random generator's) uses this, so that runners
    sharing a store through a service redo their decision instead of failing::

        def draw(tx):
            rng.bit_generator.state = tx.get("workload:mine:rng") or rng.bit_generator.state
            pick = int(rng.integers(10))
            tx.set("workload:mine:rng", rng.bit_generator.state)
            return pick

        pick = transact(store, draw)
    """
    for attempt in range(1, attempts + 1):
        try:
            with store.transaction() as tx:
                return body(tx)
        except TransactionConflict:
            if attempt == attempts:
                raise
            time.sleep(min(0.01 * attempt, 0.5) * random.uniform(0.5, 1.5))
    raise AssertionError("unreachable")


class StoreInfo(NamedTuple):
    """What an existing store is, read without changing it."""

    version: int  # 0: no store yet
    identity: dict[str, Any] | None
    tries: int


class StoreTransaction(Protocol):
    """Reads and writes that commit together or not at all. ``tries_of(recurrence)``: the
    ``(try_index, reached)`` of the tries stored for it, so that a try is stored once."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def set(self, key: str, value: Any) -> None: ...

    def identity(self) -> dict[str, Any] | None: ...

    def set_identity(self, identity: dict[str, Any]) -> None: ...

    def add_try(self, record: TryRecord) -> int: ...

    def tries_of(self, recurrence: int) -> list[tuple[int, bool]]: ...

    def clear(self) -> None: ...


@runtime_checkable
class JobStore(Protocol):
    """A job's store, whatever holds it.

    ``location`` names it in messages (credentials masked); ``info`` is what it
    held when opened (:class:`StoreInfo`). ``transaction()``
    is one atomic unit, safe against concurrent runners of the job (each
    transaction sees the latest committed state, as ``BEGIN IMMEDIATE`` does).
    Reads outside a transaction are consistent snapshots; before the first
    write they return nothing.

    Example::

        with store.transaction() as tx:
            state = tx.get("runner", {})
            tx.set("runner", {**state, "next_recurrence": 2})
    """

    location: str
    info: StoreInfo

    def transaction(self) -> AbstractContextManager[StoreTransaction]: ...

    def get(self, key: str, default: Any = None) -> Any: ...

    def identity(self) -> dict[str, Any] | None: ...

    def state_items(self) -> dict[str, Any]: ...

    def tries(self) -> list[TryRecord]: ...

    def close(self) -> None: ...


# --------------------------------------------------------------------------- ranks


@runtime_checkable
class ProcessGroup(Protocol):
    """The ranks of one job as this process sees them: its ``rank`` (0 decides), the
    ``world_size``, its ``local_rank`` on its machine, and two collectives every rank
    calls at the same point of its program:

    * ``broadcast(obj)``: rank 0's ``obj`` (any picklable object), returned on every rank;
    * ``gather(obj)``: on rank 0, every rank's ``obj`` by rank; None elsewhere.

    A rank that left (killed, or raised and exited) makes the others' next
    collective raise instead of waiting forever (the group's timeout).

    Example::

        class Solo:
            rank, world_size, local_rank = 0, 1, 0

            def broadcast(self, obj):
                return obj

            def gather(self, obj):
                return [obj]
    """

    rank: int
    world_size: int
    local_rank: int

    def broadcast(self, obj: Any) -> Any: ...

    def gather(self, obj: Any) -> list[Any] | None: ...


__all__ = [
    "StoreError",
    "StoreUnavailable",
    "StoreWriteFailed",
    "TransactionConflict",
    "transact",
    "StoreInfo",
    "StoreTransaction",
    "JobStore",
    "ProcessGroup",
]

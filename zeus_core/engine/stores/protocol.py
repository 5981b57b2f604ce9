"""What a job store is, whatever holds it: :class:`JobStore`, its transactions, and its errors.

Every backend keeps the same promises as the SQLite one (:mod:`zeus_core.engine.stores.sqlite`):
opening writes nothing and refuses a store it cannot trust; a transaction commits all or
nothing; a store records the identity of the job it learned.
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


class StoreError(BadInput):
    """The store cannot be used (not a zeus store, newer schema, damaged, unwritable, a folder).

    The message names the file and the fix; a refused file is left unchanged.
    """


class StoreUnavailable(StoreError):
    exit_code = EXIT_FAILED

    """The store's server cannot be reached now (down, restarting, network): a failure
    while running (exit 1), not bad input. What was committed before is kept, and
    the job continues from it once the server is back.
    """


class StoreWriteFailed(StoreError):
    exit_code = EXIT_FAILED

    """The store's file system refused a write: full, read-only, or an I/O error (exit 1). The store
    is not damaged: nothing of the unfinished transaction was stored, and what was committed
    before is kept; the job continues from it once the cause is fixed. The message names the
    file, what happened and the fix (never "damaged", never ``--fresh``). ``kind``: ``full``,
    ``read-only`` or ``io``; ``detail``: what the file system or server said.
    """

    def __init__(self, message: str, kind: str = "io", detail: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.detail = detail


class TransactionConflict(StoreError):
    exit_code = EXIT_FAILED

    """A transaction that could not commit because what it read is out of date: another runner of
    the job committed meanwhile, or the transaction lost its hold on the state (a service that
    restarted, a lease that ran out while the store could not be reached). Nothing of it was
    written; run it again on what is committed now (:func:`transact` does).
    """


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
    held when opened (:class:`zeus_core.engine.stores.protocol.StoreInfo`). ``transaction()``
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

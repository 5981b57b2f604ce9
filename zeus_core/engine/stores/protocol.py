"""What a job store is, whatever holds it: :class:`JobStore`, its transactions, and its errors.

Every backend keeps the same promises as the SQLite one (:mod:`zeus_core.engine.stores.sqlite`):
opening writes nothing and refuses a store it cannot trust; a transaction commits all or
nothing; a store records the identity of the job it learned.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

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


class StoreInfo(NamedTuple):
    """What an existing store is, read without changing it."""

    version: int  # 0: no store yet
    identity: dict[str, Any] | None
    tries: int


class StoreTransaction(Protocol):
    """Reads and writes that commit together or not at all."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def set(self, key: str, value: Any) -> None: ...

    def identity(self) -> dict[str, Any] | None: ...

    def set_identity(self, identity: dict[str, Any]) -> None: ...

    def add_try(self, record: TryRecord) -> int: ...

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

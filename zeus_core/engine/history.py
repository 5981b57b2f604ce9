"""The bookkeeping of a recurring job over its store: recurrences, trials, and what policies learn.

``zeus run`` (the runner), a user's own loop (:class:`zeus_core.BatchSizeOptimizer`,
:class:`zeus_core.PowerLimitOptimizer`) and the optimizer service all keep a
job's history the same way, through :class:`History`, so a job's history is one
history however it is run:

* :meth:`History.begin_recurrence` takes the next recurrence number (and, in the
  job's first write, records its identity, or checks it against the one a
  concurrent runner recorded);
* :meth:`History.next_try` loads the policies' latest committed state, lets the
  batch-size policy choose, and computes the try's cost bound (``beta_knob x``
  the cheapest recurrence, or the policy's own :class:`~zeus_core.TryCostBound`);
* :meth:`History.record` replays the batch-size policy's ``observe`` on the latest
  committed state, applies what the power policy learned during the try
  (:mod:`zeus_core.engine.statemerge`), stores the result and, when the try reached the
  target, the recurrence's cost: all in one transaction.

Each step may run inside a transaction the caller holds (``tx=``), so that a
service can commit its own records (which request it answered) with the step.

:class:`HistoryService` is what the runner and the script-level optimizers ask
for: :class:`History` here, or a remote service's client where the job's store
is a service (:class:`~zeus_core.engine.remote.ServesHistory`, ``job.store = "http://..."`` with
``zeus serve``). Power policies always run where the device is: a remote client
keeps its power policy and sends what it learned with each result, merged on
the client (:func:`merge_power_state`) and committed only onto the state it
was merged with (:meth:`History.record`'s ``power_update``, else
:class:`StalePowerState`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from zeus_core.contexts import PolicyContext
from zeus_core.engine import statemerge
from zeus_core.errors import RunFailed
from zeus_core.identity import merged, refuse_another_job
from zeus_core.parts import TryCostBound

if TYPE_CHECKING:  # annotations only
    from zeus_core.engine.stores.protocol import JobStore, StoreTransaction
    from zeus_core.job import JobOptions
    from zeus_core.parts import BatchSizePolicy, PowerPolicy
    from zeus_core.results import TryRecord

#: The runner's own state: the next recurrence number and the cheapest finished recurrence.
RUNNER_KEY = "runner"
_DEFAULT_RUNNER_STATE: dict[str, Any] = {"next_recurrence": 1, "min_cost": None}
#: Where the policies' states live in the store.
BATCH_SIZE_KEY = "policy:batch_size"
POWER_KEY = "policy:power"


def state_digest(state: Any) -> str:
    """A short fingerprint of a JSON state (equal states, equal digests): what a remote
    client says it merged its power policy's change onto."""
    text = json.dumps(state, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def merge_power_state(base: Any, mine: Any, theirs: Any) -> Any:
    """The power state to commit: the change ``base -> mine`` the policy made during a try,
    applied to ``theirs`` (the latest committed state) key by key (:mod:`zeus_core.engine.statemerge`)."""
    if theirs is None:
        return mine
    return statemerge.merge(base, mine, theirs)


def load_policy_states(store: JobStore, batch_size_policy: Any = None, power_policy: Any = None) -> None:
    """Give the policies the latest states committed in ``store`` (what other runners, or a
    service running the batch-size policy, learned)."""
    for part, key in ((batch_size_policy, BATCH_SIZE_KEY), (power_policy, POWER_KEY)):
        if part is not None:
            state = store.get(key)
            if state is not None:
                part.set_state(state)


class StalePowerState(RunFailed):
    """The committed power state is not the one a remote client merged its change onto
    (another runner committed meanwhile): merge again onto :attr:`current` and resend."""

    def __init__(self, current: Any) -> None:
        super().__init__("the power policy's state changed since it was merged; merge onto the current state and retry")
        self.current = current
        self.digest = state_digest(current)


@attrs.define
class TryPlan:
    """One try, as chosen: its batch size and the cost after which it stops."""

    recurrence: int
    try_index: int
    batch_size: int
    cost_bound: float
    context: PolicyContext
    #: The power policy's state when the try began (what its change is measured from); with no
    #: power policy in this process, the committed power state (for a remote client that has one).
    power_base: Any = None


@runtime_checkable
class JobHistory(Protocol):
    """Where a recurring job's tries come from and go to, as :class:`zeus_core.BatchSizeOptimizer`
    needs it: :class:`History` over the job's store here, or any object with these three
    methods (``history=``); :class:`HistoryService` adds what the runner also needs.

    Example::

        class RemoteHistory:
            def begin_recurrence(self) -> int:
                return self.http.post("/recurrences").json()["recurrence"]

            def next_try(self, recurrence, try_index) -> TryPlan:
                return TryPlan(**self.http.post("/trials", json=[recurrence, try_index]).json())

            def record(self, trial, record, recurrence_cost=None) -> None:
                self.http.post("/results", json=record.to_json())
    """

    def begin_recurrence(self) -> int: ...

    def next_try(self, recurrence: int, try_index: int) -> TryPlan: ...

    def record(self, trial: TryPlan, record: TryRecord, recurrence_cost: float | None = None) -> None: ...


@runtime_checkable
class HistoryService(JobHistory, Protocol):
    """A recurring job's trial bookkeeping, wherever it runs: :class:`History` over the
    job's store in this process, or a service's client (:class:`ServesHistory`): a
    :class:`JobHistory` that also reads the whole history and closes.

    The runner's loop, and a script's.

    Example::

        rec = trials.begin_recurrence()
        for try_index in range(1, job.max_tries + 1):
            trial = trials.next_try(rec, try_index)     # batch size, cost bound
            record = train(trial)                         # a TryRecord
            trials.record(trial, record, recurrence_cost=cost if record.reached else None)
            if record.reached:
                break
        trials.history()                                  # every try of the job, all runners
    """

    def history(self) -> list[TryRecord]: ...

    def close(self) -> None: ...


class History:
    """A recurring job's history in its store, and the policies that learn from it
    (the local :class:`HistoryService`)."""

    def __init__(
        self,
        job: JobOptions,
        store: JobStore,
        batch_size_policy: BatchSizePolicy | None,
        *,
        identity: dict[str, Any],
        max_power_w: float,
        batch_sizes: list[int] | None = None,
        default_batch_size: int | None = None,
        power_policy: PowerPolicy | None = None,
        fresh: bool = False,
    ) -> None:
        self.job = job
        self.store = store
        self.policy = batch_size_policy
        self.power = power_policy
        self.identity = identity
        self.max_power_w = float(max_power_w)
        self.batch_sizes = batch_sizes
        self.default_batch_size = default_batch_size
        #: Forget what the store learned, in the job's first write (a start that fails
        #: before it leaves the store as it was).
        self.fresh = fresh

    # -- identity --

    def _claim(self, tx: StoreTransaction) -> None:
        if self.fresh:
            tx.clear()
            self.fresh = False
        stored = tx.identity()
        if stored is None:
            tx.set_identity(self.identity)
        else:
            refuse_another_job(self.store.location, stored, self.identity)
            learned = merged(stored, self.identity)
            if learned != stored:  # another way in (a script, zeus run) declared more of the job
                tx.set_identity(learned)

    # -- policy state --

    def _load(self, tx: StoreTransaction, sections: tuple[str, ...]) -> None:
        for section in sections:
            part = self.policy if section == "batch_size" else self.power
            if part is not None:
                state = tx.get(BATCH_SIZE_KEY if section == "batch_size" else POWER_KEY)
                if state is not None:
                    part.set_state(state)

    def _save_batch_size_state(self, tx: StoreTransaction) -> None:
        if self.policy is not None:
            state = self.policy.get_state()
            if state is not None:
                tx.set(BATCH_SIZE_KEY, state)

    def _merge_power_state(self, tx: StoreTransaction, base: Any) -> None:
        """Apply what the power policy learned in this try to the latest committed state
        (another runner of the job may have committed its own choices meanwhile)."""
        power = self.power
        if power is None:
            return
        mine = power.get_state()
        if mine is None:
            return
        merged = merge_power_state(base, mine, tx.get(POWER_KEY))
        if merged is not mine:
            power.set_state(merged)
        tx.set(POWER_KEY, merged)

    @contextmanager
    def _transaction(self, tx: StoreTransaction | None) -> Iterator[StoreTransaction]:
        if tx is not None:  # the caller's: it commits (or not) with whatever else it holds
            yield tx
        else:
            with self.store.transaction() as own:
                yield own

    # -- a power policy on its own (zeus_core.PowerLimitOptimizer) --

    def load_power(self) -> Any:
        """Claim the store for this job and load the power policy's latest committed state;
        returns the state its later changes are measured from (for :meth:`save_power`)."""
        if self.power is None:
            raise RuntimeError("this job has no power policy")
        with self.store.transaction() as tx:
            self._claim(tx)
            self._load(tx, ("power",))
            return copy.deepcopy(self.power.get_state())

    def save_power(self, base: Any) -> Any:
        """Apply what the power policy learned since ``base`` to the latest committed state
        (no lost update, as :meth:`record` does); returns the new base."""
        with self.store.transaction() as tx:
            self._merge_power_state(tx, base)
        return copy.deepcopy(self.power.get_state()) if self.power is not None else None

    # -- the job's steps --

    def begin_recurrence(self, *, tx: StoreTransaction | None = None) -> int:
        """Take the next recurrence number (recording the job's identity in its first write)."""
        with self._transaction(tx) as tx:
            self._claim(tx)
            st = dict(tx.get(RUNNER_KEY) or _DEFAULT_RUNNER_STATE)
            rec = int(st["next_recurrence"])
            st["next_recurrence"] = rec + 1
            tx.set(RUNNER_KEY, st)
        return rec

    def next_recurrence(self, *, tx: StoreTransaction | None = None) -> int:
        """The number the next :meth:`begin_recurrence` takes (1 for a new job)."""
        if tx is None:
            st = self.store.get(RUNNER_KEY)
        else:
            st = tx.get(RUNNER_KEY)
        return int((st or _DEFAULT_RUNNER_STATE)["next_recurrence"])

    def policy_context(self, recurrence: int, try_index: int, min_cost: float) -> PolicyContext:
        return PolicyContext(
            job=self.job,
            recurrence=recurrence,
            try_index=try_index,
            min_cost=min_cost,
            batch_sizes=None if self.batch_sizes is None else list(self.batch_sizes),
            default_batch_size=self.default_batch_size,
            max_power_w=self.max_power_w,
        )

    def next_try(self, recurrence: int, try_index: int, *, tx: StoreTransaction | None = None) -> TryPlan:
        """The batch-size policy chooses on the latest committed state; the try's cost bound."""
        if self.policy is None:
            raise RuntimeError("this job has no batch-size policy to choose a trial")
        policy = self.policy
        with self._transaction(tx) as tx:
            st = tx.get(RUNNER_KEY) or _DEFAULT_RUNNER_STATE
            min_cost = math.inf if st.get("min_cost") is None else float(st["min_cost"])
            self._load(tx, ("batch_size", "power"))
            ctx = self.policy_context(recurrence, try_index, min_cost)
            batch_size = int(policy.choose(ctx))
            # A policy may stop its own exploratory tries sooner than beta x min cost.
            own_bound = policy.try_cost_bound(ctx, batch_size) if isinstance(policy, TryCostBound) else None
            self._save_batch_size_state(tx)
            # What the power policy knew when the try began (loaded, or its initial state):
            # its change during the try is what gets applied to the latest committed state.
            # Without a power policy here, the committed state, for a client that has one.
            power_base = copy.deepcopy(self.power.get_state()) if self.power is not None else tx.get(POWER_KEY)
        cost_bound = self.job.beta_knob * min_cost
        if own_bound is not None:
            cost_bound = min(cost_bound, float(own_bound))
        return TryPlan(recurrence, try_index, batch_size, cost_bound, ctx, power_base)

    def record(
        self,
        trial: TryPlan,
        record: TryRecord,
        recurrence_cost: float | None = None,
        *,
        tx: StoreTransaction | None = None,
        power_update: tuple[Any, str] | None = None,
    ) -> None:
        """Store a try's result with what the policies learned from it, in one transaction.

        ``recurrence_cost`` (the cost of all tries of the recurrence, when this one
        reached the target) updates the cheapest recurrence, the early-stop reference.
        ``power_update`` is ``(state, digest)`` from a client that runs the power policy
        (this object then has none): ``state`` is committed only if the committed power
        state still has ``digest`` (:func:`state_digest`), the one the client merged its
        change onto; otherwise nothing is stored and :class:`StalePowerState` says
        what to merge onto.
        """
        with self._transaction(tx) as tx:
            if power_update is not None:  # first: a stale state changes nothing, not even in memory
                state, expected = power_update
                current = tx.get(POWER_KEY)
                if state_digest(current) != expected:
                    raise StalePowerState(current)
                tx.set(POWER_KEY, state)
            # Observe on the latest committed state, so concurrent runners of one
            # job each add their observation instead of overwriting the other's.
            if self.policy is not None:
                self._load(tx, ("batch_size",))
                self.policy.observe(trial.context, record)
                self._save_batch_size_state(tx)
            self._merge_power_state(tx, trial.power_base)
            tx.add_try(record)
            if record.reached and recurrence_cost is not None:
                st = dict(tx.get(RUNNER_KEY) or _DEFAULT_RUNNER_STATE)
                prev = st.get("min_cost")
                st["min_cost"] = recurrence_cost if prev is None else min(prev, recurrence_cost)
                tx.set(RUNNER_KEY, st)

    def history(self) -> list[TryRecord]:
        """Every try of the job so far, of every runner, in order."""
        return self.store.tries()

    def close(self) -> None:
        """Nothing to give back: the store is the caller's."""

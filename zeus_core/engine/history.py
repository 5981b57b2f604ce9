"""The bookkeeping of a recurring job over its store: recurrences, tries, and what policies learn.

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

Every recurrence number taken ends accounted for: with a try that reached the target, or
*abandoned* with the reason (:meth:`History.abandon`: the runner was interrupted or failed,
no try reached the target in ``max_tries``). Until then it is *open*, with the process that
began it (:mod:`zeus_core.engine.owner`), so that a runner that could not say it gave up (a
SIGKILL, a store that could not be reached) is found gone by the next
:meth:`History.begin_recurrence` on its host and its recurrence recorded as abandoned then.
A try that reaches the target later closes its recurrence whatever was recorded
(:func:`ledger` reads the account).

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
import logging
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from zeus_core.backends import StoreError
from zeus_core.contexts import PolicyContext
from zeus_core.engine import statemerge
from zeus_core.engine.owner import describe, history_mark, is_gone, this_process
from zeus_core.engine.statekeys import ABANDONED_KEY, BATCH_SIZE_KEY, HISTORY_KEY, OPEN_KEY, POWER_KEY, RUNNER_KEY
from zeus_core.errors import BadInput, RunFailed, ZeusError
from zeus_core.identity import merged, refuse_another_job
from zeus_core.parts import TryCostBound

if TYPE_CHECKING:  # annotations only
    from zeus_core.backends import JobStore, StoreTransaction
    from zeus_core.job import JobOptions
    from zeus_core.parts import BatchSizePolicy, PowerPolicy
    from zeus_core.results import TryRecord

_DEFAULT_RUNNER_STATE: dict[str, Any] = {"next_recurrence": 1, "min_cost": None}
#: The longest reason kept for an abandoned recurrence.
MAX_REASON = 500
#: How often ``--fresh --wait`` looks again whether the job's other runners ended their recurrences.
WAIT_POLL_S = 0.5

log = logging.getLogger("zeus.engine")


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
                set_policy_state(part, state, key, store.location)


def set_policy_state(part: Any, state: Any, key: str, location: str) -> None:
    """``part.set_state(state)``; a state the policy cannot read is a store that cannot be trusted
    (:class:`~zeus_core.backends.StoreError`, exit 2), not a traceback."""
    try:
        part.set_state(state)
    except ZeusError:
        raise
    except Exception as e:
        raise StoreError(
            f"{location}: its state {key!r} is not one the job's policy reads ({type(e).__name__}: {str(e)[:200]}); "
            "it was written by another setup or damaged: start over with `zeus run --fresh`, or give the job another "
            "job.store"
        ) from e


class TryRecorded(BadInput):
    """The try already has its result (or its recurrence reached the target with an earlier one):
    nothing was stored. The service answers a result sent again as stored once."""

    def __init__(self, recurrence: int, try_index: int, recorded: list[tuple[int, bool]]) -> None:
        ended = next((i for i, reached in recorded if reached), None)
        why = (
            f"try {try_index} of recurrence {recurrence} has its result already"
            if ended is None or ended == try_index
            else f"recurrence {recurrence} reached the target in try {ended} already"
        )
        super().__init__(f"{why}; nothing was stored (each try is recorded once)")


def _history_id(tx: StoreTransaction) -> str | None:
    """The id of the history the store holds now (None: one never started over)."""
    mark = tx.get(HISTORY_KEY)
    return mark.get("id") if isinstance(mark, dict) else None


class HistoryCleared(RunFailed):
    """The job's history was started over (``zeus run --fresh`` of another process) after this runner
    joined it: the runner stops (exit 1), and nothing of it is written into the new history."""

    def __init__(self, location: str, mark: Any, recurrence: int | None = None) -> None:
        mark = mark if isinstance(mark, dict) else {}
        by = f" by {describe(mark['by'])}" if isinstance(mark.get("by"), dict) else ""
        at = mark.get("at")
        when = f" at {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(at))}" if isinstance(at, (int, float)) else ""
        dropped = f"; its recurrence {recurrence} went with the old history" if recurrence is not None else ""
        super().__init__(
            f"{location}: the job's history was cleared under this run{by}{when} (`zeus run --fresh`, which started "
            f"the job over): this run stops and writes nothing into the new history{dropped}. Run the job again to "
            "continue the new history"
        )


class FreshRefused(BadInput):
    """``--fresh`` while other live runners of the job hold open recurrences: starting over would
    throw away what they are about to record. Nothing was changed."""

    def __init__(self, location: str, live: dict[int, Any]) -> None:
        self.live = live
        shown = ", ".join(f"recurrence {rec} ({describe(owner)})" for rec, owner in sorted(live.items())[:10])
        more = f" and {len(live) - 10} more" if len(live) > 10 else ""
        super().__init__(
            f"{location}: --fresh would throw away the job's history while other runners of the job are in the middle "
            f"of it: {shown}{more}. Nothing was changed. Let them end (or stop them) and run again, or pass --wait to "
            "start over as soon as they have ended their recurrences (a runner on another machine that was lost is "
            "recorded as gone by the job's next run there; or give this run another job.store)"
        )


def live_runners(tx: StoreTransaction) -> dict[int, Any]:
    """The open recurrences whose runners may still run (not certainly gone), with their owners."""
    opened = tx.get(OPEN_KEY) or {}
    live = {}
    for rec, entry in opened.items():
        owner = entry.get("owner") if isinstance(entry, dict) else None
        if gone_reason(owner) is None:
            live[int(rec)] = owner
    return live


def claim_waiting(location: str, claim: Callable[[], Any], wait: bool) -> Any:
    """``claim()`` (a step that claims a job's store, starting it over); while it is refused by live
    runners (:class:`FreshRefused`) and ``wait`` is set, ask again every :data:`WAIT_POLL_S` seconds.
    A local :class:`History`'s and a service's client's (``zeus run --fresh --wait``)."""
    said = False
    while True:
        try:
            return claim()
        except FreshRefused as e:
            if not wait:
                raise
            if not said:
                shown = ", ".join(f"recurrence {rec} ({describe(owner)})" for rec, owner in sorted(e.live.items())[:10])
                log.warning(
                    "%s: --fresh --wait: waiting for the job's other runners to end their recurrences (%s); "
                    "the job starts over once none is open",
                    location,
                    shown,
                )
                said = True
            time.sleep(WAIT_POLL_S)


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

            def record(self, plan, record, recurrence_cost=None) -> None:
                self.http.post("/results", json=record.to_json())
    """

    def begin_recurrence(self) -> int: ...

    def next_try(self, recurrence: int, try_index: int) -> TryPlan: ...

    def record(self, plan: TryPlan, record: TryRecord, recurrence_cost: float | None = None) -> None: ...


@runtime_checkable
class HistoryService(JobHistory, Protocol):
    """A recurring job's try bookkeeping, wherever it runs: :class:`History` over the
    job's store in this process, or a service's client (:class:`ServesHistory`): a
    :class:`JobHistory` that also reads the whole history and closes.

    The runner's loop, and a script's.

    Example::

        rec = history.begin_recurrence()
        for try_index in range(1, job.max_tries + 1):
            plan = history.next_try(rec, try_index)      # batch size, cost bound
            record = train(plan)                          # a TryRecord
            history.record(plan, record, recurrence_cost=cost if record.reached else None)
            if record.reached:
                break
        history.history()                                 # every try of the job, all runners
    """

    def history(self) -> list[TryRecord]: ...

    def abandon(self, recurrence: int, reason: str) -> bool: ...

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
        wait: bool = False,
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
        #: before it leaves the store as it was); refused while other live runners hold open
        #: recurrences (:class:`FreshRefused`), unless ``wait``: then it waits until they ended them.
        self.fresh = fresh
        self.wait = wait
        #: Whether this object joined the store's history (its first write), and the history's id
        #: then: a history started over later by another process stops it (:class:`HistoryCleared`).
        self._joined = False
        self._history: str | None = None
        #: The highest recurrence number this object began: a store whose counter is not past it
        #: was started over since (by a zeus-core that wrote no history mark, or a service's clear).
        self._began = 0

    # -- identity --

    def _claim(self, tx: StoreTransaction, owner: dict[str, Any] | None = None) -> str | None:
        """Join the store's history (the first time: starting it over when ``fresh``), and check
        the job's identity. Returns the id of the history joined."""
        if self.fresh:
            live = live_runners(tx)
            if live:
                raise FreshRefused(self.store.location, live)
            tx.clear()
            mark = history_mark(owner)
            tx.set(HISTORY_KEY, mark)
            joined: str | None = mark["id"]
        elif self._joined:
            self._same_history(tx)
            joined = self._history
        else:
            joined = _history_id(tx)
        stored = tx.identity()
        if stored is None:
            if not self._joined and not self.fresh:
                _warn_unchecked_history(self.store.location, tx, self.identity)
            tx.set_identity(self.identity)
        else:
            refuse_another_job(self.store.location, stored, self.identity)
            learned = merged(stored, self.identity)
            if learned != stored:  # another way in (a script, zeus run) declared more of the job
                tx.set_identity(learned)
        return joined

    def _joined_history(self, joined: str | None) -> None:
        """After the transaction that claimed the store: this object is in history ``joined``."""
        self.fresh = False
        self._joined = True
        self._history = joined

    def _same_history(self, tx: StoreTransaction, recurrence: int | None = None) -> None:
        """Refuse (:class:`HistoryCleared`) to go on in a history other than the one this object joined."""
        if self._joined and not self._in_joined(tx):
            raise HistoryCleared(self.store.location, tx.get(HISTORY_KEY), recurrence)

    def _in_joined(self, tx: StoreTransaction) -> bool:
        """Whether the store still holds the history this object joined."""
        return _history_id(tx) == self._history and self.next_recurrence(tx=tx) > self._began

    def _claim_waiting(self, claim: Any) -> Any:
        """``claim()`` (a transaction that claims the store), waiting for live runners with ``wait``."""
        return claim_waiting(self.store.location, claim, self.wait)

    # -- policy state --

    def _load(self, tx: StoreTransaction, sections: tuple[str, ...]) -> None:
        for section in sections:
            part = self.policy if section == "batch_size" else self.power
            if part is not None:
                key = BATCH_SIZE_KEY if section == "batch_size" else POWER_KEY
                state = tx.get(key)
                if state is not None:
                    set_policy_state(part, state, key, self.store.location)

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
        power = self.power

        def claim() -> tuple[str | None, Any]:
            with self.store.transaction() as tx:
                joined = self._claim(tx)
                self._load(tx, ("power",))
                return joined, copy.deepcopy(power.get_state())

        joined, base = self._claim_waiting(claim)
        self._joined_history(joined)
        return base

    def save_power(self, base: Any) -> Any:
        """Apply what the power policy learned since ``base`` to the latest committed state
        (no lost update, as :meth:`record` does); returns the new base."""
        with self.store.transaction() as tx:
            self._same_history(tx)
            self._merge_power_state(tx, base)
        return copy.deepcopy(self.power.get_state()) if self.power is not None else None

    # -- the job's steps --

    def begin_recurrence(self, *, tx: StoreTransaction | None = None, owner: dict[str, Any] | None = None) -> int:
        """Take the next recurrence number (recording the job's identity in its first write), open
        for ``owner`` (default: this process), after recording as abandoned the open recurrences
        whose runners are gone from this host.

        The first call joins the store's history (with ``fresh``: starting it over, refused while
        other live runners hold open recurrences, :class:`FreshRefused`, or waiting for them to end
        with ``wait``); a later call in another history (started over by another process since)
        raises :class:`HistoryCleared`."""

        def begin(tx: StoreTransaction) -> tuple[int, str | None]:
            joined = self._claim(tx, owner)
            self._sweep(tx)
            st = dict(tx.get(RUNNER_KEY) or _DEFAULT_RUNNER_STATE)
            rec = int(st["next_recurrence"])
            st["next_recurrence"] = rec + 1
            st.setdefault("first_began", round(time.time(), 3))  # since when the history runs (a rerun says it)
            tx.set(RUNNER_KEY, st)
            opened = dict(tx.get(OPEN_KEY) or {})
            opened[str(rec)] = {"owner": this_process() if owner is None else owner, "began": round(time.time(), 3)}
            tx.set(OPEN_KEY, opened)
            return rec, joined

        if tx is not None:  # the caller's transaction: it commits (or not) with whatever else it holds
            rec, joined = begin(tx)
        else:

            def own() -> tuple[int, str | None]:
                with self.store.transaction() as t:
                    return begin(t)

            rec, joined = self._claim_waiting(own)
        self._joined_history(joined)
        self._began = max(self._began, rec)
        return rec

    def abandon(self, recurrence: int, reason: str, *, tx: StoreTransaction | None = None) -> bool:
        """Record that open ``recurrence`` ended without a try that reached the target, and why;
        False (nothing written) when it is not open (it ended already, or was never begun), or
        when the job's history was started over since this object joined it (the recurrence went
        with the old history)."""
        with self._transaction(tx) as tx:
            if self._joined and not self._in_joined(tx):
                return False
            return _abandon(tx, int(recurrence), reason)

    def _sweep(self, tx: StoreTransaction) -> None:
        opened = tx.get(OPEN_KEY) or {}
        for rec, entry in list(opened.items()):
            why = gone_reason(entry.get("owner") if isinstance(entry, dict) else None)
            if why is not None:
                _abandon(tx, int(rec), why)

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
            raise RuntimeError("this job has no batch-size policy to choose a try")
        policy = self.policy
        with self._transaction(tx) as tx:
            self._same_history(tx, recurrence)
            st = tx.get(RUNNER_KEY) or _DEFAULT_RUNNER_STATE
            min_cost = math.inf if st.get("min_cost") is None else float(st["min_cost"])
            self._load(tx, ("batch_size", "power"))
            ctx = self.policy_context(recurrence, try_index, min_cost)
            try:
                batch_size = int(policy.choose(ctx))
            except ZeusError:
                raise
            except Exception as e:  # the policy's own failure, said as such rather than as a traceback
                raise RunFailed(
                    f"recurrence {recurrence}, try {try_index}: the batch-size policy could not choose: {type(e).__name__}: {e}"
                ) from e
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
        plan: TryPlan,
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
            # First: a result only for a recurrence the store's current history began (as the
            # service checks), of the history this object joined.
            self._same_history(tx, record.recurrence)
            begun = self.next_recurrence(tx=tx) - 1
            if record.recurrence > begun:
                raise RunFailed(
                    f"{self.store.location}: recurrence {record.recurrence} was not begun in the job's history "
                    f"(it has {begun}): its result is not stored; the history was started over since?"
                )
            recorded = tx.tries_of(record.recurrence)  # a try is stored once, and in order
            if any(i == record.try_index or reached for i, reached in recorded):
                raise TryRecorded(record.recurrence, record.try_index, recorded)
            if record.try_index != len(recorded) + 1:
                raise BadInput(
                    f"recurrence {record.recurrence}: try {record.try_index} cannot follow try {len(recorded)}; "
                    "a recurrence's tries are recorded in order, each once"
                )
            if power_update is not None:  # then: a stale state changes nothing, not even in memory
                state, expected = power_update
                current = tx.get(POWER_KEY)
                if state_digest(current) != expected:
                    raise StalePowerState(current)
                tx.set(POWER_KEY, state)
            # Observe on the latest committed state, so concurrent runners of one
            # job each add their observation instead of overwriting the other's.
            if self.policy is not None:
                self._load(tx, ("batch_size",))
                self.policy.observe(plan.context, record)
                self._save_batch_size_state(tx)
            self._merge_power_state(tx, plan.power_base)
            tx.add_try(record)
            if record.reached and recurrence_cost is not None:
                st = dict(tx.get(RUNNER_KEY) or _DEFAULT_RUNNER_STATE)
                prev = st.get("min_cost")
                st["min_cost"] = recurrence_cost if prev is None else min(prev, recurrence_cost)
                tx.set(RUNNER_KEY, st)
            if record.reached:
                _close(tx, record.recurrence)
            elif record.try_index >= self.job.max_tries:
                _abandon(tx, record.recurrence, f"no try reached the target in job.max_tries = {self.job.max_tries} tries")

    def history(self) -> list[TryRecord]:
        """Every try of the job so far, of every runner, in order."""
        return self.store.tries()

    def close(self) -> None:
        """Nothing to give back: the store is the caller's."""


def _warn_unchecked_history(location: str, tx: StoreTransaction, identity: dict[str, Any]) -> None:
    """A store that holds a history but no identity (written before stores recorded one) is continued:
    say that it cannot be checked that the history is of this setup (this GPU, these options)."""
    st = tx.get(RUNNER_KEY)
    begun = int(st["next_recurrence"]) - 1 if isinstance(st, dict) and isinstance(st.get("next_recurrence"), int) else 0
    if begun <= 0 and not tx.tries_of(1):
        return
    device = identity.get("device")
    if not isinstance(device, dict):
        device = {}
    shown = ", ".join(f"{k} = {json.dumps(v)}" for k, v in sorted(device.items()) if k != "plugin" and v not in (None, ""))
    this = f" ([device] {device.get('plugin')}: {shown})" if device.get("plugin") else ""
    log.warning(
        "%s holds a history (%d recurrences) from a zeus-core that did not record the job's identity: it cannot be "
        "checked that it is of this setup%s, and from now on the store records this one. If the history was learned "
        "on another GPU or with other options, start over with `zeus run --fresh`, or give this job its own job.store",
        location,
        begun,
        this,
    )


def gone_reason(owner: Any) -> str | None:
    """Why an open recurrence of ``owner`` (its runner's process) is abandoned, when that process is
    certainly gone (:func:`zeus_core.engine.owner.is_gone`); None when it may still run."""
    if not is_gone(owner):
        return None
    return f"its runner (pid {owner.get('pid')} on {owner.get('host')}) ended without a result: killed, or its machine restarted"


def _abandon(tx: StoreTransaction, recurrence: int, reason: str) -> bool:
    opened = dict(tx.get(OPEN_KEY) or {})
    if opened.pop(str(recurrence), None) is None:
        return False
    tx.set(OPEN_KEY, opened)
    abandoned = dict(tx.get(ABANDONED_KEY) or {})
    abandoned[str(recurrence)] = {"reason": str(reason)[:MAX_REASON], "at": round(time.time(), 3)}
    tx.set(ABANDONED_KEY, abandoned)
    return True


def _close(tx: StoreTransaction, recurrence: int) -> None:
    """A try of ``recurrence`` reached the target: it is neither open nor abandoned (a runner
    taken for gone came back)."""
    for key in (OPEN_KEY, ABANDONED_KEY):
        entries = tx.get(key)
        if entries and str(recurrence) in entries:
            entries = dict(entries)
            del entries[str(recurrence)]
            tx.set(key, entries)


@attrs.frozen
class Ledger:
    """The account of a job's recurrence numbers (:func:`ledger`): ``begun`` numbers taken
    (1 .. begun), ``open`` ones not ended (number -> owner and start), ``abandoned`` ones
    (number -> reason and when); every other begun number ended with a try that reached the
    target, or was begun before stores kept this account (zeus-core 0.x stores)."""

    begun: int
    open: dict[int, dict[str, Any]]
    abandoned: dict[int, dict[str, Any]]
    #: Unix time the history's first recurrence was begun (None: begun before stores kept it)
    first_began: float | None = None


def ledger(store: JobStore) -> Ledger:
    """What ``store`` says about the job's recurrence numbers (read outside a transaction)."""
    st = store.get(RUNNER_KEY) or _DEFAULT_RUNNER_STATE
    opened = store.get(OPEN_KEY) or {}
    abandoned = store.get(ABANDONED_KEY) or {}
    return Ledger(
        begun=int(st["next_recurrence"]) - 1,
        open={int(k): v for k, v in sorted(opened.items(), key=lambda kv: int(kv[0]))},
        abandoned={int(k): v for k, v in sorted(abandoned.items(), key=lambda kv: int(kv[0]))},
        first_began=st.get("first_began"),
    )

"""The bookkeeping of a recurring job over its store: recurrences, trials, and what policies learn.

``zeus run`` (the runner), a user's own loop (:class:`zeus_core.BatchSizeOptimizer`,
:class:`zeus_core.PowerLimitOptimizer`) and the optimizer service all keep a
job's history the same way, through :class:`Trials`, so a job's history is one
history however it is run:

* :meth:`Trials.begin_recurrence` takes the next recurrence number (and, in the
  job's first write, records its identity, or checks it against the one a
  concurrent runner recorded);
* :meth:`Trials.next_trial` loads the policies' latest committed state, lets the
  batch-size policy choose, and computes the try's cost bound (``beta_knob x``
  the cheapest recurrence, or the policy's own :class:`~zeus_core.TryCostBound`);
* :meth:`Trials.record` replays the batch-size policy's ``observe`` on the latest
  committed state, applies what the power policy learned during the try
  (:mod:`zeus_core.statemerge`), stores the result and, when the try reached the
  target, the recurrence's cost: all in one transaction.
"""

from __future__ import annotations

import copy
import math
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from zeus_core import statemerge
from zeus_core.contexts import PolicyContext
from zeus_core.identity import IdentityMismatch, differences, merged
from zeus_core.parts import MergesState, TryCostBound

if TYPE_CHECKING:  # annotations only
    from zeus_core.job import JobOptions
    from zeus_core.parts import BatchSizePolicy, PowerPolicy
    from zeus_core.results import TryRecord
    from zeus_core.stores import JobStore, StoreTransaction

#: The runner's own state: the next recurrence number and the cheapest finished recurrence.
RUNNER_KEY = "runner"
_DEFAULT_RUNNER_STATE = {"next_recurrence": 1, "min_cost": None}


def check_store_identity(store: JobStore, identity: dict[str, Any], stored: dict[str, Any] | None = None) -> None:
    """Raise :class:`~zeus_core.IdentityMismatch` when ``store`` learned a job other than ``identity``."""
    stored = store.identity() if stored is None else stored
    if stored is not None:
        diffs = differences(stored, identity)
        if diffs:
            raise IdentityMismatch(store.location, diffs)


@attrs.define
class Trial:
    """One try, as chosen: its batch size and the cost after which it stops."""

    recurrence: int
    try_index: int
    batch_size: int
    cost_bound: float
    context: PolicyContext
    #: The power policy's state when the try began (what its change is measured from).
    power_base: Any = None


@runtime_checkable
class JobHistory(Protocol):
    """Where a recurring job's tries come from and go to: :class:`Trials` over the job's
    store here, or a client of an optimizer service (``zeus serve``) that keeps them
    remotely. :class:`zeus_core.BatchSizeOptimizer` needs nothing else, so either
    can be handed to it (``history=``).

    Example::

        class RemoteHistory:
            def begin_recurrence(self) -> int:
                return self.http.post("/recurrences").json()["recurrence"]

            def next_trial(self, recurrence, try_index) -> Trial:
                return Trial(**self.http.post("/trials", json=[recurrence, try_index]).json())

            def record(self, trial, record, recurrence_cost=None) -> None:
                self.http.post("/results", json=record.to_json())
    """

    def begin_recurrence(self) -> int: ...

    def next_trial(self, recurrence: int, try_index: int) -> Trial: ...

    def record(self, trial: Trial, record: TryRecord, recurrence_cost: float | None = None) -> None: ...


class Trials:
    """A recurring job's history in its store, and the policies that learn from it."""

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

    def check_identity(self, stored: dict[str, Any] | None = None) -> None:
        """Refuse (:class:`~zeus_core.IdentityMismatch`) a store that learned another job."""
        if not self.fresh:
            check_store_identity(self.store, self.identity, stored)

    def _claim(self, tx: StoreTransaction) -> None:
        if self.fresh:
            tx.clear()
            self.fresh = False
        stored = tx.identity()
        if stored is None:
            tx.set_identity(self.identity)
        else:
            self.check_identity(stored)
            learned = merged(stored, self.identity)
            if learned != stored:  # another way in (a script, zeus run) declared more of the job
                tx.set_identity(learned)

    # -- policy state --

    def _load(self, tx: StoreTransaction, sections: tuple[str, ...]) -> None:
        for section in sections:
            part = self.policy if section == "batch_size" else self.power
            if part is not None:
                state = tx.get(f"policy:{section}")
                if state is not None:
                    part.set_state(state)

    def _save_batch_size_state(self, tx: StoreTransaction) -> None:
        if self.policy is not None:
            state = self.policy.get_state()
            if state is not None:
                tx.set("policy:batch_size", state)

    def _merge_power_state(self, tx: StoreTransaction, base: Any) -> None:
        """Apply what the power policy learned in this try to the latest committed state
        (another runner of the job may have committed its own choices meanwhile)."""
        power = self.power
        if power is None:
            return
        mine = power.get_state()
        if mine is None:
            return
        theirs = tx.get("policy:power")
        if theirs is None:
            merged = mine
        elif isinstance(power, MergesState):
            merged = power.merge_state(base, mine, theirs)
        else:
            merged = statemerge.merge(base, mine, theirs)
        if merged is not mine:
            power.set_state(merged)
        tx.set("policy:power", merged)

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

    def begin_recurrence(self) -> int:
        """Take the next recurrence number (recording the job's identity in its first write)."""
        with self.store.transaction() as tx:
            self._claim(tx)
            st = dict(tx.get(RUNNER_KEY) or _DEFAULT_RUNNER_STATE)
            rec = int(st["next_recurrence"])
            st["next_recurrence"] = rec + 1
            tx.set(RUNNER_KEY, st)
        return rec

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

    def next_trial(self, recurrence: int, try_index: int) -> Trial:
        """The batch-size policy chooses on the latest committed state; the try's cost bound."""
        if self.policy is None:
            raise RuntimeError("this job has no batch-size policy to choose a trial")
        policy = self.policy
        with self.store.transaction() as tx:
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
            power_base = copy.deepcopy(self.power.get_state()) if self.power is not None else None
        cost_bound = self.job.beta_knob * min_cost
        if own_bound is not None:
            cost_bound = min(cost_bound, float(own_bound))
        return Trial(recurrence, try_index, batch_size, cost_bound, ctx, power_base)

    def record(self, trial: Trial, record: TryRecord, recurrence_cost: float | None = None) -> None:
        """Store a try's result with what the policies learned from it, in one transaction.

        ``recurrence_cost`` (the cost of all tries of the recurrence, when this one
        reached the target) updates the cheapest recurrence, the early-stop reference.
        """
        with self.store.transaction() as tx:
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

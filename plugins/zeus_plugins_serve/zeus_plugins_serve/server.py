"""The service: jobs' trial bookkeeping over HTTP, in front of any zeus store.

Each job's store is opened once (``open_store(location, registry, job=name)``: a URL
such as ``postgresql://...`` that many jobs share, or a folder of SQLite files,
one per job) and used by one worker thread of that job, so a job's steps run
one at a time in this process while other jobs run beside it; the store's own
transaction serialises them against every other process (another ``zeus serve``
on the same database, a ``zeus run`` with the database as its store).

A client registers a *session*: its :class:`~zeus_core.engine.remote.HistorySetup`, from which
the service builds the job's batch-size policy with its own registry
(:func:`~zeus_core.engine.assembly.build_history`) and keeps the history with
:class:`~zeus_core.engine.history.History`, exactly as ``zeus run`` does. Sessions live in
memory; after a restart a client registers again (404 ``unknown_session``).

Exactly once. Every step carries the client's request id; the service records
``(request, answer)`` under ``serve:client:<client>`` *in the transaction of
the step*, so a step whose answer was lost (a killed service, a dropped
connection) is answered again from the store when the client retries, and
never applied twice.
"""

from __future__ import annotations

import asyncio
import hmac
import math
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from zeus_core import JobOptions, RunFailed, TryRecord
from zeus_core.backends import StoreError, StoreUnavailable
from zeus_core.engine import (
    OPEN_KEY,
    FreshRefused,
    History,
    HistorySetup,
    Registry,
    SetupError,
    StalePowerState,
    TryPlan,
    TryRecorded,
    build_history,
    get_registry,
    mask_secrets,
    open_store,
    state_digest,
)
from zeus_core.identity import IdentityMismatch
from zeus_plugins_serve import api, upstream_bso

#: How long a remote transaction's lock is held without a request from its client.
LEASE_S = 10.0
#: How long a request waits for another client's remote transaction of the same job.
LOCK_WAIT_S = 30.0
MAX_SESSIONS = 10_000
MAX_OPEN_JOBS = 256


class Problem(Exception):
    """An answer other than 200, with its JSON body."""

    def __init__(self, status: int, detail: Any, **extra: Any) -> None:
        super().__init__(str(detail))
        self.status = status
        self.body = {"detail": detail, **extra}


def _unprocessable(problems: list[tuple[tuple, str]], prefix: tuple = ("body",)) -> Problem:
    return Problem(422, [{"loc": [*prefix, *path], "msg": msg, "type": "value_error"} for path, msg in problems])


#: The ``{job}`` path parameter.
JobParam = Annotated[str, PathParam(description="the job's name (job.name)", examples=["fuzz"])]


def job_name(name: str) -> str:
    """A job name as ``zeus run`` accepts it (it may name a file of the store)."""
    try:
        JobOptions(name=name)
    except (ValueError, TypeError) as e:
        raise _unprocessable([(("job",), str(e))], prefix=("path",)) from None
    if not name:
        raise _unprocessable([(("job",), "a job name is required")], prefix=("path",))
    return name


class RemoteLock:
    """The lock of one job's remote transactions (a part's own state), held by one client at a
    time for at most LEASE_S without a request. A transaction this service did not grant (one
    made up, or granted before a restart, which forgets every lock) is refused at its next
    read or its commit (409 ``unknown_transaction``), as is a commit while another transaction
    holds the lock (409 ``not_held``: its lease ran out and another client took it); every
    commit also checks that each key it read is unchanged (409 ``conflict``). Nothing is
    written on a refusal, and the client decides again on what is committed now."""

    def __init__(self, lease_s: float = LEASE_S) -> None:
        self.lease_s = lease_s
        self.holder: str | None = None
        self.deadline = 0.0
        #: transactions granted and not yet released, oldest first (bounded: abandoned ones are dropped)
        self.granted: dict[str, None] = {}
        #: every transaction granted since the service started (bounded): a commit retried after its
        #: lock was let go (the store could not be reached) is still one this service issued
        self.issued: OrderedDict[str, None] = OrderedDict()
        self.cond = asyncio.Condition()

    async def acquire(self, wait_s: float) -> str:
        loop = asyncio.get_running_loop()
        end = loop.time() + wait_s
        async with self.cond:
            while self.holder is not None and loop.time() < self.deadline:
                left = min(self.deadline, end) - loop.time()
                if loop.time() >= end:
                    raise Problem(503, "another client of this job holds its state; try again", code="busy")
                try:
                    await asyncio.wait_for(self.cond.wait(), timeout=max(left, 0.01))
                except TimeoutError:
                    pass
            self.holder = secrets.token_hex(16)
            self.deadline = loop.time() + self.lease_s
            self.granted[self.holder] = None
            self.issued[self.holder] = None
            while len(self.granted) > 10_000:
                del self.granted[next(iter(self.granted))]
            while len(self.issued) > 100_000:
                self.issued.popitem(last=False)
            return self.holder

    def known(self, tx: str) -> bool:
        """``tx`` was granted by this service (since it started)."""
        return tx in self.issued

    def taken_from(self, tx: str) -> bool:
        """``tx`` was granted here, and another transaction holds the lock now, within its lease."""
        return tx in self.granted and self.holder is not None and self.holder != tx and asyncio.get_running_loop().time() < self.deadline

    def renew(self, tx: str) -> None:
        if self.holder == tx:
            self.deadline = asyncio.get_running_loop().time() + self.lease_s

    async def release(self, tx: str) -> None:
        async with self.cond:
            self.granted.pop(tx, None)
            if self.holder == tx:
                self.holder = None
                self.cond.notify_all()


class JobEntry:
    """One job's store, its worker thread, and its remote-transaction lock."""

    def __init__(self, name: str, location: str, registry: Registry, lease_s: float = LEASE_S) -> None:
        self.name = name
        self.location = location
        self.registry = registry
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"zeus-job-{name[:20]}")
        self.store: Any = None
        self.lock = RemoteLock(lease_s)
        self.busy = 0

    def open(self) -> Any:  # in the job's thread
        if self.store is None:
            self.store = open_store(self.location, self.registry, job=self.name)
        return self.store

    def close(self) -> None:
        def shut() -> None:
            if self.store is not None:
                self.store.close()
                self.store = None

        self.executor.submit(shut)
        self.executor.shutdown(wait=True)


class ClientJob:
    """One client's use of one job: its setup, and the job's history built for it on first use."""

    def __init__(self, client: str, job: str, setup: HistorySetup) -> None:
        self.client = client
        self.job = job
        self.setup = setup
        self.history: History | None = None

    def history_for(self, store: Any, registry: Any) -> History:
        if self.history is None:
            self.history = build_history(self.setup, store, registry)
        return self.history


class Hub:
    """Open jobs and sessions of one service."""

    def __init__(self, store: str, registry: Registry | None = None, lease_s: float = LEASE_S) -> None:
        self.store = store
        self.registry = registry if registry is not None else get_registry()
        self.lease_s = lease_s
        self.jobs: OrderedDict[str, JobEntry] = OrderedDict()
        self.sessions: OrderedDict[tuple[str, str], ClientJob] = OrderedDict()
        self._guard = threading.Lock()

    def location(self, job: str) -> str:
        if "://" in self.store:
            return self.store
        return str(Path(self.store) / f"{job}.sqlite")

    def entry(self, job: str, hold: bool = False) -> JobEntry:
        """The job's entry (opened on first use); ``hold``: counted busy, so that it is not closed
        to make room for another job until :meth:`run` lets go of it."""
        with self._guard:
            entry = self.jobs.get(job)
            if entry is None:
                entry = self.jobs[job] = JobEntry(job, self.location(job), self.registry, self.lease_s)
                idle = [e for e in self.jobs.values() if e.busy == 0 and e is not entry]
                while len(self.jobs) > MAX_OPEN_JOBS and idle:
                    old = idle.pop(0)
                    del self.jobs[old.name]
                    old.close()
            self.jobs.move_to_end(job)
            if hold:
                entry.busy += 1
            return entry

    async def run(self, job: str, fn: Callable[[JobEntry], Any]) -> Any:
        """``fn(entry)`` in the job's thread, with its store's errors as answers."""
        entry = self.entry(job, hold=True)
        try:
            return await asyncio.get_running_loop().run_in_executor(entry.executor, _answering, fn, entry)
        finally:
            with self._guard:
                entry.busy -= 1

    def session(self, job: str, client: str) -> ClientJob:
        s = self.sessions.get((job, client))
        if s is None:
            raise Problem(404, "unknown session (the service restarted, or forgot it): register again", code="unknown_session")
        self.sessions.move_to_end((job, client))
        return s

    def add_session(self, s: ClientJob) -> None:
        self.sessions[(s.job, s.client)] = s
        self.sessions.move_to_end((s.job, s.client))
        while len(self.sessions) > MAX_SESSIONS:
            self.sessions.popitem(last=False)

    def close(self) -> None:
        for entry in self.jobs.values():
            entry.close()
        self.jobs.clear()


def _answering(fn: Callable[[JobEntry], Any], entry: JobEntry) -> Any:
    """Store and policy failures as HTTP answers (never a 500 for something the store or job says)."""
    try:
        return fn(entry)
    except Problem:
        raise
    except StoreUnavailable as e:
        raise Problem(503, str(e), code="store_unavailable") from None
    except StoreError as e:
        raise Problem(409, mask_secrets(str(e)), code="store_refused") from None
    except IdentityMismatch as e:
        raise Problem(409, str(e), code="identity_mismatch") from None
    except SetupError as e:
        raise _unprocessable(e.problems, prefix=("body", "setup")) from None
    except StalePowerState:  # the results endpoint answers it with the state to merge onto
        raise
    except RunFailed as e:  # the job's own policy failed (it could not choose): the client's run fails with it
        raise Problem(409, mask_secrets(str(e)), code="policy_failed") from None
    except FreshRefused as e:  # a --fresh client while other runners hold open recurrences: it may wait and ask again
        live = {str(rec): owner for rec, owner in e.live.items()}
        raise Problem(409, mask_secrets(str(e)), code="fresh_refused", live=live) from None
    except ValueError as e:  # a policy that refuses the stored state (another setup), a value a store refuses
        raise Problem(409, f"the job's policy or store refused: {mask_secrets(str(e))}", code="refused") from None


def _finite_or_none(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _log_key(client: str) -> str:
    return f"serve:client:{client}"


def _replay(logged: Any, op: str, request: str) -> Any:
    """The logged answer when ``request`` is a retry of the client's last step (None otherwise)."""
    if not isinstance(logged, dict) or logged.get("request") != request:
        return None
    if logged.get("op") != op:
        raise _unprocessable(
            [(("request",), f"request id {request} was already used for another step ({logged.get('op')}); every step needs its own id")]
        )
    return logged["response"]


def _step(hub: Hub, session: ClientJob, request: str, op: str, do: Callable[[History, Any], Any]) -> Callable[[JobEntry], Any]:
    """A step of ``session``'s job, once: replayed from the store when ``request`` was answered before."""

    def fn(entry: JobEntry) -> Any:
        store = entry.open()
        history = session.history_for(store, hub.registry)
        try:
            with store.transaction() as tx:
                logged = tx.get(_log_key(session.client))
                if logged is not None:
                    history.fresh = False  # this client's first write is done (its --fresh with it)
                    answer = _replay(logged, op, request)
                    if answer is not None:
                        return answer
                answer = do(history, tx)
                tx.set(_log_key(session.client), {"op": op, "request": request, "response": answer})
                return answer
        except StalePowerState:
            raise
        except BaseException:
            session.history = None  # its policy may hold what was rolled back: build it again
            raise

    return fn


def create_app(
    store: str, token: str | None = None, max_body: int = 1 << 20, registry: Any = None, version: str = "", lease_s: float = LEASE_S
) -> FastAPI:
    """The service's ASGI app over ``store`` (a store URL, or a folder of SQLite files)."""
    hub = Hub(store, registry, lease_s)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        try:
            yield
        finally:
            hub.close()

    app = FastAPI(
        lifespan=lifespan,
        title="zeus serve",
        version=str(api.API_VERSION),
        description=(
            "The batch-size optimizer of zeus as a service: jobs register (with their identity), ask for their next "
            "trial, report results and read their history; the same policies and bookkeeping as `zeus run`. "
            "Every /v1 request needs `Authorization: Bearer <token>` when the service has a token."
        ),
    )
    app.state.hub = hub
    bearer = HTTPBearer(auto_error=False)
    expected = token.encode() if token else None

    def authorised(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        if expected is None:
            return
        given = (credentials.credentials if credentials is not None else "").encode()
        if credentials is None or credentials.scheme.lower() != "bearer" or not hmac.compare_digest(given, expected):
            raise HTTPException(
                401, "a valid bearer token is required (Authorization: Bearer <token>)", headers={"WWW-Authenticate": "Bearer"}
            )

    @app.exception_handler(Problem)
    async def _problem(_request: Request, e: Problem) -> JSONResponse:
        headers = {"Retry-After": "1"} if e.status == 503 else None
        return JSONResponse(e.body, status_code=e.status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, e: RequestValidationError) -> JSONResponse:
        details = []
        for err in e.errors():
            details.append({"loc": list(err.get("loc", ())), "msg": str(err.get("msg", "")), "type": str(err.get("type", ""))})
        return JSONResponse({"detail": details}, status_code=422)

    app.add_middleware(BodyLimit, max_bytes=max_body)

    v1: dict[str, Any] = {"dependencies": [Depends(authorised)], "responses": {401: {"description": "no or wrong token"}}}

    @app.get("/healthz", response_model=api.Health, tags=["service"])
    async def health() -> api.Health:
        """Liveness, without a token."""
        return api.Health()

    @app.get("/v1", response_model=api.ServiceInfo, tags=["service"], **v1)
    async def info() -> api.ServiceInfo:
        return api.ServiceInfo(version=version, store=mask_secrets(store))

    @app.get("/v1/jobs/{job}", response_model=api.JobInfo, tags=["jobs"], **v1)
    async def job_info(job: JobParam) -> api.JobInfo:
        """What the store holds for the job (nothing yet: schema_version 0). Writes nothing."""
        job = job_name(job)

        def fn(entry: JobEntry) -> api.JobInfo:
            store = entry.open()
            state = store.get("runner") or {}
            return api.JobInfo(
                job=job, identity=store.identity(), tries=len(store.tries()), next_recurrence=int(state.get("next_recurrence", 1))
            )

        return await hub.run(job, fn)

    @app.post("/v1/jobs/{job}/sessions", response_model=api.SessionOut, tags=["trials"], **v1)
    async def register(job: JobParam, body: api.SessionIn) -> api.SessionOut:
        """Describe the job (zeus_core.engine.remote.HistorySetup): the service builds its batch-size policy and checks its
        identity against the store (409 when the store learned another job)."""
        job = job_name(job)
        try:
            setup = HistorySetup.from_json(body.setup.model_dump())
        except SetupError as e:
            raise _unprocessable(e.problems, prefix=("body", "setup")) from None
        if setup.job.name != job:
            raise _unprocessable(
                [(("job", "name"), f"the setup is of job {setup.job.name!r}, the path names {job!r}")], prefix=("body", "setup")
            )
        session = ClientJob(body.client, job, setup)

        def fn(entry: JobEntry) -> api.SessionOut:
            store = entry.open()
            history = session.history_for(store, hub.registry)  # checks the store learned this job
            opened = {} if setup.fresh else store.get(OPEN_KEY) or {}
            return api.SessionOut(session=body.client, next_recurrence=history.next_recurrence(), open=opened)

        out = await hub.run(job, fn)
        hub.add_session(session)
        return out

    @app.post("/v1/jobs/{job}/recurrences", response_model=api.RecurrenceOut, tags=["trials"], **v1)
    async def begin_recurrence(job: JobParam, body: api.RecurrenceIn) -> dict:
        """Take the next recurrence number (the job's first write records its identity), open for the
        client's process (``owner``) until a try reaches the target or the recurrence is abandoned."""
        session = hub.session(job_name(job), body.session)
        owner = None if body.owner is None else body.owner.model_dump(exclude_none=True)
        return await hub.run(
            job, _step(hub, session, body.request, "recurrence", lambda t, tx: {"recurrence": t.begin_recurrence(tx=tx, owner=owner)})
        )

    @app.post("/v1/jobs/{job}/abandon", response_model=api.AbandonOut, tags=["trials"], **v1)
    async def abandon(job: JobParam, body: api.AbandonIn) -> dict:
        """Record an open recurrence as abandoned, with the reason (a run that stops, a runner found gone);
        ``abandoned`` is false when it was not open (it ended already)."""
        session = hub.session(job_name(job), body.session)

        def do(t: History, tx: Any) -> dict:
            if body.recurrence >= t.next_recurrence(tx=tx):
                raise _unprocessable([(("recurrence",), f"recurrence {body.recurrence} was not begun")])
            return {"abandoned": t.abandon(body.recurrence, body.reason, tx=tx)}

        return await hub.run(job, _step(hub, session, body.request, "abandon", do))

    @app.post("/v1/jobs/{job}/trials", response_model=api.TrialOut, tags=["trials"], **v1)
    async def next_try(job: JobParam, body: api.TrialIn) -> dict:
        """The batch-size policy chooses the try's batch size on the latest committed state."""
        session = hub.session(job_name(job), body.session)

        def do(t: History, tx: Any) -> dict:
            if body.recurrence >= t.next_recurrence(tx=tx):
                raise _unprocessable([(("recurrence",), f"recurrence {body.recurrence} was not begun (POST .../recurrences)")])
            trial = t.next_try(body.recurrence, body.try_index, tx=tx)
            return {
                "recurrence": trial.recurrence,
                "try_index": trial.try_index,
                "batch_size": trial.batch_size,
                "cost_bound": _finite_or_none(trial.cost_bound),
                "min_cost": _finite_or_none(trial.context.min_cost),
                "power_state": trial.power_base,
                "power_digest": state_digest(trial.power_base),
            }

        return await hub.run(job, _step(hub, session, body.request, "trial", do))

    @app.post(
        "/v1/jobs/{job}/results",
        response_model=api.ResultOut,
        tags=["trials"],
        dependencies=v1["dependencies"],
        responses={**v1["responses"], 409: {"model": api.PowerConflict, "description": "the power state changed: merge again"}},
    )
    async def record(job: JobParam, body: api.ResultIn) -> Any:
        """Store a try's result with what the policies learned, in one transaction (the power state only
        if the committed one is still the one the client merged onto, else 409 with the current one)."""
        session = hub.session(job_name(job), body.session)
        ref, rec = body.trial, body.record
        wrong = [
            (("record", k), f"must equal trial.{k} ({getattr(ref, k)})")
            for k in ("recurrence", "try_index", "batch_size")
            if getattr(rec, k) != getattr(ref, k)
        ]
        if wrong:
            raise _unprocessable(wrong)
        record_ = TryRecord(**rec.model_dump())

        def do(t: History, tx: Any) -> dict:
            if ref.recurrence >= t.next_recurrence(tx=tx):
                raise _unprocessable([(("trial", "recurrence"), f"recurrence {ref.recurrence} was not begun")])
            min_cost = math.inf if ref.min_cost is None else ref.min_cost
            trial = TryPlan(
                ref.recurrence, ref.try_index, ref.batch_size, math.inf, t.policy_context(ref.recurrence, ref.try_index, min_cost)
            )
            update = None if body.power is None else (body.power.state, body.power.expected)
            try:
                t.record(trial, record_, recurrence_cost=body.recurrence_cost, tx=tx, power_update=update)
            except TryRecorded:  # a result sent again (with another request id): the try keeps its first
                return {"stored": False}
            return {"stored": True}

        try:
            return await hub.run(job, _step(hub, session, body.request, "result", do))
        except StalePowerState as e:
            return JSONResponse({"detail": str(e), "power_state": e.current, "power_digest": e.digest}, status_code=409)

    @app.get("/v1/jobs/{job}/history", response_model=api.HistoryOut, tags=["trials"], **v1)
    async def history(job: JobParam) -> dict:
        """Every try of the job, of every client, in order."""
        job = job_name(job)
        return await hub.run(job, lambda entry: {"tries": [_try_json(r) for r in entry.open().tries()]})

    @app.get("/v1/jobs/{job}/state/{key}", response_model=api.StateOut, tags=["state"], **v1)
    async def get_state(job: JobParam, key: str) -> dict:
        """One state value (a policy's, a part's), as last committed."""
        job = job_name(job)
        key = _key(key, ("path", "key"))

        def fn(entry: JobEntry) -> dict:
            missing = object()
            value = entry.open().get(key, missing)
            found = value is not missing
            return {"key": key, "found": found, "value": value if found else None, "digest": state_digest(value if found else None)}

        return await hub.run(job, fn)

    @app.get("/v1/jobs/{job}/state", response_model=api.StateItems, tags=["state"], **v1)
    async def state_items(job: JobParam) -> dict:
        """Every state value of the job (for an export)."""
        job = job_name(job)
        return await hub.run(job, lambda entry: {"items": entry.open().state_items()})

    @app.post("/v1/jobs/{job}/clear", response_model=api.Committed, tags=["state"], **v1)
    async def clear(job: JobParam, body: api.ClientStepIn) -> dict:
        """Forget what the store learned for this job (zeus run --fresh)."""
        job = job_name(job)

        def fn(entry: JobEntry) -> dict:
            store = entry.open()
            with store.transaction() as tx:
                answer = _replay(tx.get(_log_key(body.client)), "clear", body.request)
                if answer is not None:
                    return answer
                tx.clear()
                tx.set(_log_key(body.client), {"op": "clear", "request": body.request, "response": {"committed": True}})
            for (j, _), s in list(hub.sessions.items()):
                if j == job:
                    s.history = None
            return {"committed": True}

        return await hub.run(job, fn)

    # -- remote transactions over a part's own state (e.g. a workload's random generator) --

    @app.post("/v1/jobs/{job}/transactions", response_model=api.TxOut, tags=["state"], **v1)
    async def open_transaction(job: JobParam, body: api.ClientIn) -> dict:
        """Hold the job's part state for one client (at most lease_s between its requests)."""
        tx = await hub.entry(job_name(job)).lock.acquire(LOCK_WAIT_S)
        return {"transaction": tx, "lease_s": hub.lease_s}

    @app.post("/v1/jobs/{job}/transactions/{tx}/get", response_model=api.StateOut, tags=["state"], **v1)
    async def transaction_get(job: JobParam, tx: str, body: api.TxGetIn) -> dict:
        job = job_name(job)
        lock = hub.entry(job).lock
        if not lock.known(tx):
            raise _unknown_transaction(tx)
        lock.renew(tx)
        return await get_state(job, body.key)

    @app.post(
        "/v1/jobs/{job}/transactions/{tx}/commit",
        response_model=api.Committed,
        tags=["state"],
        dependencies=v1["dependencies"],
        responses={
            **v1["responses"],
            409: {"description": "a value read in the transaction changed meanwhile, or another transaction holds the job's state"},
        },
    )
    async def transaction_commit(job: JobParam, tx: str, body: api.TxCommitIn) -> dict:
        """Write ``set`` if every key read still has the digest it had (one transaction), and let go."""
        job = job_name(job)
        for key in body.set:
            if key.startswith(api.RESERVED_KEYS):
                raise _unprocessable([(("set", key), "this key is the service's own; a remote transaction may read it only")])

        lock = hub.entry(job).lock
        known, taken = lock.known(tx), lock.taken_from(tx)

        def fn(entry: JobEntry) -> dict:
            store = entry.open()
            with store.transaction() as t:
                answer = _replay(t.get(_log_key(body.client)), "commit", body.request)
                if answer is not None:
                    return answer  # a retried commit that was written: the lock is gone, the answer stands
                if not known:
                    raise _unknown_transaction(tx)
                if taken:
                    raise Problem(
                        409,
                        f"transaction {tx!r} went {hub.lease_s:g} s without a request and another "
                        "one holds this job's state now (its lease ran out); nothing was written, "
                        "open a new transaction",
                        code="not_held",
                    )
                for key, digest in body.reads.items():
                    if state_digest(t.get(key)) != digest:
                        raise Problem(409, f"state {key!r} changed since this transaction read it; nothing was written", code="conflict")
                for key, value in body.set.items():
                    t.set(key, value)
                t.set(_log_key(body.client), {"op": "commit", "request": body.request, "response": {"committed": True}})
            return {"committed": True}

        try:
            return await hub.run(job, fn)
        finally:
            await hub.entry(job).lock.release(tx)

    @app.delete("/v1/jobs/{job}/transactions/{tx}", response_model=api.Committed, tags=["state"], **v1)
    async def abort_transaction(job: JobParam, tx: str) -> dict:
        await hub.entry(job_name(job)).lock.release(tx)
        return {"committed": False}

    upstream_bso.add_routes(app, hub, Problem, ClientJob, job_name)  # upstream Zeus's batch-size protocol
    return app


def _unknown_transaction(tx: str) -> Problem:
    return Problem(
        409,
        f"transaction {tx[:64]!r} was not granted by this service (it restarted since, which "
        "forgets every transaction); nothing was written: open a new one",
        code="unknown_transaction",
    )


def _key(key: str, loc: tuple) -> str:
    import re

    if not re.match(api.KEY_PATTERN, key):
        raise Problem(422, [{"loc": list(loc), "msg": "a state key is 1 to 200 printable characters", "type": "value_error"}])
    return key


def _try_json(r: TryRecord) -> dict:
    return {
        "recurrence": r.recurrence,
        "try_index": r.try_index,
        "batch_size": r.batch_size,
        "power_limit": r.power_limit,
        "epochs": r.epochs,
        "time_s": r.time_s,
        "energy_j": r.energy_j,
        "cost": r.cost,
        "reached": r.reached,
        "stopped": r.stopped,
        "extra": r.extra,
        "steady_cost": r.steady_cost,
    }


class BodyLimit:
    """413 for a request body over ``max_bytes`` (declared or streamed), before anything reads it."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        too_large = JSONResponse({"detail": f"request body over {self.max_bytes} bytes"}, status_code=413)
        if declared is not None:
            try:
                if int(declared) > self.max_bytes:
                    await too_large(scope, receive, send)
                    return
            except ValueError:
                await JSONResponse({"detail": "bad Content-Length"}, status_code=400)(scope, receive, send)
                return
        seen = 0

        async def limited() -> dict:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise HTTPException(413, f"request body over {self.max_bytes} bytes")
            return message

        await self.app(scope, limited, send)

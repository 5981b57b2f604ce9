"""The client of ``zeus serve``: a job store at ``http://host:port`` that serves tries.

``job.store = "http://127.0.0.1:8020"`` (or ``https://``) makes the job's store
the service: :class:`ServiceStore` is a :class:`~zeus_core.backends.JobStore` (reads of
the job's history and state; transactions over a part's own state) and a
:class:`~zeus_core.engine.remote.ServesHistory`, whose :class:`RemoteTrials` is what
``zeus run`` (and a script's optimizer) uses instead of the local
:class:`~zeus_core.engine.history.History`: the service runs the batch-size policy, this
process trains and runs the power policy.

The token: ``ZEUS_SERVE_TOKEN`` in the environment (or the URL's password,
``http://:TOKEN@host:8020``, masked in every message). While the service cannot be
reached (restarting, its database down), a run keeps retrying, for as long as it takes,
with a line on stderr every :data:`WARN_EVERY_S` seconds (``?retry_s=N``: give up after
``N`` seconds instead, exit 1); every step carries a request id, so a retried step is
applied once. A part's transaction that the service refuses because its reads are out
of date, or because it lost its hold on the job's state meanwhile, is
:class:`~zeus_core.backends.TransactionConflict`: the part decides again
(:func:`~zeus_core.backends.transact`), the run goes on.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import random
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlunsplit

import httpx

from zeus_core import PolicyContext, RunFailed, TryRecord
from zeus_core.backends import StoreError, StoreInfo, StoreUnavailable, TransactionConflict
from zeus_core.engine import (
    FreshRefused,
    HistorySetup,
    TryPlan,
    claim_waiting,
    gone_reason,
    mask_secrets,
    merge_power_state,
    parse_url,
    this_process,
)

log = logging.getLogger("zeus.serve")

_RETRY_STATUS = {502, 503, 504}
#: How long opening the store waits for a service that does not answer.
OPEN_RETRY_S = 10.0
#: How long a step that ends a run (recording an abandoned recurrence) waits for the service.
CLOSING_RETRY_S = 10.0
#: While the service does not answer, a line on stderr this often.
WARN_EVERY_S = 30.0
#: 409 codes of a remote transaction whose reads are out of date or whose hold on the state is gone.
_CONFLICT_CODES = {"conflict", "not_held", "unknown_transaction"}


class _UnknownSession(Exception):
    pass


class _Conflict(Exception):
    def __init__(self, body: dict) -> None:
        super().__init__(body.get("detail"))
        self.body = body


def _new_id() -> str:
    return uuid.uuid4().hex


def split_url(location: str) -> tuple[str, str | None, float]:
    """``(base URL without credentials and our parameters, token, retry_s)``."""
    try:
        parts = parse_url(location)
    except ValueError as e:
        raise StoreError(f"job.store: {e}: expected the address of zeus serve, such as http://127.0.0.1:8750") from None
    query = parse_qsl(parts.query, keep_blank_values=True)
    retry = dict(query).get("retry_s")
    try:
        retry_s = math.inf if retry is None else float(retry)
        if retry is not None and not 0 <= retry_s <= 86400:
            raise ValueError
    except ValueError:
        raise StoreError(f"job.store {mask_secrets(location)}: retry_s must be a number of seconds in 0..86400") from None
    token = unquote(parts.password) if parts.password else None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    rest = urlencode([(k, v) for k, v in query if k != "retry_s"])
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), rest, "")), token, retry_s


class ServiceClient:
    """HTTP calls to one service, with retries while it cannot be reached."""

    def __init__(self, location: str, timeout_s: float) -> None:
        self.location = mask_secrets(location)
        self.base, url_token, self.retry_s = split_url(location)
        token = url_token or os.environ.get("ZEUS_SERVE_TOKEN") or None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        transport = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        self.http = httpx.Client(
            base_url=self.base,
            headers=headers,
            transport=transport,
            timeout=httpx.Timeout(connect=5.0, read=timeout_s + 60.0, write=30.0, pool=30.0),
        )

    def close(self) -> None:
        self.http.close()

    def call(self, method: str, path: str, body: Any = None, retry_s: float | None = None) -> dict:
        """The JSON answer of a 2xx; retries connection failures and 502/503/504 for retry_s
        (default: the URL's, else for as long as it takes, saying so on stderr)."""
        retry_s = self.retry_s if retry_s is None else retry_s
        content = None
        if body is not None:
            try:
                content = json.dumps(body, allow_nan=False)
            except ValueError as e:
                raise StoreError(f"{self.location}: cannot send a value that is not a finite number ({e})") from None
        start = time.monotonic()
        deadline = start + retry_s
        warned = start
        delay = 0.05
        while True:
            why = None
            try:
                r = self.http.request(
                    method, path, content=content, headers={"Content-Type": "application/json"} if content is not None else None
                )
            except httpx.TransportError as e:
                why = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            else:
                if r.status_code not in _RETRY_STATUS:
                    return self._answer(r)
                why = f"HTTP {r.status_code}: {_detail(r)}"
            now = time.monotonic()
            if now + delay > deadline:
                raise StoreUnavailable(
                    f"{self.location}: zeus serve did not answer for {retry_s:g} s ({mask_secrets(why)}). Start it again "
                    "(what was committed is kept in its store) and run the job again, or raise ?retry_s="
                )
            if now - warned >= WARN_EVERY_S:
                warned = now
                log.warning(
                    "%s: zeus serve has not answered for %.0f s (%s); still trying%s (Ctrl-C to stop; ?retry_s=N "
                    "on job.store gives up after N s)",
                    self.location,
                    now - start,
                    mask_secrets(why)[:200],
                    "" if math.isinf(retry_s) else f" for up to {retry_s:g} s",
                )
            time.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, 2.0)

    def _answer(self, r: httpx.Response) -> dict:
        if r.status_code < 300:
            try:
                return r.json()
            except ValueError:
                raise StoreError(f"{self.location}: not a zeus serve endpoint (its answer is not JSON)") from None
        detail = _detail(r)
        if r.status_code == 401:
            raise StoreError(
                f"{self.location}: zeus serve refused the token ({detail}). Set ZEUS_SERVE_TOKEN to the "
                "service's token (or put it in the URL as http://:TOKEN@host:port)"
            )
        body = _json(r)
        if r.status_code == 404 and body.get("code") == "unknown_session":
            raise _UnknownSession()
        if r.status_code == 409 and "power_state" in body:
            raise _Conflict(body)
        if r.status_code == 409 and body.get("code") in _CONFLICT_CODES:
            raise TransactionConflict(f"{self.location}: {mask_secrets(detail)}")
        if r.status_code == 409 and body.get("code") == "fresh_refused":
            live = body.get("live")
            if not isinstance(live, dict):
                live = {}
            raise FreshRefused(self.location, {int(rec): owner for rec, owner in live.items() if str(rec).isdigit()})
        if r.status_code == 409 and body.get("code") == "policy_failed":
            raise RunFailed(f"{self.location}: {mask_secrets(detail)}")
        if r.status_code == 404:
            raise StoreError(f"{self.location}: not a zeus serve endpoint ({r.request.method} {r.request.url.path}: 404)")
        raise StoreError(f"{self.location}: zeus serve answered {r.status_code}: {mask_secrets(detail)}")


def _json(r: httpx.Response) -> dict:
    try:
        got = r.json()
        return got if isinstance(got, dict) else {}
    except ValueError:
        return {}


def _detail(r: httpx.Response) -> str:
    d = _json(r).get("detail")
    if isinstance(d, list):  # validation errors
        return "; ".join(f"{e.get('msg')} @ {'.'.join(str(x) for x in e.get('loc', []))}" for e in d if isinstance(e, dict))
    return str(d) if d is not None else (r.text[:200] or r.reason_phrase)


class RemoteTransaction:
    """A part's reads and writes of its own state, committed together through the service.

    The job's state is held for this client while the transaction lasts; at the
    commit, the service also checks that every key read is as it was read."""

    def __init__(self, store: ServiceStore, tx: str) -> None:
        self._s = store
        self._tx = tx
        self._read: dict[str, tuple[Any, str]] = {}
        self._writes: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        if key in self._writes:
            return copy.deepcopy(self._writes[key])
        if key not in self._read:
            got = self._s.client.call("POST", f"{self._s.path}/transactions/{self._tx}/get", {"key": key})
            self._read[key] = (got["value"] if got["found"] else None, got["digest"])
        value = self._read[key][0]
        return default if value is None else copy.deepcopy(value)

    def set(self, key: str, value: Any) -> None:
        json.dumps(value, allow_nan=False)  # refused here, as a local store refuses it
        self._writes[key] = copy.deepcopy(value)

    def identity(self) -> dict[str, Any] | None:
        return self._s.identity()

    def _not_here(self, what: str) -> StoreError:
        return StoreError(f"{self._s.location}: {what} goes through the service's trial steps, not a part's transaction")

    def set_identity(self, identity: dict[str, Any]) -> None:
        raise self._not_here("recording the identity")

    def add_try(self, record: TryRecord) -> int:
        raise self._not_here("storing a try")

    def tries_of(self, recurrence: int) -> list[tuple[int, bool]]:
        raise self._not_here("reading a recurrence's tries")

    def clear(self) -> None:
        raise self._not_here("clearing the job")

    def commit(self) -> None:
        """Raises :class:`TransactionConflict` when a read is out of date or the hold is gone (nothing written)."""
        self._s.client.call(
            "POST",
            f"{self._s.path}/transactions/{self._tx}/commit",
            {
                "client": self._s.client_id,
                "request": _new_id(),
                "reads": {k: digest for k, (_, digest) in self._read.items()},
                "set": self._writes,
            },
        )


class ServiceStore:
    """The job ``job``'s store behind ``zeus serve`` at ``location`` (see the module docstring)."""

    def __init__(self, location: str, job: str | None, timeout_s: float = 60.0) -> None:
        self.location = mask_secrets(location)
        if not job:
            raise StoreError(f"job.store {self.location}: zeus serve holds many jobs, and no job name was given")
        self.job = job
        self.client = ServiceClient(location, timeout_s)
        self.client_id = _new_id()
        self.path = f"/v1/jobs/{quote(job, safe='')}"
        try:
            # Opening is quick to say the service is not there (a run retries for retry_s once it has begun).
            about = self.client.call("GET", "/v1", retry_s=min(self.client.retry_s, OPEN_RETRY_S))
            if about.get("service") != "zeus" or about.get("api") != 1:
                raise StoreError(f"job.store {self.location}: not a zeus serve endpoint of API 1 (it says {about!r:.200})")
            got = self.client.call("GET", self.path)
        except BaseException:
            self.client.close()
            raise
        written = bool(got.get("tries") or got.get("identity") or got.get("next_recurrence", 1) > 1)
        self.info = StoreInfo(1 if written else 0, got.get("identity"), int(got.get("tries", 0)))

    # -- JobStore --

    @contextmanager
    def transaction(self) -> Iterator[RemoteTransaction]:
        opened = self.client.call("POST", f"{self.path}/transactions", {"client": self.client_id})
        tx = RemoteTransaction(self, opened["transaction"])
        try:
            yield tx
        except BaseException:
            try:
                self.client.call("DELETE", f"{self.path}/transactions/{opened['transaction']}")
            except StoreError:
                pass  # the lease ends it anyway
            raise
        tx.commit()

    def get(self, key: str, default: Any = None) -> Any:
        got = self.client.call("GET", f"{self.path}/state/{quote(key, safe='')}")
        return got["value"] if got["found"] else default

    def identity(self) -> dict[str, Any] | None:
        return self.client.call("GET", self.path).get("identity")

    def state_items(self) -> dict[str, Any]:
        return self.client.call("GET", f"{self.path}/state").get("items", {})

    def tries(self) -> list[TryRecord]:
        return [TryRecord(**t) for t in self.client.call("GET", f"{self.path}/history")["tries"]]

    def clear(self) -> None:
        self.client.call("POST", f"{self.path}/clear", {"client": self.client_id, "request": _new_id()})

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> ServiceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ServesHistory --

    def history_service(self, setup: HistorySetup, power_policy: Any = None) -> RemoteTrials:
        return RemoteTrials(self, setup, power_policy)


class RemoteTrials:
    """A job's tries kept by the service (a :class:`~zeus_core.engine.history.HistoryService`); the power policy
    runs here, and what it learns is merged here onto the committed state (409: merge again)."""

    def __init__(self, store: ServiceStore, setup: HistorySetup, power_policy: Any = None) -> None:
        self.store = store
        self.setup = setup
        self.power = power_policy
        self.fresh = setup.fresh
        self.registered = False
        #: open recurrences whose runners (on this machine) are gone, with why: abandoned before the next begins
        self._gone: dict[int, str] = {}
        #: (recurrence, try) -> (committed power state, its digest) when the trial was given
        self._committed: dict[tuple[int, int], tuple[Any, str]] = {}

    def _register(self) -> None:
        setup = self.setup.to_json()
        setup["fresh"] = self.fresh
        got = self.store.client.call("POST", f"{self.store.path}/sessions", {"client": self.store.client_id, "setup": setup})
        self.registered = True
        # Open recurrences of runners of this machine that are gone: recorded as abandoned before the next
        # recurrence begins (not now: a step this one interrupted is retried first, as it was sent).
        for rec, entry in (got.get("open") or {}).items():
            why = gone_reason(entry.get("owner") if isinstance(entry, dict) else None)
            if why is not None:
                self._gone[int(rec)] = why

    def _step(self, what: str, body: dict, retry_s: float | None = None) -> dict:
        body = {"session": self.store.client_id, "request": _new_id(), **body}
        forgotten = 0
        while True:
            if not self.registered:
                self._register()
            try:
                return self.store.client.call("POST", f"{self.store.path}/{what}", body, retry_s=retry_s)
            except _UnknownSession:
                self.registered = False  # the service restarted: describe the job again, same request
                forgotten += 1
                if forgotten >= 100:
                    raise StoreUnavailable(
                        f"{self.store.location}: zeus serve forgot this client's session 100 times in a row; is it restarting in a loop?"
                    ) from None
                time.sleep(min(0.05 * forgotten, 1.0))

    def begin_recurrence(self) -> int:
        while self._gone:
            rec, why = self._gone.popitem()
            self._step("abandon", {"recurrence": rec, "reason": why})
        # --fresh --wait: a start over the service refuses while other runners hold open recurrences is asked again
        got = claim_waiting(self.store.location, lambda: self._step("recurrences", {"owner": this_process()}), self.setup.wait)
        self.fresh = False  # the first write is done
        return int(got["recurrence"])

    def abandon(self, recurrence: int, reason: str) -> bool:
        """Record ``recurrence`` as abandoned (a run that stops: waits at most CLOSING_RETRY_S for the service)."""
        got = self._step(
            "abandon", {"recurrence": int(recurrence), "reason": str(reason)[:500]}, retry_s=min(self.store.client.retry_s, CLOSING_RETRY_S)
        )
        return bool(got.get("abandoned"))

    def next_try(self, recurrence: int, try_index: int) -> TryPlan:
        got = self._step("trials", {"recurrence": recurrence, "try_index": try_index})
        committed = got["power_state"]
        base = None
        if self.power is not None:
            if committed is not None:
                self.power.set_state(committed)
            base = copy.deepcopy(self.power.get_state())
        self._committed = {(recurrence, try_index): (committed, got["power_digest"])}
        s = self.setup
        min_cost = math.inf if got["min_cost"] is None else float(got["min_cost"])
        ctx = PolicyContext(
            job=s.job,
            recurrence=recurrence,
            try_index=try_index,
            min_cost=min_cost,
            batch_sizes=None if s.batch_sizes is None else list(s.batch_sizes),
            default_batch_size=s.default_batch_size,
            max_power_w=s.max_power_w,
        )
        bound = math.inf if got["cost_bound"] is None else float(got["cost_bound"])
        return TryPlan(recurrence, try_index, int(got["batch_size"]), bound, ctx, base)

    def record(self, plan: TryPlan, record: TryRecord, recurrence_cost: float | None = None) -> None:
        min_cost = plan.context.min_cost
        body: dict[str, Any] = {
            "trial": {
                "recurrence": plan.recurrence,
                "try_index": plan.try_index,
                "batch_size": plan.batch_size,
                "min_cost": None if not math.isfinite(min_cost) else min_cost,
            },
            "record": _record_json(record),
            "recurrence_cost": recurrence_cost,
        }
        power, mine, merged = self.power, None, None
        if power is not None:
            mine = power.get_state()
        changed = mine is not None and mine != plan.power_base
        theirs, digest = self._committed.get((plan.recurrence, plan.try_index), (None, None))
        for attempt in range(1, 1001):
            if changed:
                merged = merge_power_state(plan.power_base, mine, theirs)
                body["power"] = {"state": merged, "expected": digest}
            try:
                self._step("results", body)
                break
            except _Conflict as c:  # another runner committed its power choices meanwhile: merge onto them
                theirs, digest = c.body["power_state"], c.body["power_digest"]
                time.sleep(min(0.005 * attempt, 0.2) * random.uniform(0.5, 1.5))
        else:
            raise TransactionConflict(f"{self.store.location}: the power state changed under this client 1000 times in a row; try again")
        if changed and merged is not mine:
            power.set_state(merged)

    def history(self) -> list[TryRecord]:
        return self.store.tries()

    def close(self) -> None:
        pass


def _record_json(r: TryRecord) -> dict:
    return {
        "recurrence": r.recurrence,
        "try_index": r.try_index,
        "batch_size": int(r.batch_size),
        "power_limit": None if r.power_limit is None else float(r.power_limit),
        "epochs": int(r.epochs),
        "time_s": float(r.time_s),
        "energy_j": float(r.energy_j),
        "cost": float(r.cost),
        "reached": bool(r.reached),
        "stopped": r.stopped,
        "extra": r.extra,
        "steady_cost": None if r.steady_cost is None else float(r.steady_cost),
    }

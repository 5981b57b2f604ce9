"""The client of ``zeus serve``: a job store at ``http://host:port`` that serves trials.

``job.store = "http://127.0.0.1:8020"`` (or ``https://``) makes the job's store
the service: :class:`ServiceStore` is a :class:`~zeus_core.engine.stores.protocol.JobStore` (reads of
the job's history and state; transactions over a part's own state) and a
:class:`~zeus_core.engine.remote.ServesHistory`, whose :class:`RemoteTrials` is what
``zeus run`` (and a script's optimizer) uses instead of the local
:class:`~zeus_core.engine.history.History`: the service runs the batch-size policy, this
process trains and runs the power policy.

The token: ``ZEUS_SERVE_TOKEN`` in the environment (or the URL's password,
``http://:TOKEN@host:8020``, masked in every message). ``?retry_s=60``: how long
a request is retried while the service cannot be reached (restarting, say);
every step carries a request id, so a retried step is applied once.
"""

from __future__ import annotations

import copy
import json
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

from zeus_core import PolicyContext, TryRecord
from zeus_core.engine.history import TryPlan, merge_power_state
from zeus_core.engine.remote import HistorySetup
from zeus_core.engine.stores.locations import mask, parse_url
from zeus_core.engine.stores.protocol import StoreError, StoreInfo, StoreUnavailable

_RETRY_STATUS = {502, 503, 504}
#: How long opening the store waits for a service that does not answer.
OPEN_RETRY_S = 10.0


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
    retry = dict(query).get("retry_s", "60")
    try:
        retry_s = float(retry)
        if not 0 <= retry_s <= 86400:
            raise ValueError
    except ValueError:
        raise StoreError(f"job.store {mask(location)}: retry_s must be a number of seconds in 0..86400") from None
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
        self.location = mask(location)
        self.base, url_token, self.retry_s = split_url(location)
        token = url_token or os.environ.get("ZEUS_SERVE_TOKEN") or None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        transport = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        self.http = httpx.Client(base_url=self.base, headers=headers, transport=transport,
                                 timeout=httpx.Timeout(connect=5.0, read=timeout_s + 60.0, write=30.0, pool=30.0))

    def close(self) -> None:
        self.http.close()

    def call(self, method: str, path: str, body: Any = None, retry_s: float | None = None) -> dict:
        """The JSON answer of a 2xx; retries connection failures and 502/503/504 for retry_s."""
        retry_s = self.retry_s if retry_s is None else retry_s
        content = None
        if body is not None:
            try:
                content = json.dumps(body, allow_nan=False)
            except ValueError as e:
                raise StoreError(f"{self.location}: cannot send a value that is not a finite number ({e})") from None
        deadline = time.monotonic() + retry_s
        delay = 0.05
        while True:
            why = None
            try:
                r = self.http.request(method, path, content=content,
                                      headers={"Content-Type": "application/json"} if content is not None else None)
            except httpx.TransportError as e:
                why = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            else:
                if r.status_code not in _RETRY_STATUS:
                    return self._answer(r)
                why = f"HTTP {r.status_code}: {_detail(r)}"
            if time.monotonic() + delay > deadline:
                raise StoreUnavailable(
                    f"{self.location}: zeus serve did not answer for {retry_s:g} s ({mask(why)}). Start it again "
                    "(what was committed is kept in its store) and run the job again, or raise ?retry_s="
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
            raise StoreError(f"{self.location}: zeus serve refused the token ({detail}). Set ZEUS_SERVE_TOKEN to the "
                             "service's token (or put it in the URL as http://:TOKEN@host:port)")
        body = _json(r)
        if r.status_code == 404 and body.get("code") == "unknown_session":
            raise _UnknownSession()
        if r.status_code == 409 and "power_state" in body:
            raise _Conflict(body)
        if r.status_code == 404:
            raise StoreError(f"{self.location}: not a zeus serve endpoint ({r.request.method} {r.request.url.path}: 404)")
        raise StoreError(f"{self.location}: zeus serve answered {r.status_code}: {mask(detail)}")


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

    def clear(self) -> None:
        raise self._not_here("clearing the job")

    def commit(self) -> None:
        self._s.client.call("POST", f"{self._s.path}/transactions/{self._tx}/commit", {
            "client": self._s.client_id, "request": _new_id(),
            "reads": {k: digest for k, (_, digest) in self._read.items()}, "set": self._writes,
        })


class ServiceStore:
    """The job ``job``'s store behind ``zeus serve`` at ``location`` (see the module docstring)."""

    def __init__(self, location: str, job: str | None, timeout_s: float = 60.0) -> None:
        self.location = mask(location)
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

    # -- ServesHistory --

    def history_service(self, setup: HistorySetup, power_policy: Any = None) -> RemoteTrials:
        return RemoteTrials(self, setup, power_policy)


class RemoteTrials:
    """A job's trials kept by the service (a :class:`~zeus_core.engine.history.HistoryService`); the power policy
    runs here, and what it learns is merged here onto the committed state (409: merge again)."""

    def __init__(self, store: ServiceStore, setup: HistorySetup, power_policy: Any = None) -> None:
        self.store = store
        self.setup = setup
        self.power = power_policy
        self.fresh = setup.fresh
        self.registered = False
        #: (recurrence, try) -> (committed power state, its digest) when the trial was given
        self._committed: dict[tuple[int, int], tuple[Any, str]] = {}

    def _register(self) -> None:
        setup = self.setup.to_json()
        setup["fresh"] = self.fresh
        self.store.client.call("POST", f"{self.store.path}/sessions", {"client": self.store.client_id, "setup": setup})
        self.registered = True

    def _step(self, what: str, body: dict) -> dict:
        body = {"session": self.store.client_id, "request": _new_id(), **body}
        for _ in range(3):
            if not self.registered:
                self._register()
            try:
                return self.store.client.call("POST", f"{self.store.path}/{what}", body)
            except _UnknownSession:
                self.registered = False  # the service restarted: describe the job again, same request
        raise StoreUnavailable(f"{self.store.location}: zeus serve keeps forgetting this client's session; is it restarting?")

    def begin_recurrence(self) -> int:
        got = self._step("recurrences", {})
        self.fresh = False  # the first write is done
        return int(got["recurrence"])

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
        ctx = PolicyContext(job=s.job, recurrence=recurrence, try_index=try_index, min_cost=min_cost,
                            batch_sizes=None if s.batch_sizes is None else list(s.batch_sizes),
                            default_batch_size=s.default_batch_size, max_power_w=s.max_power_w)
        bound = math.inf if got["cost_bound"] is None else float(got["cost_bound"])
        return TryPlan(recurrence, try_index, int(got["batch_size"]), bound, ctx, base)

    def record(self, trial: TryPlan, record: TryRecord, recurrence_cost: float | None = None) -> None:
        min_cost = trial.context.min_cost
        body: dict[str, Any] = {
            "trial": {"recurrence": trial.recurrence, "try_index": trial.try_index, "batch_size": trial.batch_size,
                      "min_cost": None if not math.isfinite(min_cost) else min_cost},
            "record": _record_json(record),
            "recurrence_cost": recurrence_cost,
        }
        power, mine, merged = self.power, None, None
        if power is not None:
            mine = power.get_state()
        changed = mine is not None and mine != trial.power_base
        theirs, digest = self._committed.get((trial.recurrence, trial.try_index), (None, None))
        for _ in range(20):
            if changed:
                merged = merge_power_state(trial.power_base, mine, theirs)
                body["power"] = {"state": merged, "expected": digest}
            try:
                self._step("results", body)
                break
            except _Conflict as c:  # another runner committed its power choices meanwhile: merge onto them
                theirs, digest = c.body["power_state"], c.body["power_digest"]
        else:
            raise StoreError(f"{self.store.location}: the power state kept changing under this client; try again")
        if changed and merged is not mine:
            power.set_state(merged)

    def history(self) -> list[TryRecord]:
        return self.store.tries()

    def close(self) -> None:
        pass


def _record_json(r: TryRecord) -> dict:
    return {
        "recurrence": r.recurrence, "try_index": r.try_index, "batch_size": int(r.batch_size),
        "power_limit": None if r.power_limit is None else float(r.power_limit), "epochs": int(r.epochs),
        "time_s": float(r.time_s), "energy_j": float(r.energy_j), "cost": float(r.cost), "reached": bool(r.reached),
        "stopped": r.stopped, "extra": r.extra, "steady_cost": None if r.steady_cost is None else float(r.steady_cost),
    }

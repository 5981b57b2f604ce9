"""The serve fault run: many ``zeus run`` clients of one job through ``zeus serve`` over PostgreSQL,
while the service is SIGKILLed and restarted and the database is stopped for longer than the
service's lease. What was recorded is then read back and set against what was begun.

    with PgServer.start_new() as pg:
        report = fault_run(pg, workdir, clients=8, recurrences=20, kills=6, outages=2)
    report.lines()      # exit codes, begun / recorded / abandoned / open, anything doubled

Used by ``tests/zeus_plugins_serve/test_serve_faults.py`` (a few clients, a few faults) and
``benchmarks/serve_faults.py`` (the issue's full run). Everything runs on loopback.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import attrs
import httpx
from cluster_helpers import run_job
from pg_server import PgServer
from serve_helpers import Serve

TOKEN = "serve-faults-token-0123456789"
JOB = "zeus-cifar100"


@attrs.define
class FaultReport:
    """What the fault run left: each client's exit status (and its stderr's end), and the job's
    account read back from the database."""

    exits: list[int]
    errors: list[str]
    begun: int
    recorded: int  # recurrences with a try that reached the target
    abandoned: dict[int, dict]
    open: dict[int, dict]
    doubled: list[tuple[int, int]]  # (recurrence, try) stored more than once
    reached_twice: list[int]
    faults: list[str]
    seconds: float
    service_log: str

    @property
    def whole(self) -> bool:
        """Every client exit 0, every begun recurrence recorded exactly once, nothing doubled."""
        return (
            all(c == 0 for c in self.exits)
            and self.recorded == self.begun
            and not self.abandoned
            and not self.open
            and not self.doubled
            and not self.reached_twice
        )

    def lines(self) -> list[str]:
        return [
            f"faults: {', '.join(self.faults)}",
            f"clients: {len(self.exits)}, exit codes {sorted(self.exits)}",
            f"recurrences: begun {self.begun}, recorded {self.recorded}, abandoned {len(self.abandoned)}, open {len(self.open)}",
            f"tries stored twice: {len(self.doubled)}; recurrences that reached the target twice: {len(self.reached_twice)}",
            f"wall time: {self.seconds:.0f} s",
        ]


def _taken(url: str) -> int:
    try:
        r = httpx.get(f"{url}/v1/jobs/{JOB}", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)
        return r.json()["next_recurrence"] - 1 if r.status_code == 200 else -1
    except (httpx.HTTPError, ValueError, KeyError):
        return -1


def fault_run(
    pg: PgServer,
    workdir: Path,
    *,
    clients: int = 3,
    recurrences: int = 5,
    kills: int = 2,
    outages: int = 1,
    outage_s: float = 3.0,
    lease_s: float = 1.0,
    timeout_s: float = 900.0,
) -> FaultReport:
    """Run ``clients`` x ``recurrences`` of the CIFAR-100 trace job (MAB + JIT) against one ``zeus serve``
    (``--lease-s lease_s``) over a new database of ``pg``, with ``kills`` SIGKILL + restarts of the service
    and ``outages`` stops of the database for ``outage_s`` seconds, spread evenly over the recurrences."""
    from zeus_core.engine.history import ledger
    from zeus_core.engine.registry import get_registry
    from zeus_core.engine.stores.locations import open_store

    url = pg.url(pg.create_database())
    total = clients * recurrences
    # each kind of fault spread evenly over the recurrences to be taken
    events = sorted(
        [((i + 1) / (kills + 1), "kill") for i in range(kills)] + [((j + 1) / (outages + 1) + 1e-6, "outage") for j in range(outages)]
    )
    schedule = [(max(1, int(at * total)), kind) for at, kind in events]
    env = {**os.environ, "ZEUS_SERVE_TOKEN": TOKEN}
    start = time.monotonic()
    done_faults: list[str] = []
    svc = Serve(url, token=TOKEN, args=("--lease-s", str(lease_s))).start()
    procs = []
    try:
        procs = [run_job(svc.url, recurrences, workdir, env=env) for _ in range(clients)]
        for threshold, kind in schedule:
            while _taken(svc.url) < threshold and any(p.poll() is None for p in procs):
                assert time.monotonic() - start < timeout_s, "the fault run took too long"
                time.sleep(0.1)
            if all(p.poll() is not None for p in procs):
                break
            if kind == "kill":
                svc.kill()  # SIGKILL: answers in flight are lost, uncommitted transactions roll back
                time.sleep(0.3)
                svc.start()
                done_faults.append(f"service SIGKILLed at {threshold} recurrences")
            else:
                # Connections cut, the server gone for longer than the lease. ("fast", not "immediate": the test
                # server runs without fsync and synchronous_commit, so a crash of it would lose commits it confirmed.)
                pg.stop("fast")
                time.sleep(outage_s)
                pg.start()
                pg.wait_until_up()
                done_faults.append(f"database down {outage_s:g} s (lease {lease_s:g} s) at {threshold} recurrences")
        exits, errors = [], []
        for p in procs:
            out, err = p.communicate(timeout=max(10.0, timeout_s - (time.monotonic() - start)))
            exits.append(p.returncode)
            errors.append(err[-3000:])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
        svc.stop()
    log = svc.log.read_text() if svc.log.exists() else ""
    svc.log.unlink(missing_ok=True)
    with open_store(url, get_registry(), job=JOB) as store:
        tries = store.tries()
        account = ledger(store)
    seen: dict[tuple[int, int], int] = {}
    reached: dict[int, int] = {}
    for t in tries:
        seen[(t.recurrence, t.try_index)] = seen.get((t.recurrence, t.try_index), 0) + 1
        reached[t.recurrence] = reached.get(t.recurrence, 0) + int(t.reached)
    return FaultReport(
        exits=exits,
        errors=errors,
        begun=account.begun,
        recorded=sum(1 for n in reached.values() if n >= 1),
        abandoned=account.abandoned,
        open=account.open,
        doubled=sorted(k for k, n in seen.items() if n > 1),
        reached_twice=sorted(r for r, n in reached.items() if n > 1),
        faults=done_faults,
        seconds=time.monotonic() - start,
        service_log=log,
    )

"""``zeus serve`` under load: requests per second and latency of next-trial + report, 1/16/64 clients on loopback.

A ``zeus serve`` is started here (over a folder of SQLite files, its default, or
``--postgres`` over a PostgreSQL server started here). Each client registers a
session for a job (the ``fixed`` batch-size policy, so that the figures are the
service's and its store's, not a policy's arithmetic), then for ``--seconds``
repeats a recurrence: begin it, ask for the next trial, report its result,
exactly the three steps ``zeus run`` sends per try. Latency is measured per
request (next-trial and report); requests per second count those two over the
measured window. Clients are threads in up to 8 processes, all on the same 2
cores as the service.

Two layouts: every client on one job (the service serialises one job's steps:
the worst case), and one job per client (``--jobs per-client``, as many jobs of
a cluster would be).

Figures are also ratios to one client measured in the same run; configurations
alternate over ``--rounds`` and the figures are medians.

    python benchmarks/serve_load.py [--clients 1,16,64] [--seconds 5] [--rounds 2] [--jobs shared,per-client] [--postgres]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "_support"))
TOKEN = "serve-load-benchmark-token-0123"


def _setup(job: str) -> dict:
    return {
        "job": {"name": job, "eta_knob": 0.5, "beta_knob": 2.0, "target_metric": 0.6, "max_epochs": 100},
        "identity": {
            "job": {"eta_knob": 0.5, "beta_knob": 2.0, "target_metric": 0.6, "higher_is_better": True, "max_epochs": 100, "processes": 1},
            "batch_size": {"plugin": "fixed", "default": 256},
        },
        "batch_size": {"plugin": "fixed", "default": 256},
        "max_power_w": 300.0,
        "batch_sizes": [64, 128, 256, 512, 1024],
        "default_batch_size": 256,
    }


def client_thread(url: str, job: str, ready: threading.Barrier, go: threading.Event, end: list, out: list) -> None:
    import httpx

    c = httpx.Client(
        base_url=url,
        headers={"Authorization": f"Bearer {TOKEN}"},
        transport=httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]),
        timeout=120,
    )
    me = uuid.uuid4().hex
    c.post(f"/v1/jobs/{job}/sessions", json={"client": me, "setup": _setup(job)}).raise_for_status()
    ready.wait()
    go.wait()
    trial_ms, report_ms = [], []
    while time.time() < end[0]:
        rec = c.post(f"/v1/jobs/{job}/recurrences", json={"session": me, "request": uuid.uuid4().hex}).json()["recurrence"]
        t0 = time.perf_counter()
        r = c.post(f"/v1/jobs/{job}/trials", json={"session": me, "request": uuid.uuid4().hex, "recurrence": rec, "try_index": 1})
        t1 = time.perf_counter()
        t = r.json()
        record = {
            "recurrence": rec,
            "try_index": 1,
            "batch_size": t["batch_size"],
            "power_limit": 250.0,
            "epochs": 20,
            "time_s": 300.0,
            "energy_j": 60000.0,
            "cost": 52000.0,
            "reached": True,
        }
        c.post(
            f"/v1/jobs/{job}/results",
            json={
                "session": me,
                "request": uuid.uuid4().hex,
                "recurrence_cost": 52000.0,
                "trial": {"recurrence": rec, "try_index": 1, "batch_size": t["batch_size"], "min_cost": t["min_cost"]},
                "record": record,
            },
        ).raise_for_status()
        t2 = time.perf_counter()
        if time.time() <= end[0]:
            trial_ms.append((t1 - t0) * 1000)
            report_ms.append((t2 - t1) * 1000)
    out.append({"trial_ms": trial_ms, "report_ms": report_ms})


def worker(url: str, threads: int, jobs: list[str]) -> None:
    """``threads`` clients; 'ready' once registered; then 'go END' on stdin; prints their latencies."""
    ready = threading.Barrier(threads + 1)
    go = threading.Event()
    end = [0.0]
    out: list = []
    ts = [threading.Thread(target=client_thread, args=(url, jobs[i % len(jobs)], ready, go, end, out)) for i in range(threads)]
    for t in ts:
        t.start()
    ready.wait()
    print("ready", flush=True)
    end[0] = float(sys.stdin.readline().split()[1])
    go.set()
    for t in ts:
        t.join()
    print(json.dumps(out), flush=True)


def run_config(url: str, clients: int, per_client_jobs: bool, seconds: float, tag: str) -> dict:
    procs = min(clients, 8)
    jobs = [f"load-{tag}-{i}" for i in range(clients)] if per_client_jobs else [f"load-{tag}"]
    ps = []
    for p in range(procs):
        mine = [j for i, j in enumerate(jobs) if i % procs == p] or jobs
        n = clients // procs + (1 if p < clients % procs else 0)
        ps.append(
            subprocess.Popen(
                [sys.executable, __file__, "--worker", url, str(n), ",".join(mine)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for p in ps:
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError(p.stderr.read())
    end = time.time() + 0.5 + seconds
    start = end - seconds
    for p in ps:
        p.stdin.write(f"go {end}\n")
        p.stdin.flush()
    trial, report = [], []
    for p in ps:
        out, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError(err[-2000:])
        for r in json.loads(out.strip().splitlines()[-1]):
            trial += r["trial_ms"]
            report += r["report_ms"]
    both = sorted(trial + report)

    def pct(q: float) -> float:
        return both[min(len(both) - 1, int(q * len(both)))] if both else float("nan")

    return {
        "requests_per_s": len(both) / (end - max(start, 0)),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "trial_p50_ms": statistics.median(trial) if trial else float("nan"),
        "report_p50_ms": statistics.median(report) if report else float("nan"),
        "requests": len(both),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", default="1,16,64")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--jobs", default="shared,per-client")
    ap.add_argument("--postgres", action="store_true", help="serve over a PostgreSQL server started here")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]), args.worker[2].split(","))
        return

    from serve_helpers import Serve

    pg = None
    if args.postgres:
        from pg_server import PgServer

        pg = PgServer.start_new()
        store = pg.url(pg.create_database())
    else:
        store = tempfile.mkdtemp(prefix="zeus-bench-serve-")
    clients = [int(x) for x in args.clients.split(",")]
    layouts = args.jobs.split(",")
    rows: dict[tuple[str, int], list[dict]] = {}
    try:
        with Serve(store, token=TOKEN) as svc:
            for rnd in range(args.rounds):
                for layout in layouts:
                    for n in clients:
                        got = run_config(svc.url, n, layout == "per-client", args.seconds, f"{rnd}-{layout}-{n}")
                        rows.setdefault((layout, n), []).append(got)
                        print(
                            f"round {rnd + 1} {layout:10s} x{n:<3d} {got['requests_per_s']:8.1f} req/s  "
                            f"p50 {got['p50_ms']:6.2f} ms  p99 {got['p99_ms']:7.2f} ms",
                            file=sys.stderr,
                            flush=True,
                        )
    finally:
        if pg is not None:
            pg.remove()
    backend = "PostgreSQL" if args.postgres else "SQLite files"
    print(
        f"\nzeus serve over {backend}: next-trial + report, {args.seconds:g} s per configuration, median of "
        f"{args.rounds} rounds; ratios to 1 client of the same layout in this run\n"
    )
    print(f"{'jobs':10s} {'clients':>7s} {'req/s':>8s} {'ratio':>6s} {'p50 ms':>7s} {'ratio':>6s} {'p99 ms':>7s} {'ratio':>6s}")
    for (layout, n), got in rows.items():
        med = {k: statistics.median(g[k] for g in got) for k in ("requests_per_s", "p50_ms", "p99_ms")}
        base = rows.get((layout, 1))
        b = {k: statistics.median(g[k] for g in base) for k in med} if base else None

        def ratio(k: str, med: dict[str, float] = med, b: dict[str, float] | None = b) -> str:
            return f"{med[k] / b[k]:5.2f}x" if b else "     -"

        print(
            f"{layout:10s} {n:7d} {med['requests_per_s']:8.1f} {ratio('requests_per_s')} {med['p50_ms']:7.2f} "
            f"{ratio('p50_ms')} {med['p99_ms']:7.2f} {ratio('p99_ms')}"
        )
    if args.json:
        args.json.write_text(json.dumps({f"{layout}x{n}": got for (layout, n), got in rows.items()}, indent=1))


if __name__ == "__main__":
    main()

"""Recurrences per second of one recurring job with its history in SQLite, PostgreSQL, or behind ``zeus serve``.

The workload is the trace replay of Zeus NSDI'23 CIFAR-100 (``examples/zeus_nsdi23/cifar100.toml``:
MAB batch sizes, JIT power limits, simulated in memory), so a recurrence costs
little besides its store: every try is three to six transactions (recurrence
number, trial, result, the trace's random generator), concurrent runners of the
job serialised by the store. N processes run the same job at once (1, 4, 16),
each ``--recurrences`` recurrences, started together after their imports and
store opening; the figure is all their recurrences over the time from the
start to the last one's end.

* ``sqlite``: a SQLite file (WAL, ``synchronous = NORMAL``);
* ``postgres``: a PostgreSQL server started here on loopback
  (``synchronous_commit = off``, fsync on: like SQLite's NORMAL, a crash loses
  at most the last commits and never corrupts);
* ``serve``: ``zeus serve`` started here, in front of that PostgreSQL server
  (one more process and an HTTP round trip per step, on the same 2 cores).

Every figure is also given as a ratio to SQLite with one process measured in
the same run; configurations alternate over ``--rounds`` and the figures are
medians, so load from other processes on the machine falls on all alike.

    python benchmarks/store_backends.py [--recurrences 50] [--procs 1,4,16] [--rounds 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "_support"))
JOB = REPO / "examples" / "zeus_nsdi23" / "cifar100.toml"
#: Plugins this job does not use: not loaded by the workers.
UNUSED = "perseus,hetero,torch,nvml,cpu,prometheus"


def worker(store: str, recurrences: int) -> None:
    """One runner: build the job against ``store``, say ready, wait for 'go', run, report its times."""
    from rich.console import Console

    from zeus_core.engine.registry import get_registry
    from zeus_core.engine.runner import Runner
    from zeus_core.engine.validation import load_job

    reg = get_registry()
    spec = load_job(JOB, reg, [f"job.recurrences={recurrences}", f'job.store="{store}"'])
    runner = Runner(spec, reg, Console(file=open(os.devnull, "w")))
    runner.build()
    print("ready", flush=True)
    sys.stdin.readline()
    t0 = time.time()
    rec = runner.trials  # the loop of Runner.run without its end-of-job report
    for _ in range(recurrences):
        runner.run_recurrence()
    t1 = time.time()
    runner.close()
    print(json.dumps({"t0": t0, "t1": t1, "n": recurrences, "kind": type(rec).__name__}), flush=True)


def run_config(store: str, procs: int, recurrences: int) -> dict:
    env = {**os.environ, "ZEUS_DISABLED_PLUGINS": UNUSED}
    ps = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", store, str(recurrences)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(procs)
    ]
    for p in ps:
        line = p.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"worker failed: {line}{p.stderr.read()}")
    for p in ps:
        p.stdin.write("go\n")
        p.stdin.flush()
    results = []
    for p in ps:
        out, err = p.communicate(timeout=1800)
        if p.returncode != 0:
            raise RuntimeError(f"worker failed ({p.returncode}): {err[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    wall = max(r["t1"] for r in results) - min(r["t0"] for r in results)
    n = sum(r["n"] for r in results)
    return {"recurrences": n, "wall_s": wall, "per_s": n / wall, "trials": results[0]["kind"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recurrences", type=int, default=50, help="recurrences per process")
    ap.add_argument("--procs", default="1,4,16", help="concurrent processes, comma-separated")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--backends", default="sqlite,postgres,serve")
    ap.add_argument("--json", type=Path, help="write every measurement here")
    ap.add_argument("--worker", nargs=2, metavar=("STORE", "RECURRENCES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]))
        return

    from pg_server import PgServer
    from serve_helpers import Serve

    procs = [int(x) for x in args.procs.split(",")]
    backends = args.backends.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="zeus-bench-stores-"))
    pg = PgServer.start_new() if {"postgres", "serve"} & set(backends) else None
    if pg is not None:  # durable as SQLite's NORMAL: fsync on, commits not waited for
        pg.stop()
        opts = f"-p {pg.port} -k {pg.root} -c listen_addresses=127.0.0.1 -c synchronous_commit=off -c max_connections=300"
        pg._run(__import__("pg_server").find_bin("pg_ctl"), "-D", str(pg.data), "-l", str(pg.log), "-w", "-o", opts, "start")
    rows: dict[tuple[str, int], list[dict]] = {}
    counter = 0
    try:
        for rnd in range(args.rounds):
            for backend in backends:
                for n in procs:
                    counter += 1
                    if backend == "sqlite":
                        got = run_config(str(tmp / f"job{counter}.sqlite"), n, args.recurrences)
                    elif backend == "postgres":
                        got = run_config(pg.url(pg.create_database()), n, args.recurrences)
                    else:
                        with Serve(pg.url(pg.create_database())) as svc:
                            got = run_config(svc.url, n, args.recurrences)
                    rows.setdefault((backend, n), []).append(got)
                    print(
                        f"round {rnd + 1} {backend:8s} x{n:<3d} {got['per_s']:8.1f} recurrences/s "
                        f"({got['recurrences']} in {got['wall_s']:.2f} s)",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        if pg is not None:
            pg.remove()
    base = statistics.median(r["per_s"] for r in rows[("sqlite", 1)]) if ("sqlite", 1) in rows else None
    print(
        f"\nrecurrences per second, trace workload (cifar100, MAB + JIT), {args.recurrences} recurrences per process, "
        f"median of {args.rounds} rounds; ratio: to sqlite x1 in this run\n"
    )
    print(f"{'backend':10s} {'procs':>5s} {'rec/s':>9s} {'ratio':>7s}")
    for (backend, n), got in rows.items():
        per_s = statistics.median(r["per_s"] for r in got)
        ratio = f"{per_s / base:6.2f}x" if base else "-"
        print(f"{backend:10s} {n:5d} {per_s:9.1f} {ratio:>7s}")
    if args.json:
        args.json.write_text(json.dumps({f"{b}x{n}": got for (b, n), got in rows.items()}, indent=1))


if __name__ == "__main__":
    main()

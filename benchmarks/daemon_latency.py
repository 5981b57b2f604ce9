"""What going through ``zeus daemon`` costs: set-power-limit latency and throughput, on the simulated driver.

The same client code (``NvmlGpus.set_power_limit``, alternating 250 and 300 W
so that every call changes the GPU) runs twice in this one run:

* **in-process**: the client may change the GPU itself (root; or, when this
  script does not run as root, a simulated driver that allows everyone);
* **daemon**: the client lacks the privilege (dropped to uid 65534 when this
  script runs as root) and goes through a ``zeus daemon`` started here.

It reports the round trip of one client (mean, p50, p99 per call) and the
requests per second of 8 clients at once (one simulated GPU each), each with
the daemon's figure as a ratio of the in-process one measured in the same run.
On real GPUs an NVML setter itself takes longer than the simulated one (a
small file write), so there the daemon's share of a call is smaller than here.

    python benchmarks/daemon_latency.py [--calls 400] [--clients 8] [--calls-per-client 200] [--rounds 3]

The rounds alternate the two paths, and the figures are medians over rounds,
so that load from other processes on the machine falls on both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOBODY = 65534
ZEUS = "import sys; from zeus_core.cli.main import main; main(sys.argv[1:])"


def client(args: argparse.Namespace) -> None:
    """One client process: ``--calls`` set_power_limit calls on GPU ``--gpu`` from ``--start`` on."""
    if args.drop:
        sys.path.insert(0, str(REPO / "tests" / "_support"))
        from run_unprivileged import drop, keep_import_path

        import zeus_plugins_nvml.device  # noqa: F401 - imported as root, see run_unprivileged

        keep_import_path()
        drop(NOBODY, NOBODY)
    from zeus_plugins_nvml.device import NvmlGpus
    from zeus_plugins_nvml.options import NvmlOptions

    dev = NvmlGpus(NvmlOptions(gpus=[args.gpu]))
    dev.set_power_limit(200)  # connect and journal before the clock starts
    while time.monotonic() < args.start:
        time.sleep(0.001)
    times = []
    t0 = time.monotonic()
    for i in range(args.calls):
        t = time.perf_counter()
        dev.set_power_limit(250 if i % 2 else 300)
        times.append(time.perf_counter() - t)
    t1 = time.monotonic()
    path = dev.control_paths[f"gpu{args.gpu}"]
    dev.close()
    pings = []
    if path == "daemon" and args.calls_ping:
        from zeus_core.daemon import DaemonClient, socket_path

        with DaemonClient(str(socket_path())) as c:
            c.call("ping")
            for _ in range(args.calls_ping):
                t = time.perf_counter()
                c.call("ping")
                pings.append(time.perf_counter() - t)
    print(json.dumps({"path": path, "times": times, "t0": t0, "t1": t1, "pings": pings}))


def run_clients(n: int, calls: int, env: dict, drop: bool, tmp: Path) -> list[dict]:
    start = time.monotonic() + 3.0 + 0.3 * n  # every client connected and waiting by then
    pings = calls if n == 1 else 0
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--client",
                "--gpu",
                str(i),
                "--calls",
                str(calls),
                "--calls-ping",
                str(pings),
                "--start",
                repr(start),
            ]
            + (["--drop"] if drop else []),
            env=env,
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(n)
    ]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"a client failed:\n{stderr}")
        out.append(json.loads(stdout.splitlines()[-1]))
    return out


def summary(rounds: list[list[dict]]) -> dict:
    """Median over rounds of each round's mean time per call and requests/s; percentiles pooled."""
    times = sorted(t for results in rounds for r in results for t in r["times"])
    means, rps = [], []
    for results in rounds:
        calls = [t for r in results for t in r["times"]]
        means.append(statistics.fmean(calls))
        rps.append(len(calls) / (max(r["t1"] for r in results) - min(r["t0"] for r in results)))
    pings = sorted(t for results in rounds for r in results for t in r["pings"])
    return {
        "ping_p50_us": pings[len(pings) // 2] * 1e6 if pings else None,
        "path": sorted({r["path"] for results in rounds for r in results}),
        "mean_us": statistics.median(means) * 1e6,
        "p50_us": times[len(times) // 2] * 1e6,
        "p99_us": times[min(len(times) - 1, int(len(times) * 0.99))] * 1e6,
        "rps": statistics.median(rps),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=400, help="calls of the one-client round trip")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--calls-per-client", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved repetitions; medians are reported")
    ap.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--drop", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--gpu", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--calls-ping", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--start", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        client(args)
        return 0

    from rich.console import Console
    from rich.table import Table

    from zeus_plugins_nvml import fake_pynvml

    root = os.geteuid() == 0
    tmp = Path(tempfile.mkdtemp(prefix="zeus-daemon-bench-"))
    tmp.chmod(0o755)
    daemon = None
    try:
        driver = fake_pynvml.create(tmp / "driver.json", max(args.clients, 1), privileged="root" if root else True)
        sock = tmp / "daemon.sock"
        user = f'"{NOBODY}"' if root else f'"{os.geteuid()}"'
        (tmp / "daemon.toml").write_text(
            textwrap.dedent(f"""
            socket = "{sock}"
            socket_mode = "0666"
            allow_users = [{user}]
            journal_dir = "{tmp / "journal"}"
            log = "none"
            plugins = ["nvml"]
            [serve.nvml]
        """)
        )
        client_home = tmp / "client"
        client_home.mkdir()
        if root:
            os.chown(client_home, NOBODY, NOBODY)
        base = {k: v for k, v in os.environ.items() if not k.startswith(("ZEUS_", "CUDA_"))}
        base.update(
            ZEUS_FAKE_NVML=str(driver), HOME=str(client_home), ZEUS_STATE_DIR=str(client_home / "state"), PYTHONDONTWRITEBYTECODE="1"
        )
        daemon = subprocess.Popen(
            [sys.executable, "-c", ZEUS, "daemon", "--config", str(tmp / "daemon.toml")],
            env=base,
            cwd=tmp,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not sock.exists():
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"zeus daemon did not start: {daemon.stderr.read() if daemon.poll() is not None else 'timeout'}")
            time.sleep(0.05)
        local_env = dict(base, ZEUS_STATE_DIR=str(tmp / "state-local"))
        via_env = dict(base, ZEUS_DAEMON_SOCKET=str(sock))
        runs: dict[tuple[str, str], list[list[dict]]] = {}
        for _ in range(args.rounds):  # interleaved, so that a noisy neighbour hits both paths alike
            for n, calls in ((1, args.calls), (args.clients, args.calls_per_client)):
                for path, env, drop in (("local", local_env, False), ("daemon", via_env, root)):
                    runs.setdefault((str(n), path), []).append(run_clients(n, calls, env, drop, tmp))
        one_local, one_daemon = summary(runs["1", "local"]), summary(runs["1", "daemon"])
        many_local, many_daemon = summary(runs[str(args.clients), "local"]), summary(runs[str(args.clients), "daemon"])
        assert one_local["path"] == many_local["path"] == ["local"], (one_local, many_local)
        assert one_daemon["path"] == many_daemon["path"] == ["daemon"], (one_daemon, many_daemon)
        back = [g["limit_w"] for g in fake_pynvml.read_state(driver)["gpus"]]
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)

    console = Console(width=130)
    who = "root daemon, clients as uid 65534" if root else "daemon and clients as this user"
    t = Table(title=f"set_power_limit on the simulated driver: in-process vs through zeus daemon ({who})")
    for col in ("case", "path", "mean µs/call", "p50 µs", "p99 µs", "requests/s", "daemon / in-process"):
        t.add_column(col, justify="right")
    for label, local, via, key in (
        ("1 client", one_local, one_daemon, "mean_us"),
        (f"{args.clients} clients", many_local, many_daemon, "rps"),
    ):
        for path, s in (("in-process", local), ("daemon", via)):
            ratio = f"{s[key] / local[key]:.2f}x {'time' if key == 'mean_us' else 'throughput'}" if path == "daemon" else "1.00x"
            t.add_row(label, path, f"{s['mean_us']:.0f}", f"{s['p50_us']:.0f}", f"{s['p99_us']:.0f}", f"{s['rps']:,.0f}", ratio)
    console.print(t)
    console.print(f"the protocol alone (a `ping` round trip through the daemon, 1 client): p50 {one_daemon['ping_p50_us']:.0f} µs")
    console.print(f"GPU limits after the run (all must be back at 400 W): {back}")
    return 0 if all(w == 400.0 for w in back) else 1


if __name__ == "__main__":
    sys.exit(main())

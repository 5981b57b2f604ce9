"""A fleet of ``zeus daemon``s streaming power: per-sample latency, samples lost, daemon CPU per client.

    python benchmarks/daemon_fleet.py [--daemons 8] [--clients 4] [--seconds 10] [--gpus 2] [--intervals 0.1,0.05]

Starts ``--daemons`` real ``zeus daemon`` processes on loopback ports, each serving ``--gpus``
GPUs of its own simulated NVIDIA driver over the HTTP API (upstream zeusd's), and opens
``--clients`` ``/gpu/stream_power`` streams on each (the core's reconnecting
:class:`~zeus_core.daemon.nodeclient.NodeStream`, threads of this one process), for ``--seconds``
per polling interval. Interval 0.1 s is ``zeus daemon``'s default ``stream_interval_s``; 0.05 s is
upstream zeusd's documented default GPU polling (``--gpu-power-poll-hz 20``), so the second row is
the same load at upstream's rate.

Per interval it prints:

* **latency**: a sample's arrival at a client minus its ``timestamp_ms`` (the daemon's clock,
  the same machine's here), percentiles over every sample every client received;
* **lost**: samples a client did not receive that another client of the same daemon did
  (every client of a daemon is sent every sample of its polls), over the window all clients were
  connected; and the streams that had to reconnect (a client the daemon dropped as too slow);
* **daemon CPU / client**: the daemons' CPU time (``/proc``: user + system) over the window,
  per streaming client, as a share of one core; and per daemon.

The machine it ran on is printed first: on a shared machine the latency tail is the machine's
load as much as the daemon's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "_support"))

from http_nodes import HttpNode  # noqa: E402 - the test helpers' real daemons

from zeus_core.daemon.nodeclient import Endpoint, NodeClient, NodeStream  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Client:
    """One stream: what it received (``(gpu_id, timestamp_ms)``) and each sample's latency."""

    def __init__(self, node: HttpNode) -> None:
        self.node = node
        self.received: set[tuple[int, int]] = set()
        self.latency_ms: list[tuple[float, float]] = []  # (arrival, latency)
        self.stream = NodeStream(NodeClient(Endpoint.parse(node.address)), "/gpu/stream_power", {}, self.on_event, reconnect_delay_s=0.2)

    def on_event(self, data: str) -> None:
        now = time.time()
        sample = json.loads(data)
        self.received.add((sample["gpu_id"], sample["timestamp_ms"]))
        self.latency_ms.append((now, now * 1000 - sample["timestamp_ms"]))


def machine() -> str:
    model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name")), "?")
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs ({model}), Python {platform.python_version()}"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(daemons: int, clients: int, seconds: float, gpus: int, interval: float) -> dict[str, float]:
    nodes = [HttpNode(gpus=gpus, interval_s=interval) for _ in range(daemons)]
    streams: list[Client] = []
    try:
        for n in nodes:
            n.start()
        streams = [Client(n) for n in nodes for _ in range(clients)]
        for c in streams:
            c.stream.start()
        deadline = time.monotonic() + 60
        while not all(c.received for c in streams):  # every stream delivering before the clock starts
            if time.monotonic() > deadline:
                raise RuntimeError("not every stream delivered a sample within 60 s")
            time.sleep(0.05)
        time.sleep(2 * interval)
        cpu0 = {n.pid: cpu_seconds(n.pid) for n in nodes if n.pid}
        t0 = time.time()
        time.sleep(seconds)
        t1 = time.time()
        cpu = sum(cpu_seconds(pid) - c0 for pid, c0 in cpu0.items())
        time.sleep(1.0)  # samples of the window still on their way
    finally:
        for c in streams:
            c.stream.stop()
        for n in nodes:
            n.remove()
    lo, hi = t0 * 1000, t1 * 1000
    latencies = [lat for c in streams for arrival, lat in c.latency_ms if t0 <= arrival - lat / 1000 and arrival - lat / 1000 <= t1]
    lost = samples = 0
    for n in nodes:
        mine = [c for c in streams if c.node is n]
        union = {s for c in mine for s in c.received if lo <= s[1] <= hi}
        samples += len(union) * len(mine)
        lost += sum(len(union - c.received) for c in mine)
    return {
        "interval": interval,
        "samples": samples,
        "lost": lost,
        "reconnects": sum(max(c.stream.connections - 1, 0) for c in streams),
        "p50": percentile(latencies, 0.50),
        "p90": percentile(latencies, 0.90),
        "p99": percentile(latencies, 0.99),
        "max": max(latencies, default=float("nan")),
        "mean": statistics.fmean(latencies) if latencies else float("nan"),
        "cpu_per_client": 100 * cpu / (t1 - t0) / (daemons * clients),
        "cpu_per_daemon": 100 * cpu / (t1 - t0) / daemons,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemons", type=int, default=8, help="daemon processes (default 8)")
    ap.add_argument("--clients", type=int, default=4, help="streaming clients per daemon (default 4)")
    ap.add_argument("--seconds", type=float, default=10.0, help="measured seconds per interval (default 10)")
    ap.add_argument("--gpus", type=int, default=2, help="simulated GPUs per daemon (default 2)")
    ap.add_argument(
        "--intervals", default="0.1,0.05", help="polling intervals, s (default 0.1: zeus daemon's; 0.05: upstream zeusd's 20 Hz)"
    )
    a = ap.parse_args()
    try:
        intervals = [float(x) for x in a.intervals.split(",")]
    except ValueError:
        ap.error(f"--intervals {a.intervals!r}: give seconds, comma-separated, e.g. 0.1,0.05")
    if min(a.daemons, a.clients, a.gpus) < 1 or a.seconds <= 0 or any(i < 0.01 for i in intervals):
        ap.error("--daemons, --clients and --gpus must be at least 1, --seconds above 0, each interval at least 0.01 s")
    print(f"machine: {machine()}")
    print(f"{a.daemons} daemons x {a.clients} streaming clients, {a.gpus} simulated GPUs each, {a.seconds:g} s per interval")
    rows = [run(a.daemons, a.clients, a.seconds, a.gpus, i) for i in intervals]
    names = {0.1: "0.1 s (zeus daemon's default)", 0.05: "0.05 s (upstream zeusd's 20 Hz)"}
    print()
    print(
        "| polling interval | samples sent | lost | reconnects | latency p50 / p90 / p99 / max (ms) | daemon CPU per client | per daemon |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        name = names.get(r["interval"], f"{r['interval']:g} s")
        lat = f"{r['p50']:.1f} / {r['p90']:.1f} / {r['p99']:.1f} / {r['max']:.1f}"
        cpu = f"{r['cpu_per_client']:.2f} % | {r['cpu_per_daemon']:.1f} %"
        print(f"| {name} | {r['samples']} | {r['lost']} | {r['reconnects']} | {lat} | {cpu} |")
    if any(r["lost"] or r["reconnects"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()

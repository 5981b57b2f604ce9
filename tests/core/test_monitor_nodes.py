"""``zeus monitor --node``: the live power of many node daemons at once, reconnecting, clocks corrected.

Every daemon is a real ``zeus daemon`` process (``http_nodes``: a simulated NVIDIA driver of two
GPUs and a RAPL package, the HTTP API on a loopback port), and the monitor is a real ``zeus
monitor`` process. One daemon's clock runs an hour behind (``HttpNode(skew_s=...)`` starts it
through a wrapper that shifts the clock its HTTP side reads: the daemon has no option for that);
another is restarted while the monitor streams. The test watches the CSV as the monitor writes
it (its temporary file beside the final one) rather than sleeping for a guessed time.
"""

from __future__ import annotations

import csv
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest
from http_nodes import HttpNode

from zeus_core.daemon.nodeclient import Endpoint, Fleet, HttpTransport, NodeClient, NodeError

ZEUS = "import sys; from zeus_core.cli.main import main; main(sys.argv[1:])"
SKEW_S = -3600.0


def _rows(folder: Path, final: str) -> list[dict[str, str]]:
    """The rows written so far: the final CSV, else the temporary file the monitor writes beside it."""
    paths = [folder / final] if (folder / final).exists() else [p for p in folder.iterdir() if p.name != final]
    rows: list[dict[str, str]] = []
    for p in paths:
        try:
            with p.open(newline="") as f:
                rows += [r for r in csv.DictReader(f) if r.get("sample_time")]
        except (OSError, csv.Error):
            pass
    return rows


def _wait_rows(folder: Path, final: str, test, proc: subprocess.Popen, timeout_s: float = 90.0) -> list[dict[str, str]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        rows = _rows(folder, final)
        if test(rows):
            return rows
        time.sleep(0.1)
    raise AssertionError(f"the monitor's CSV never showed what the test waits for; last rows: {_rows(folder, final)[-5:]}")


def test_two_nodes_one_restarted_one_with_a_skewed_clock(tmp_path):
    a, b = HttpNode(auth=True), HttpNode(skew_s=SKEW_S)
    try:
        a.start()
        b.start()
        # the skew is real: the daemon's /time is an hour behind this machine's clock
        assert NodeClient(Endpoint.parse(b.address)).get("/time")["timestamp_ms"] / 1000 < time.time() + SKEW_S + 60
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEUS_", "ZEUSD_"))}
        env |= {"ZEUSD_TOKEN": a.token("gpu-read", "cpu-read", sub="dash"), "ZEUS_STATE_DIR": str(tmp_path / "state")}
        out = tmp_path / "csv"
        out.mkdir()
        cmd = [sys.executable, "-c", ZEUS, "monitor", "--node", a.address, "--node", b.address, "--interval", "0.1"]
        proc = subprocess.Popen([*cmd, "--csv", str(out / "fleet.csv")], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wanted = {(n.address, d) for n in (a, b) for d in ("gpu0", "gpu1", "cpu0")}
            _wait_rows(out, "fleet.csv", lambda rows: {(r["node"], r["device"]) for r in rows} >= wanted, proc)
            a.stop()  # node a goes away under the monitor, and comes back on the same port
            restarted = time.time()
            a.start()
            _wait_rows(
                out, "fleet.csv", lambda rows: any(r["node"] == a.address and float(r["sample_time"]) > restarted for r in rows), proc
            )
            proc.send_signal(signal.SIGTERM)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, stderr
        rows = _rows(out, "fleet.csv")
        assert (out / "fleet.csv").exists() and [p.name for p in out.iterdir()] == ["fleet.csv"]  # put in place, no temporary left
        for r in rows:  # every sample on this machine's clock: b's hour of skew corrected
            assert abs(float(r["sample_time"]) - float(r["time"])) < 10, r
        assert {r["node"] for r in rows} == {a.address, b.address}
        assert all(float(r["power_w"]) > 0 for r in rows if r["device"].startswith("gpu"))  # the RAPL counter here stands still
        a_energy = [float(r["energy_j"]) for r in rows if r["node"] == a.address and r["device"] == "gpu0"]
        assert a_energy == sorted(a_energy) and a_energy[-1] > 0
        assert "summary" in stdout and a.address in stdout and b.address in stdout
    finally:
        a.remove()
        b.remove()


def test_bad_nodes_are_refused_with_the_reason(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEUS_", "ZEUSD_"))}
    run = lambda *args: subprocess.run([sys.executable, "-c", ZEUS, "monitor", *args], env=env, capture_output=True, text=True, timeout=60)  # noqa: E731
    bad = run("--node", "node1:99999")
    assert bad.returncode == 2 and "port must be a number from 1 to 65535" in bad.stderr
    twice = run("--node", "127.0.0.1:4938", "--node", "127.0.0.1:4938")
    assert twice.returncode == 2 and "named twice" in twice.stderr
    mixed = run("--node", "127.0.0.1:4938", "--device", "nvml")
    assert mixed.returncode == 2 and "--device" in mixed.stderr
    with pytest.raises(ValueError, match="HOST:PORT"):
        Endpoint.parse("a b:1")


def test_a_node_that_is_away_is_retried_and_a_refused_token_ends_its_stream():
    node = HttpNode(auth=True)
    try:
        fleet = Fleet([Endpoint.parse(node.address, token="not-a-token")], reconnect_delay_s=0.1).start()
        try:
            deadline = time.monotonic() + 30
            while fleet.nodes[0].state != "away":
                assert time.monotonic() < deadline
                time.sleep(0.05)
            node.start()  # /discover needs no token; the streams do, and this one is refused
            while fleet.nodes[0].state != "refused":
                assert time.monotonic() < deadline + 60, fleet.nodes[0]
                time.sleep(0.05)
            assert "401" in fleet.nodes[0].detail and not fleet.nodes[0].readings
        finally:
            fleet.stop()
        with pytest.raises(NodeError) as e:
            NodeClient(Endpoint.parse(node.address, token="not-a-token")).get("/gpu/get_power")
        assert e.value.status == 401
    finally:
        node.remove()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_a_node_over_tls_with_a_certificate_made_here(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    node = HttpNode(auth=True, extra=f'tls_cert = "{cert}"\ntls_key = "{key}"\n')
    try:
        node.start()
        endpoint = Endpoint.parse(f"https://{node.address}", token=node.token("gpu-read"))
        assert endpoint.tls and endpoint.host_port == node.address
        client = NodeClient(transport=HttpTransport(endpoint, ssl_context=ssl.create_default_context(cafile=str(cert))))
        assert set(client.get("/gpu/get_power")["power_mw"]) == {"0", "1"}
        with pytest.raises(NodeError) as e:  # a certificate this client does not trust: no answer, said so
            NodeClient(endpoint).get("/gpu/get_power")
        assert e.value.status is None and "CERTIFICATE_VERIFY_FAILED" in str(e.value)
    finally:
        node.remove()

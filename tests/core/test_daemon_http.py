"""``zeus daemon``'s HTTP API (upstream zeusd's): routes, tokens, monitor-only, TCP and TLS, power streams.

Most tests run the daemon in this process on real sockets (its Unix socket, a loopback TCP
port the kernel picks), with the nvml service on a simulated driver of two GPUs and the rapl
service on a powercap folder made here; the clients are httpx, as upstream's
``zeus.utils.zeusd`` is. Two tests start real ``zeus daemon`` processes: the refusal of a
public address without tokens, and ``zeus daemon token issue`` with a SIGTERM that puts a
limit set over HTTP back.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest
from zeus_daemon_helpers import ZEUS, serve_in_process, stop_in_process, wait_until

from zeus_core.daemon import tokens
from zeus_core.daemon.config import ConfigError, read_config, resolve
from zeus_core.daemon.server import Daemon, log
from zeus_core.errors import BadInput
from zeus_plugins_nvml import fake_pynvml

RANGE = 262_143_328_850


def _zone(path: Path, name: str, energy: int) -> None:
    path.mkdir(parents=True)
    for fname, text in (("name", name), ("max_energy_range_uj", RANGE), ("energy_uj", energy)):
        (path / fname).write_text(f"{text}\n")


def _powercap(root: Path) -> Path:
    pc = root / "powercap"
    _zone(pc / "intel-rapl:0", "package-0", 5_000_000)
    _zone(pc / "intel-rapl:0" / "intel-rapl:0:0", "dram", 2_000_000)
    _zone(pc / "intel-rapl:1", "package-1", 9_000_000)
    return pc


def _config(root: Path, extra: str, pc: Path) -> Path:
    path = root / "daemon.toml"
    path.write_text(
        textwrap.dedent(f"""
        socket = "{root / "d.sock"}"
        socket_mode = "0600"
        allow_users = ["{os.getuid()}"]
        journal_dir = "{root / "journal"}"
        log = "{root / "d.log"}"
        plugins = ["nvml", "cpu"]
        stream_interval_s = 0.01
        """)
        + textwrap.dedent(extra)
        + f'\n[serve.nvml]\ngpus = "all"\n\n[serve.rapl]\npowercap_root = "{pc}"\n'
    )
    return path


class Node:
    """One in-process daemon: its folder, its simulated driver, its clients."""

    def __init__(self, root: Path, daemon: Daemon, thread: threading.Thread) -> None:
        self.root, self.daemon, self.thread = root, daemon, thread

    @property
    def socket(self) -> str:
        return self.daemon.config.raw.socket

    def uds(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(transport=httpx.HTTPTransport(uds=self.socket), base_url="http://localhost", headers=headers, timeout=10)

    def tcp(self, token: str | None = None, scheme: str = "http", verify: object = True) -> httpx.Client:
        host, port = self.daemon.tcp_address  # type: ignore[misc]
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=f"{scheme}://{host}:{port}", headers=headers, timeout=10, verify=verify)  # type: ignore[arg-type]

    def token(self, *scopes: str, sub: str = "alice", expires: str = "1h") -> str:
        secret = tokens.load_secret(self.daemon.config.raw.secret_path, create=False)
        return tokens.issue(secret, sub, scopes, tokens.parse_expiry(expires))

    def gpus(self) -> list[dict]:
        return fake_pynvml.read_state(self.root / "driver.json")["gpus"]

    def log(self) -> str:
        for h in log.handlers:
            h.flush()
        return (self.root / "d.log").read_text()

    def stop(self) -> None:
        self.daemon.stop()
        self.thread.join(30)


@pytest.fixture
def start(monkeypatch):
    """``start(extra_toml)``: a daemon serving two simulated GPUs and two RAPL packages; stopped after."""
    nodes: list[Node] = []

    def run(extra: str = "") -> Node:
        root = Path(tempfile.mkdtemp(prefix="zeus-daemon-http-"))
        driver = fake_pynvml.create(root / "driver.json", 2, privileged=True)
        monkeypatch.setenv("ZEUS_FAKE_NVML", str(driver))
        d, t = serve_in_process(_config(root, extra, _powercap(root)))
        node = Node(root, d, t)
        nodes.append(node)
        return node

    yield run
    stop_in_process(nodes)


# --------------------------------------------------------------------------- routes


def test_every_route_over_the_unix_socket_answers_as_upstream_documents(start):
    node = start()
    with node.uds() as c:
        d = c.get("/discover").json()
        assert d["auth_required"] is False and d["enabled_api_groups"] == ["gpu-control", "gpu-read", "cpu-read", "cpu-control"]
        assert [(g["id"], g["name"], g["cumulative_energy_available"]) for g in d["gpus"]] == [
            (i, "NVIDIA A100-SXM4-40GB", True) for i in (0, 1)
        ]
        assert d["cpus"] == [{"id": 0, "dram_available": True}, {"id": 1, "dram_available": False}]
        assert abs(c.get("/time").json()["timestamp_ms"] - time.time() * 1000) < 60_000
        assert c.get("/auth/whoami").status_code == 404  # auth is off

        r = c.post("/gpu/set_power_limit", params={"gpu_ids": "0,1", "power_limit_mw": 150000, "block": "true"})
        assert r.status_code == 200 and r.content == b""
        assert [g["limit_w"] for g in node.gpus()] == [150.0, 150.0]
        assert c.get("/gpu/get_power_limit").json() == {"0": {"power_limit_mw": 150000}, "1": {"power_limit_mw": 150000}}
        assert c.get("/gpu/get_power_limit_constraints", params={"gpu_ids": "1"}).json() == {
            "1": {"min_power_limit_mw": 100000, "max_power_limit_mw": 400000}
        }
        assert c.get("/gpu/get_persistence_mode").json() == {"0": {"enabled": True}, "1": {"enabled": True}}
        power = c.get("/gpu/get_power").json()
        assert set(power) == {"timestamp_ms", "power_mw"} and set(power["power_mw"]) == {"0", "1"}
        assert all(isinstance(v, int) and v > 0 for v in power["power_mw"].values())
        e1 = c.get("/gpu/get_cumulative_energy", params={"gpu_ids": "0"}).json()["0"]["energy_mj"]
        assert c.get("/gpu/get_cumulative_energy", params={"gpu_ids": "0"}).json()["0"]["energy_mj"] >= e1 > 0

        assert (
            c.post(
                "/gpu/set_gpu_locked_clocks", params={"gpu_ids": "0", "min_clock_mhz": 1005, "max_clock_mhz": 1410, "block": "true"}
            ).status_code
            == 200
        )
        assert (
            c.post(
                "/gpu/set_mem_locked_clocks", params={"gpu_ids": "0", "min_clock_mhz": 1215, "max_clock_mhz": 1215, "block": "false"}
            ).status_code
            == 200
        )
        g = node.gpus()[0]
        assert (g["locked_clocks"], g["locked_mem_clocks"]) == ([1005, 1410], [1215, 1215])
        assert c.post("/gpu/reset_gpu_locked_clocks", params={"gpu_ids": "0", "block": "true"}).status_code == 200
        assert node.gpus()[0]["locked_clocks"] is None and node.gpus()[0]["locked_mem_clocks"] == [1215, 1215]
        assert c.post("/gpu/reset_locked_clocks", params={"gpu_ids": "0", "block": "true"}).status_code == 200
        assert node.gpus()[0]["locked_mem_clocks"] is None
        assert c.post("/gpu/reset_power_limit", params={"gpu_ids": "0,1", "block": "true"}).status_code == 200
        assert [g["limit_w"] for g in node.gpus()] == [400.0, 400.0]  # the originals, from the journal

        assert c.get("/cpu/get_cumulative_energy", params={"cpu": "true", "dram": "true"}).json() == {
            "0": {"cpu_energy_uj": 5_000_000, "dram_energy_uj": 2_000_000},
            "1": {"cpu_energy_uj": 9_000_000, "dram_energy_uj": None},
        }
        assert c.get("/cpu/get_cumulative_energy", params={"cpu_ids": "1", "cpu": "false", "dram": "true"}).json() == {
            "1": {"cpu_energy_uj": None, "dram_energy_uj": None}
        }
        cpu = c.get("/cpu/get_power", params={"cpu_ids": "0"}).json()
        assert cpu["power_mw"] == {"0": {"cpu_mw": 0, "dram_mw": 0}}  # the counters here stand still
    log_text = node.log()
    assert "token" not in log_text and f"uid {os.getuid()} over http" in log_text  # who changed it, in the log


@pytest.mark.parametrize(
    ("method", "path", "params", "status", "says"),
    [
        ("POST", "/gpu/set_power_limit", {"gpu_ids": "0", "power_limit_mw": 50000, "block": "true"}, 400, "outside the power-limit range"),
        ("POST", "/gpu/set_power_limit", {"gpu_ids": "0", "power_limit_mw": "lots", "block": "true"}, 400, "power_limit_mw"),
        ("POST", "/gpu/set_power_limit", {"gpu_ids": "0", "power_limit_mw": -1, "block": "true"}, 400, "power_limit_mw"),
        ("POST", "/gpu/set_power_limit", {"gpu_ids": "0", "power_limit_mw": 10**12, "block": "true"}, 400, "power_limit_mw"),
        ("POST", "/gpu/set_power_limit", {"gpu_ids": "0", "power_limit_mw": 150000}, 400, "missing field `block`"),
        ("POST", "/gpu/set_power_limit", {"gpu_ids": "0", "power_limit_mw": 150000, "block": "yes"}, 400, "true or false"),
        ("POST", "/gpu/set_power_limit", {"gpu_ids": "7", "power_limit_mw": 150000, "block": "true"}, 400, "GPU index 7 does not exist"),
        ("POST", "/gpu/set_power_limit", {"gpu_ids": "", "power_limit_mw": 150000, "block": "true"}, 400, "at least one GPU index"),
        ("POST", "/gpu/set_power_limit", {"gpu_ids": "0,,1", "power_limit_mw": 150000, "block": "true"}, 400, "empty GPU index"),
        ("POST", "/gpu/set_power_limit", {"gpu_ids": "x", "power_limit_mw": 150000, "block": "true"}, 400, "Invalid GPU index"),
        ("POST", "/gpu/set_power_limit", {"gpu_ids": "0", "power_limit_mw": 150000, "block": "true", "force": "1"}, 400, "unknown field"),
        (
            "POST",
            "/gpu/set_gpu_locked_clocks",
            {"gpu_ids": "0", "min_clock_mhz": 1, "max_clock_mhz": 2, "block": "true"},
            400,
            "supported clocks",
        ),
        ("POST", "/gpu/set_persistence_mode", {"gpu_ids": "0", "enabled": "true", "block": "true"}, 400, "does not support"),
        ("GET", "/gpu/set_power_limit", {}, 405, "takes POST"),
        ("GET", "/gpu/get_power", {"gpu_ids": "5"}, 400, "GPU 5 not found"),
        ("GET", "/cpu/get_cumulative_energy", {"cpu": "true"}, 400, "missing field `dram`"),
        ("GET", "/cpu/get_power", {"cpu_ids": "3"}, 400, "CPU 3 not found"),
        ("GET", "/nowhere", {}, 404, "no route"),
    ],
)
def test_bad_values_are_4xx_with_the_reason(start, method, path, params, status, says):
    node = start()
    with node.uds() as c:
        r = c.request(method, path, params=params)
    assert r.status_code == status, r.text
    body = r.json()
    text = body.get("error") or json.dumps(body.get("errors"))
    assert says in text, body
    assert [g["limit_w"] for g in node.gpus()] == [400.0, 400.0]  # nothing changed


def test_oversized_requests_are_refused_with_413_and_the_daemon_serves_on(start):
    node = start()
    with node.uds() as c:
        r = c.post("/gpu/set_power_limit", params={"gpu_ids": "0", "power_limit_mw": 150000, "block": "true"}, content=b"x" * 100_000)
        assert r.status_code == 413
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(node.socket)
    s.sendall(b"GET /discover HTTP/1.1\r\nhost: x\r\nx-pad: " + b"a" * 40_000 + b"\r\n\r\n")
    reply = s.recv(4096)
    s.close()
    assert reply.split(b" ")[1] in (b"413", b"431"), reply
    with node.uds() as c:
        assert c.get("/discover").status_code == 200


def test_the_private_protocol_and_http_share_the_socket(start):
    from zeus_core.daemon import DaemonClient

    node = start()
    with DaemonClient(node.socket, timeout_s=10) as client:
        assert "nvml.set_power_limit" in client.hello()["operations"]
        client.call("nvml.set_power_limit", gpu=fake_pynvml._uuid(0), milliwatts=200000)
        with node.uds() as c:  # an engine client holds GPU 0's limit: HTTP cannot take it back from under it
            r = c.post("/gpu/reset_power_limit", params={"gpu_ids": "0", "block": "true"})
            assert r.status_code == 400 and "held by client" in r.json()["errors"]["0"]
        assert node.gpus()[0]["limit_w"] == 200.0
    wait_until(lambda: node.gpus()[0]["limit_w"] == 400.0, what="the private client's limit to go back when it left")


# --------------------------------------------------------------------------- tokens, groups, TCP


def test_tokens_scopes_and_expiry_as_upstream(start):
    node = start('auth = true\ntcp = "127.0.0.1:0"\n')
    secret_file = node.daemon.config.raw.secret_path
    assert secret_file.stat().st_mode & 0o777 == 0o600
    read = node.token("gpu-read", sub="reader")
    control = node.token("gpu-read", "gpu-control", sub="operator")
    expired = tokens.issue(tokens.load_secret(secret_file, create=False), "late", ("gpu-read",), int(time.time()) - 60)
    forged = tokens.issue(b"f" * 64, "mallory", ("gpu-read", "gpu-control"), None)
    for client in (node.uds, node.tcp):
        with client() as c:
            assert c.get("/discover").json()["auth_required"] is True  # no token needed
            assert c.get("/time").status_code == 200
            r = c.get("/gpu/get_power")
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
            assert "Authorization: Bearer" in r.json()["error"]
        with client(expired) as c:
            r = c.get("/gpu/get_power")
            assert r.status_code == 401 and r.json()["error"] == "Token has expired."
        with client(forged) as c:
            r = c.get("/gpu/get_power")
            assert r.status_code == 401 and "Signature verification failed" in r.json()["error"]
        with client("not.a.token") as c:
            assert c.get("/gpu/get_power").status_code == 401
        with client(read) as c:
            assert c.get("/gpu/get_power").status_code == 200
            assert c.get("/auth/whoami").json()["sub"] == "reader"
            r = c.post("/gpu/set_power_limit", params={"gpu_ids": "0", "power_limit_mw": 150000, "block": "true"})
            assert r.status_code == 403 and "lacks required scope 'gpu-control'" in r.json()["error"]
            assert c.get("/cpu/get_power").status_code == 403  # no cpu-read scope
        with client(control) as c:
            who = c.get("/auth/whoami").json()
            assert who["sub"] == "operator" and who["scopes"] == ["gpu-read", "gpu-control"] and who["exp"] > time.time()
            r = c.post("/gpu/set_power_limit", params={"gpu_ids": "1", "power_limit_mw": 175000, "block": "true"})
            assert r.status_code == 200
    assert node.gpus()[1]["limit_w"] == 175.0
    assert "token operator over http" in node.log()


def test_a_signing_secret_others_can_read_is_refused(tmp_path):
    secret = tmp_path / "auth.secret"
    made = tokens.load_secret(secret)
    assert secret.stat().st_mode & 0o777 == 0o600 and tokens.load_secret(secret) == made
    claims = tokens.verify(made, tokens.issue(made, "bob", ("cpu-read",), None))
    assert claims.as_json() == {"sub": "bob", "scopes": ["cpu-read"]}  # never expires: no exp, as upstream
    secret.chmod(0o644)
    with pytest.raises(BadInput, match="readable by others .* chmod 600"):
        tokens.load_secret(secret)
    for bad in ("7x", "-1d", "0d", "soon"):
        with pytest.raises(BadInput, match="--expires"):
            tokens.parse_expiry(bad)
    assert tokens.parse_expiry("2h", now=1000) == 1000 + 7200 and tokens.parse_expiry("never") is None


def test_monitor_only_serves_reads_and_refuses_every_change(start):
    from zeus_core.daemon import DaemonClient, DaemonError

    node = start('enable = ["gpu-read", "cpu-read"]\n')
    with node.uds() as c:
        assert c.get("/discover").json()["enabled_api_groups"] == ["gpu-read", "cpu-read"]
        assert c.get("/gpu/get_power_limit").status_code == 200
        for path in ("/gpu/set_power_limit", "/gpu/reset_locked_clocks"):
            r = c.post(path, params={"gpu_ids": "0", "power_limit_mw": 150000, "block": "true"})
            assert r.status_code == 404 and r.json()["error"] == "API group 'gpu-control' is not enabled on this server."
    with DaemonClient(node.socket, timeout_s=10) as client, pytest.raises(DaemonError, match="only monitors"):
        client.call("nvml.set_power_limit", gpu=fake_pynvml._uuid(0), milliwatts=200000)
    assert [g["limit_w"] for g in node.gpus()] == [400.0, 400.0]


def test_tcp_without_tokens_reads_on_loopback_and_changes_nothing(start):
    node = start('tcp = "127.0.0.1:0"\n')
    with node.tcp() as c:
        assert c.get("/gpu/get_power").status_code == 200
        r = c.post("/gpu/set_power_limit", params={"gpu_ids": "0", "power_limit_mw": 150000, "block": "true"})
        assert r.status_code == 403 and "auth = true" in r.json()["error"]
    assert node.gpus()[0]["limit_w"] == 400.0


def test_a_public_address_without_tokens_is_refused_at_start(tmp_path):
    pc = _powercap(tmp_path)
    path = _config(tmp_path, 'tcp = "0.0.0.0:4938"\n', pc)
    cfg, problems, lines, _ = read_config(path)
    assert cfg is not None, problems
    with pytest.raises(ConfigError) as e:
        resolve(cfg, {}, path, lines)
    text = "\n".join(e.value.format_lines())
    assert "would serve the devices to every host" in text and "set auth = true" in text and "tcp" in text
    bad = _config(tmp_path, 'tcp = "localhost"\nenable = ["gpu-write"]\n', pc)
    _, problems, _, _ = read_config(bad)
    messages = " ".join(p.message for p in problems)
    assert 'tcp must be "HOST:PORT"' in messages and "unknown API groups ['gpu-write']" in messages


def _certificate(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_tls_round_trip_with_a_certificate_made_here(start, tmp_path):
    cert, key = _certificate(tmp_path)
    node = start(f'auth = true\ntcp = "127.0.0.1:0"\ntls_cert = "{cert}"\ntls_key = "{key}"\n')
    ctx = ssl.create_default_context(cafile=str(cert))
    with node.tcp(node.token("gpu-read"), scheme="https", verify=ctx) as c:
        assert c.get("/auth/whoami").json()["sub"] == "alice"
        assert set(c.get("/gpu/get_power").json()["power_mw"]) == {"0", "1"}
    with node.tcp(scheme="http") as c, pytest.raises(httpx.HTTPError):  # plain HTTP on the TLS port gets nothing
        c.get("/discover")
    with node.uds() as c:  # the daemon is still there
        assert c.get("/time").status_code == 200


# --------------------------------------------------------------------------- streams


def _events(response: httpx.Response, n: int) -> list[dict]:
    out = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            out.append(json.loads(line.removeprefix("data: ")))
            if len(out) == n:
                break
    return out


def test_a_stream_polls_only_while_a_client_listens(start):
    node = start()
    feed = node.daemon.api.gpu_feed
    with node.uds() as c:
        assert feed.polls == 0  # nobody listened yet: the driver was not asked
        with c.stream("GET", "/gpu/stream_power", params={"gpu_ids": "1"}) as r:
            assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
            events = _events(r, 5)
        assert {e["gpu_id"] for e in events} == {1} and all(e["power_mw"] > 0 for e in events)
        assert [e["timestamp_ms"] for e in events] == sorted(e["timestamp_ms"] for e in events)
        with c.stream("GET", "/cpu/stream_power") as r:
            cpu = _events(r, 4)
        assert {e["cpu_id"] for e in cpu} == {0, 1} and {e["cpu_mw"] for e in cpu} == {0}
        assert {e["dram_mw"] for e in cpu if e["cpu_id"] == 1} == {None}
        assert c.get("/gpu/stream_power", params={"gpu_ids": "9"}).status_code == 400
    wait_until(lambda: feed.listening == 0 and feed._thread is None, what="the poller to end with its last client")
    polls = feed.polls
    time.sleep(0.2)  # twenty poll intervals
    assert feed.polls == polls  # no client, no polling


def test_a_slow_client_is_dropped_while_another_keeps_receiving(start):
    node = start()
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect(node.socket)
    slow.sendall(b"GET /gpu/stream_power HTTP/1.1\r\nhost: localhost\r\n\r\n")  # and then never reads
    with node.uds() as c, c.stream("GET", "/gpu/stream_power", params={"gpu_ids": "0"}) as r:
        lines = r.iter_lines()
        seen = 0
        deadline = time.monotonic() + 120  # the slow client's buffers and its 64 samples fill within seconds
        for line in lines:
            seen += line.startswith("data: ")
            if "dropped it" in node.log():
                break
            assert time.monotonic() < deadline, "the client that does not read was never dropped"
        after = [json.loads(line.removeprefix("data: ")) for line, _ in zip((x for x in lines if x.startswith("data: ")), range(20))]
        # the good client is still served after the slow one went
    assert seen > 0 and len(after) == 20
    slow.settimeout(10)
    received = b""
    while chunk := slow.recv(65536):  # what it was sent, then the end: the daemon closed it
        received += chunk
    slow.close()
    assert received.startswith(b"HTTP/1.1 200")


def test_the_daemon_puts_back_what_http_clients_set_when_it_stops(start):
    node = start()
    with node.uds() as c:
        assert c.post("/gpu/set_power_limit", params={"gpu_ids": "1", "power_limit_mw": 120000, "block": "true"}).status_code == 200
    assert node.gpus()[1]["limit_w"] == 120.0  # held after the connection closed
    node.stop()
    assert node.gpus()[1]["limit_w"] == 400.0
    assert "restored nvml gpu:" in node.log() and "(daemon exit)" in node.log()


# --------------------------------------------------------------------------- real processes


def test_token_issue_and_a_real_daemon_over_tcp_restoring_at_sigterm(tmp_path):
    root = Path(tempfile.mkdtemp(prefix="zeus-daemon-http-proc-"))
    try:
        driver = fake_pynvml.create(root / "driver.json", 1, privileged=True)
        with socket.socket() as s:  # a free loopback port for the daemon
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        path = _config(root, f'auth = true\ntcp = "127.0.0.1:{port}"\n', _powercap(root))
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZEUS_")} | {"ZEUS_FAKE_NVML": str(driver)}
        zeus = [sys.executable, "-c", ZEUS]
        bad = subprocess.run(
            [*zeus, "daemon", "token", "issue", "--config", str(path), "--subject", "ops", "--scope", "gpu-write"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert bad.returncode == 2 and "--scope 'gpu-write'" in bad.stderr and not bad.stdout
        issued = subprocess.run(
            [
                *zeus,
                "daemon",
                "token",
                "issue",
                "--config",
                str(path),
                "--subject",
                "ops",
                "--scope",
                "gpu-read,gpu-control",
                "--expires",
                "1h",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert issued.returncode == 0, issued.stderr
        token = issued.stdout.strip()
        assert (root / "journal" / "auth.secret").stat().st_mode & 0o777 == 0o600
        proc = subprocess.Popen([*zeus, "daemon", "--config", str(path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=10) as c:
                deadline = time.monotonic() + 60
                while True:
                    try:
                        c.get("/time")
                        break
                    except httpx.TransportError:
                        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.stdout else ""
                        time.sleep(0.05)
                assert c.get("/auth/whoami").json()["sub"] == "ops"
                r = c.post("/gpu/set_power_limit", params={"gpu_ids": "0", "power_limit_mw": 130000, "block": "true"})
                assert r.status_code == 200, r.text
            assert fake_pynvml.read_state(driver)["gpus"][0]["limit_w"] == 130.0
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert fake_pynvml.read_state(driver)["gpus"][0]["limit_w"] == 400.0
    finally:
        shutil.rmtree(root, ignore_errors=True)

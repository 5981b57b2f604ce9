"""Real ``zeus daemon`` processes serving upstream zeusd's HTTP API, for tests and ``benchmarks/daemon_fleet.py``.

Each :class:`HttpNode` is a folder under ``/tmp`` holding a simulated NVIDIA driver
(``fake_pynvml``, as many GPUs as asked; ``vendor="amdsmi"``: a simulated AMD one), a RAPL powercap tree and the daemon's configuration,
and a ``zeus daemon --config`` process on its own Unix socket and a loopback TCP port. It can be
stopped and started again on the same socket and port (a daemon restarted under its clients).

``skew_s`` starts the daemon through a wrapper that shifts the clock its HTTP side reads
(``zeus_core.daemon.http.now_ms``: ``/time`` and every sample's timestamp) by that many seconds,
as on a node whose clock is off. The daemon has no option for it: the wrapper replaces the
function in the daemon's process before its command runs, so nothing test-only is in the daemon.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from zeus_core.daemon import tokens
from zeus_plugins_nvml import fake_pynvml

RUN = "import sys; from zeus_core.cli.main import main; main(sys.argv[1:])"
SKEWED = (
    "import sys, zeus_core.daemon.http as h; real = h.now_ms; skew = int(float(sys.argv.pop(1)) * 1000); "
    "h.now_ms = lambda: real() + skew; from zeus_core.cli.main import main; main(sys.argv[1:])"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpNode:
    """One simulated node and its daemon process (not started until :meth:`start`)."""

    def __init__(
        self, gpus: int = 2, auth: bool = False, interval_s: float = 0.05, skew_s: float = 0.0, extra: str = "", vendor: str = "nvml"
    ) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="zeus-http-node-"))
        if vendor == "amdsmi":
            from zeus_plugins_amdsmi import fake_amdsmi

            self.driver = fake_amdsmi.create(self.root / "driver.json", gpus, privileged=True)
            driver_env = {"ZEUS_FAKE_AMDSMI": str(self.driver)}
        else:
            self.driver = fake_pynvml.create(self.root / "driver.json", gpus, privileged=True)
            driver_env = {"ZEUS_FAKE_NVML": str(self.driver)}
        self.port = free_port()
        self.socket = self.root / "d.sock"
        self.skew_s = skew_s
        self.proc: subprocess.Popen | None = None
        pc = self.root / "powercap" / "intel-rapl:0"
        pc.mkdir(parents=True)
        for name, text in (("name", "package-0"), ("max_energy_range_uj", "262143328850"), ("energy_uj", "5000000")):
            (pc / name).write_text(text + "\n")
        self.config = self.root / "daemon.toml"
        self.config.write_text(
            textwrap.dedent(f"""
            socket = "{self.socket}"
            socket_mode = "0600"
            allow_users = ["{os.getuid()}"]
            journal_dir = "{self.root / "journal"}"
            log = "{self.root / "d.log"}"
            plugins = ["{vendor}", "cpu"]
            stream_interval_s = {interval_s}
            tcp = "127.0.0.1:{self.port}"
            auth = {"true" if auth else "false"}
            """)
            + extra
            + f'\n[serve.{vendor}]\ngpus = "all"\n\n[serve.rapl]\npowercap_root = "{self.root / "powercap"}"\n'
        )
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEUS_", "ZEUSD_"))} | driver_env

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def token(self, *scopes: str, sub: str = "alice", expires: str = "1h") -> str:
        secret = tokens.load_secret(self.root / "journal" / "auth.secret")
        return tokens.issue(secret, sub, scopes, tokens.parse_expiry(expires))

    def start(self, timeout_s: float = 60.0) -> HttpNode:
        code = [sys.executable, "-c", SKEWED, str(self.skew_s)] if self.skew_s else [sys.executable, "-c", RUN]
        self.proc = subprocess.Popen(
            [*code, "daemon", "--config", str(self.config)], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                    return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    out = self.proc.stdout.read().decode() if self.proc.stdout and self.proc.poll() is not None else ""
                    self.stop()
                    raise RuntimeError(f"zeus daemon did not start on {self.address}: {out[-2000:]}") from None
                time.sleep(0.05)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

"""``zeus serve`` as a real process on loopback, for tests and benchmarks.

    with Serve(store="postgresql://...", token="...") as svc:
        svc.url          # http://127.0.0.1:PORT
        svc.kill()       # SIGKILL; svc.start() again on the same port

Its stderr goes to a file (``svc.log``); the port is the one it printed when it
was started with ``--port 0``, and kept for restarts.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LISTENING = re.compile(r"listening on http://(?P<host>[^\s:]+|\[[^\]]+\]):(?P<port>\d+)")


class Serve:
    def __init__(
        self, store: str, token: str | None = None, port: int = 0, host: str = "127.0.0.1", args: tuple = (), cwd: str | Path | None = None
    ) -> None:
        self.store = store
        self.token = token
        self.port = port
        self.host = host
        self.args = args
        self.cwd = cwd
        self.log = Path(tempfile.mkstemp(prefix="zeus-serve-", suffix=".log")[1])
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def env(self) -> dict:
        env = dict(os.environ)
        env.pop("ZEUS_SERVE_TOKEN", None)
        # Plugins no served job uses stay unloaded: a faster start on a busy machine.
        env.setdefault("ZEUS_DISABLED_PLUGINS", "perseus,hetero,torch,nvml,cpu")
        if self.token:
            env["ZEUS_SERVE_TOKEN"] = self.token
        return env

    def start(self, timeout: float = 60) -> Serve:
        cmd = [
            sys.executable,
            "-m",
            "zeus_core.cli",
            "serve",
            "--store",
            self.store,
            "--host",
            self.host,
            "--port",
            str(self.port),
            *self.args,
        ]
        with open(self.log, "a") as log:
            start = log.tell()
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=self.env(), cwd=self.cwd, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            text = self.log.read_text()[start:]
            m = LISTENING.search(text)
            if m:
                self.port = int(m.group("port"))
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"zeus serve exited with {self.proc.returncode}:\n{text}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"zeus serve did not start in {timeout} s:\n{text}")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> int | None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        return None if self.proc is None else self.proc.returncode

    def __enter__(self) -> Serve:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.log.unlink(missing_ok=True)

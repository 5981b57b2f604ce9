"""Real ``zeus daemon`` processes for tests: a node folder, the daemon as root, clients as nobody.

The daemon runs as a separate root process (``zeus daemon --config``) on a real
Unix socket; clients run as uid 65534 through ``run_unprivileged.py``. Every
file both sides use lives in a folder under ``/tmp`` that uid 65534 can
traverse (pytest's own ``tmp_path`` is root-only), removed after the test.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from zeus_core.daemon import DaemonClient, DaemonError

NOBODY = 65534
HELPER = Path(__file__).with_name("run_unprivileged.py")
ZEUS = "import sys; from zeus_core.cli.main import main; main(sys.argv[1:])"


@pytest.fixture
def root_for_daemon() -> None:
    """Skip (fail where ZEUS_REQUIRE_SERVERS=1, as in CI) unless this process is root."""
    if os.geteuid() != 0:
        from cluster_helpers import server_missing

        server_missing("starts zeus daemon as root and drops clients to uid 65534 (CI runs as root)")


#: the mark of a module whose tests start the daemon as root (import ``root_for_daemon`` with it)
needs_root = pytest.mark.usefixtures("root_for_daemon")


class Node:
    """One simulated node: a folder, the environment both sides share, and the daemon process."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket = root / "run" / "daemon.sock"
        self.config = root / "daemon.toml"
        self.log = root / "daemon.log"
        self.client_dir = root / "client"  # the unprivileged user's working folder and state
        self.client_dir.mkdir()
        os.chown(self.client_dir, NOBODY, NOBODY)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEUS_", "CUDA_")) and k not in ("HOME", "XDG_STATE_HOME")}
        self.env.update(PYTHONDONTWRITEBYTECODE="1", ZEUS_DISABLED_PLUGINS="")
        self.proc: subprocess.Popen | None = None

    def write_config(self, body: str, *, allow: str = 'allow_users = ["nobody"]', mode: str = "0660") -> Path:
        head = textwrap.dedent(f"""
            socket = "{self.socket}"
            socket_group = "{NOBODY}"
            socket_mode = "{mode}"
            {allow}
            journal_dir = "{self.root / "journal"}"
            log = "{self.log}"
            plugins = ["nvml", "cpu"]
        """)
        self.config.write_text(head + textwrap.dedent(body))
        return self.config

    # -- the daemon --

    def zeus(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """``zeus ARGS`` as root (``zeus daemon --check``, ...)."""
        return subprocess.run(
            [sys.executable, "-c", ZEUS, *args], env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self.root
        )

    def start(self, timeout: float = 30) -> subprocess.Popen:
        """Start the daemon and wait for its socket; fail with its output if it exits instead."""
        out = open(self.root / "daemon.out", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ZEUS, "daemon", "--config", str(self.config)],
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=self.root,
        )
        out.close()
        deadline = time.monotonic() + timeout
        while self.serving_pid() != self.proc.pid:  # a SIGKILLed daemon's socket may still be there
            if self.proc.poll() is not None:
                pytest.fail(f"zeus daemon exited {self.proc.returncode}:\n{self.output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"zeus daemon did not serve {self.socket} within {timeout} s:\n{self.output()}")
            time.sleep(0.05)
        return self.proc

    def serving_pid(self) -> int | None:
        """The pid of the daemon answering on the socket (root is always served), or None."""
        try:
            with DaemonClient(str(self.socket), timeout_s=5) as c:
                return c.hello()["pid"]
        except DaemonError:
            return None

    def output(self) -> str:
        out = self.root / "daemon.out"
        return (out.read_text() if out.exists() else "") + (self.log.read_text() if self.log.exists() else "")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self.proc = None
        return code

    # -- clients --

    def client_env(self, **extra: str) -> dict[str, str]:
        """The unprivileged user's environment: its own home and state; the research plugins blocked
        (slow to import, and nothing here uses them)."""
        env = dict(
            self.env,
            HOME=str(self.client_dir),
            ZEUS_STATE_DIR=str(self.client_dir / "state"),
            ZEUS_DISABLED_PLUGINS="perseus,mab,hetero,trace",
        )
        env.update(extra)
        return env

    def run_as(
        self,
        code: str,
        *args: str,
        before: str = "",
        uid: int = NOBODY,
        gid: int = NOBODY,
        env: dict[str, str] | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess:
        """Run ``code`` as ``uid`` in a fresh process (``before`` runs first, as root: imports)."""
        return subprocess.run(
            self.as_argv(code, *args, before=before, uid=uid, gid=gid),
            env=env or self.client_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.client_dir,
        )

    def popen_as(self, code: str, *args: str, before: str = "", env: dict[str, str] | None = None) -> subprocess.Popen:
        return subprocess.Popen(
            self.as_argv(code, *args, before=before, uid=NOBODY, gid=NOBODY),
            env=env or self.client_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.client_dir,
        )

    @staticmethod
    def as_argv(code: str, *args: str, before: str, uid: int, gid: int) -> list[str]:
        return [sys.executable, str(HELPER), str(uid), str(gid), before, code, *args]

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def node():
    """A node folder under /tmp that uid 65534 can reach; the daemon is killed and the folder removed after."""
    root = Path(tempfile.mkdtemp(prefix="zeus-daemon-test-"))
    root.chmod(0o755)
    n = Node(root)
    try:
        yield n
    finally:
        n.close()
        shutil.rmtree(root, ignore_errors=True)


def wait_until(cond, timeout_s: float = 15.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


def serve_in_process(path: Path, level: int = 10):
    """A daemon of the configuration at ``path`` in this process, serving on a thread: (daemon, thread).
    Logging goes where the configuration says, from ``level``; the caller stops it (``daemon.stop()``, join)."""
    import threading

    from zeus_core.daemon.config import read_config, resolve
    from zeus_core.daemon.server import Daemon, setup_logging
    from zeus_core.engine import registry as zreg

    cfg, problems, lines, _ = read_config(path)
    assert cfg is not None, problems
    reg = zreg.load(only=cfg.plugins)
    resolved = resolve(cfg, {n: r.options for n, r in reg.services.items()}, path, lines)
    setup_logging(cfg.log, level)
    d = Daemon(resolved, reg)
    d.restore_left_behind()
    d.build_services()
    d.bind()
    t = threading.Thread(target=d.serve_forever, daemon=True)
    t.start()
    return d, t


def stop_in_process(nodes) -> None:
    """Stop the in-process daemons of ``nodes`` (each with ``stop()`` and its folder ``root``), remove
    their folders, and close the daemon's log handlers."""
    from zeus_core.daemon.server import log

    for node in nodes:
        node.stop()
        shutil.rmtree(node.root, ignore_errors=True)
    for h in list(log.handlers):
        h.close()
    log.handlers.clear()

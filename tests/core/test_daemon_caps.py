"""``zeus daemon`` against a greedy user: per-user connection caps, a first-frame timeout, refusals
logged and rate-limited, and no log line per connection.

The daemon runs in this process (a real Unix socket, a test service, no device); clients are
this (root) process and, through ``run_unprivileged.py``, a real process of uid 65534.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import attrs
import pytest
from zeus_daemon_helpers import HELPER, NOBODY, needs_root, root_for_daemon  # noqa: F401 - the fixture needs_root uses

from zeus_core import hookimpl
from zeus_core.daemon import DaemonClient, DaemonError, operation
from zeus_core.daemon.config import DaemonConfig, ResolvedConfig
from zeus_core.daemon.protocol import decode, read_frame
from zeus_core.daemon.server import Daemon, RefusalLog, log, setup_logging
from zeus_core.engine import registry as zreg


@attrs.define
class Opts:
    pass


class Dial:
    """A privileged service with one operation and no device."""

    def __init__(self, options, ctx):
        pass

    @operation(changes=False)
    def read(self, args, client):
        return 0


@hookimpl
def zeus_register_privileged_operations(register):
    register("dial", Dial, options=Opts)


@pytest.fixture
def daemon():
    root = Path(tempfile.mkdtemp(prefix="zeus-daemon-caps-"))
    root.chmod(0o755)
    raw = DaemonConfig(
        socket=str(root / "d.sock"),
        socket_mode="0666",
        allow_users=["0", str(NOBODY)],
        log=str(root / "d.log"),
        journal_dir=str(root / "journal"),
        max_clients=4,
        max_clients_per_user=2,
        # long enough that a loaded machine's pause between a test's connect and its next request
        # cannot close the silent connection before the test has seen it hold its slot
        first_frame_timeout_s=2.0,
        serve={"dial": Opts()},
    )
    cfg = ResolvedConfig(
        root / "daemon.toml", raw, os.geteuid(), os.getegid(), 0o666, frozenset({0, NOBODY}), frozenset(), {"dial": Opts()}, {}
    )
    reg = zreg.load(extra_plugins=[("dialplug", sys.modules[__name__])], entry_points=False)
    setup_logging(raw.log)
    d = Daemon(cfg, reg)
    d.refused = RefusalLog(every_s=3600.0)  # one line per kind and user for the whole test: no timing involved
    d.build_services()
    d.bind()
    t = threading.Thread(target=d.serve_forever, daemon=True)
    t.start()
    try:
        yield d
    finally:
        d.stop()
        t.join(30)
        for h in list(log.handlers):
            h.close()
        log.handlers.clear()
        shutil.rmtree(root, ignore_errors=True)


def _log(d: Daemon) -> str:
    for h in log.handlers:
        h.flush()
    return Path(d.config.raw.log).read_text()


def _hello(d: Daemon) -> DaemonClient:
    c = DaemonClient(d.config.raw.socket, timeout_s=10)
    c.hello()
    return c


@needs_root
def test_one_user_holds_at_most_its_share_and_others_still_get_in(daemon):
    mine = [_hello(daemon), _hello(daemon)]
    for _ in range(20):  # a greedy user keeps trying
        with pytest.raises(DaemonError) as e:
            _hello(daemon)
        assert e.value.code == "busy" and "holds 2 connections to this daemon already (max_clients_per_user)" in str(e.value)
    code = (
        "import sys\nfrom zeus_core.daemon import DaemonClient\n"
        "c = DaemonClient(sys.argv[1], timeout_s=10); print(c.hello()['client']['uid'])"
    )
    r = subprocess.run(
        [sys.executable, str(HELPER), str(NOBODY), str(NOBODY), "", code, daemon.config.raw.socket],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert r.returncode == 0 and r.stdout.strip() == str(NOBODY), r.stderr  # another user is served
    text = _log(daemon)
    refusals = [line for line in text.splitlines() if "max_clients_per_user" in line]
    assert len(refusals) == 1 and "WARNING refused pid" in refusals[0] and "uid 0 (root)" in refusals[0], text
    assert "connected" not in text  # no line per connection: the log holds changes and refusals
    for c in mine:
        c.close()


@needs_root
def test_a_connection_that_says_nothing_is_closed_and_frees_its_slot(daemon):
    first = _hello(daemon)
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.settimeout(30)
    silent.connect(daemon.config.raw.socket)  # holds the user's second slot, sending nothing
    with pytest.raises(DaemonError, match="max_clients_per_user"):
        _hello(daemon)
    reply = decode(read_frame(silent))
    assert reply["error"]["code"] == "timeout" and "first_frame_timeout_s" in reply["error"]["message"]
    assert silent.recv(1) == b""  # then closed
    silent.close()
    again = _hello(daemon)  # the slot is free
    assert "closed client #" in _log(daemon) and "no request within 2 s of connecting" in _log(daemon)
    first.close()
    again.close()


def test_refusals_are_counted_and_said_with_the_next_line_after_the_window():
    now = [0.0]
    lines: list[str] = []
    refused = RefusalLog(every_s=10.0, clock=lambda: now[0])
    log.addHandler(handler := _Collect(lines))
    try:
        for _ in range(5):
            refused("forbidden", 1000, "refused uid 1000")
        refused("forbidden", 1001, "refused uid 1001")  # another user: its own line
        now[0] = 11.0
        refused("forbidden", 1000, "refused uid 1000")
    finally:
        log.removeHandler(handler)
    assert lines == [
        "refused uid 1000",
        "refused uid 1001",
        "refused uid 1000 (4 more forbidden refusals of uid 1000 in the last 11 s not logged)",
    ]


class _Collect:
    level = 0

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def handle(self, record) -> None:
        self.lines.append(record.getMessage())

"""``zeus serve`` takes the knobs of every zeus command (#23): ``-v`` / ``-q`` and ``ZEUS_LOG_LEVEL``;
``--access-log`` still logs every request at any level."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys

import pytest
from zeus_test_helpers import output_while_answering

from zeus_core.backends import StoreUnavailable
from zeus_plugins_serve import client as service


def _requests_logged(tmp_path, *args: str) -> str:
    """What ``zeus serve ARGS`` printed (stdout and stderr) around two requests."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("ZEUS_SERVE_TOKEN", "ZEUS_LOG_LEVEL")}
    env.setdefault("ZEUS_DISABLED_PLUGINS", "perseus,hetero,torch,nvml,cpu")  # a faster start
    cmd = [sys.executable, "-m", "zeus_core.cli", "serve", "--store", str(tmp_path / "store"), "--port", str(port), *args]
    return output_while_answering(cmd, f"http://127.0.0.1:{port}/v1", env)


def test_verbose_and_access_log_show_requests_and_quiet_does_not(tmp_path):
    assert '"GET /v1 HTTP/1.1" 200' in _requests_logged(tmp_path, "-v")
    assert '"GET /v1 HTTP/1.1" 200' in _requests_logged(tmp_path, "-q", "--access-log")  # the older knob, as before
    quiet = _requests_logged(tmp_path, "-q")
    assert "GET /v1" not in quiet and "INFO" not in quiet and "listening on" in quiet  # the address is its output


def test_a_bad_level_is_bad_input(tmp_path):
    env = {**os.environ, "ZEUS_LOG_LEVEL": "chatty"}
    r = subprocess.run(
        [sys.executable, "-m", "zeus_core.cli", "serve", "--port", "0", "--store", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 2 and "ZEUS_LOG_LEVEL='chatty' is not a log level" in r.stderr


def test_a_client_waiting_for_the_service_warns_through_the_zeus_logger(monkeypatch, caplog):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(service, "WARN_EVERY_S", 0.0)
    c = service.ServiceClient(f"http://127.0.0.1:{port}?retry_s=0.3", timeout_s=1)
    with caplog.at_level(logging.WARNING, logger="zeus.serve"), pytest.raises(StoreUnavailable, match="did not answer for 0.3 s"):
        c.call("GET", "/v1")
    c.close()
    got = [r for r in caplog.records if r.name == "zeus.serve"]
    assert got and got[0].levelno == logging.WARNING
    assert "zeus serve has not answered for" in got[0].getMessage() and "still trying for up to 0.3 s" in got[0].getMessage()

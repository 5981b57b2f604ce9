"""``zeus perseus serve`` takes the knobs of every zeus command (#23): ``-v`` / ``-q`` and
``ZEUS_LOG_LEVEL`` move its default (info); ``--log-level``, its older knob, still wins."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from zeus_test_helpers import output_while_answering

pytest.importorskip("uvicorn")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from perseus_fakes import free_port  # noqa: E402


def _server_output(*args: str) -> str:
    """What ``zeus ARGS --port P`` printed between its start and a SIGTERM after it answered."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("ZEUS_LOG_LEVEL", "ZEUS_PERSEUS_TOKEN")}
    return output_while_answering(
        [sys.executable, "-m", "zeus_core.cli", *args, "--port", str(port)], f"http://127.0.0.1:{port}/health", env
    )


def test_quiet_and_the_older_log_level():
    quiet = _server_output("-q", "perseus", "serve")
    assert "plan server on" in quiet and "INFO" not in quiet and "GET /health" not in quiet
    alias = _server_output("-q", "perseus", "serve", "--log-level", "info")  # the older knob wins
    assert "INFO" in alias and '"GET /health HTTP/1.1" 200' in alias


def test_a_bad_level_is_bad_input():
    r = subprocess.run(
        [sys.executable, "-m", "zeus_core.cli", "perseus", "serve"],
        capture_output=True,
        text=True,
        env={**os.environ, "ZEUS_LOG_LEVEL": "lots"},
        timeout=60,
    )
    assert r.returncode == 2 and "ZEUS_LOG_LEVEL='lots' is not a log level" in r.stderr

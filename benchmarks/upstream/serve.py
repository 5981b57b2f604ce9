"""Upstream's batch-size client tests against ``zeus serve``: the ``client`` fixture their conftest provides.

Upstream's ``tests/optimizer/batch_size/conftest.py`` builds upstream's in-process server (its FastAPI
app over a SQLite database) and hands the tests a test client of it, whose ``post``/``get``/``patch``
the tests put in place of ``httpx``'s. The harness writes a conftest of its own instead
(:func:`conftest_for`): upstream's test helpers (``Helpers``, ``helpers``) as upstream wrote them, read
from the copy, and a ``client`` that is an ``httpx.Client`` on a real ``zeus serve`` (one per test
module, its own store, on loopback), so the client under test speaks upstream's protocol to zeus's
server.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

LISTENING = re.compile(r"listening on http://(?P<host>[^\s:]+):(?P<port>\d+)")

#: what upstream's conftest defines for its own server; everything else of it is kept
_SERVER_NAMES = {"init", "create", "clean", "client", "session_data"}


def conftest_for(upstream_conftest: str) -> str:
    """The harness's conftest: the definitions of upstream's that do not touch its server, then :func:`client`."""
    tree = ast.parse(upstream_conftest)
    kept = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            kept.append(ast.get_source_segment(upstream_conftest, node))
        elif isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in _SERVER_NAMES:
            start = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
            kept.append("\n".join(upstream_conftest.splitlines()[start : node.end_lineno]))
    return "\n\n\n".join([*kept[:1], "import pytest\n\nfrom upstream.serve import client, zeus_serve  # noqa: F401", *kept[1:]]) + "\n"


@pytest.fixture(scope="module")
def zeus_serve() -> Iterator[str]:
    """A ``zeus serve`` on loopback with a store of its own; its URL."""
    store = tempfile.mkdtemp(prefix="zeus-upstream-bso-")
    log = Path(store) / "serve.log"
    env = dict(os.environ)
    env.pop("ZEUS_SERVE_TOKEN", None)
    env.setdefault("ZEUS_DISABLED_PLUGINS", "perseus,hetero,torch,nvml,cpu")
    cmd = [sys.executable, "-m", "zeus_core.cli", "serve", "--store", str(Path(store) / "jobs"), "--host", "127.0.0.1", "--port", "0"]
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (m := LISTENING.search(log.read_text())):
            assert proc.poll() is None, f"zeus serve exited: {log.read_text()}"
            assert time.monotonic() < deadline, f"zeus serve did not start: {log.read_text()}"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{m.group('port')}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def client(zeus_serve: str) -> Iterator[object]:
    """What upstream's tests use in place of ``httpx.post``/``get``/``patch``: a client of ``zeus serve``."""
    import httpx

    with httpx.Client(base_url=zeus_serve, timeout=60) as c:
        yield c

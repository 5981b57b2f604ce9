"""Runners of one job started as real processes (``python -m zeus_core.cli run``), for the tests of
what concurrent runners do to one store: waiting until one holds an open recurrence, and ending
every child however the test ends."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def start_run(site: Path, job: Path, cwd: Path, *args: str) -> subprocess.Popen:
    """``zeus run JOB ARGS`` in the background, with the toy plugin of ``site`` importable."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])), COLUMNS="400")
    return subprocess.Popen(
        [sys.executable, "-m", "zeus_core.cli", "run", str(job), *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def zeus(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``zeus ARGS`` to its end (at most two minutes)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])), COLUMNS="400")
    return subprocess.run([sys.executable, "-m", "zeus_core.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


@contextmanager
def killed_at_end(procs: list[subprocess.Popen]) -> Iterator[list[subprocess.Popen]]:
    """``procs`` (a list the test may add to), each killed when the block ends, so that none outlives the test."""
    try:
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()


def wait_until(predicate: Callable[[], object], procs: list[subprocess.Popen], what: str, timeout: float = 90) -> object:
    """Poll ``predicate`` until it is true, failing if a process of ``procs`` ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                out, err = p.communicate()
                raise AssertionError(f"a runner ended (exit {p.returncode}) before {what}: {err[-2000:]}")
        got = predicate()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def finish(p: subprocess.Popen, timeout: float = 180) -> tuple[int, str, str]:
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, " ".join(err.split())

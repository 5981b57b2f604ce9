"""Helpers for core tests: a registry with the toy plugin, and an in-process CLI runner."""

from __future__ import annotations

import signal
import subprocess
import textwrap
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from click.testing import CliRunner

from zeus_core.cli import main as zcli
from zeus_core.device import DeviceGroup
from zeus_core.engine import registry as zreg


def toy_registry(toy_plugin, extra=(), isolated=True):
    """A registry with the toy plugin and the baseline plugin only (``isolated``),
    so that what other distributions happen to be installed cannot change results."""
    if isolated:
        from zeus_plugins_baseline import plugin as baseline

        return zreg.load(extra_plugins=[("baseline", baseline), ("toy", toy_plugin), *extra], entry_points=False)
    return zreg.load(extra_plugins=[("toy", toy_plugin), *extra])


def run_cli(reg, *args: str):
    """Run ``zeus ARGS`` in-process against ``reg``; returns the click Result."""
    return CliRunner().invoke(zcli.cli, list(args), obj={"registry": reg}, catch_exceptions=False)


#: The signals the tests send to the processes they start.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _ignore_here(_signum, _frame) -> None:
    """Ignores a signal in this process; a child started meanwhile gets the default action (a handler,
    unlike an ignored signal, is not inherited across exec)."""


T = TypeVar("T")


@contextmanager
def signals_at_default():
    """While processes are started: they get SIGINT, SIGTERM and SIGHUP at their default actions, whatever this
    test process was started with (a test runner started in a non-interactive shell's background ignores SIGINT,
    one under nohup SIGHUP, and a child inherits an ignored signal). This process keeps ignoring what it
    ignored. Signal handlers are set in the main thread, where pytest runs tests."""
    saved = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s, handler in saved.items():
        if handler is signal.SIG_IGN:
            signal.signal(s, _ignore_here)
    try:
        yield
    finally:
        for s, handler in saved.items():
            if handler is signal.SIG_IGN:
                signal.signal(s, handler)


@contextmanager
def signals_ignored(*signals: int):
    """This process (and so the children it starts meanwhile) ignoring ``signals``: a test runner started in
    the background (SIGINT) or under nohup (SIGHUP)."""
    saved = {s: signal.signal(s, signal.SIG_IGN) for s in signals}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def start(args: list[str], **popen) -> subprocess.Popen:
    """``subprocess.Popen(args, **popen)`` with the stop signals at their defaults in the child
    (:func:`signals_at_default`); pair it with :func:`ended` so that nothing outlives the test."""
    with signals_at_default():
        return subprocess.Popen(args, **popen)


@contextmanager
def ended(proc: subprocess.Popen):
    """``with ended(start(...)) as proc:``: the process is killed on the way out if it still runs (a test that
    failed or timed out must not leave it running beside the next tests)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def write_job(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    return path


TOY_JOB = """
[job]
name = "toyjob"
recurrences = 3
target_metric = 1.0
eta_knob = 0.5
beta_knob = 2.0
max_epochs = 30

[workload]
plugin = "toy"

[device]
plugin = "toy"

[batch_size]
plugin = "fixed"
default = 32

[power]
plugin = "fixed"
limit_w = 200
"""


def output_while_answering(cmd: list[str], url: str, env: dict[str, str], timeout: float = 60) -> str:
    """Start a server (``cmd``), wait until ``url`` answers 200, ask it once more, stop it with
    SIGTERM; what it printed (stdout and stderr)."""
    import httpx

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(url, timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, f"{cmd} did not answer at {url}"
            time.sleep(0.1)
        assert httpx.get(url, timeout=5).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    return out


class Between:
    """Equal to any number from ``lo`` to ``hi`` (``assert got == Between(...)`` shows both on failure)."""

    def __init__(self, lo: float, hi: float) -> None:
        self.lo, self.hi = lo, hi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, int | float) and self.lo <= other <= self.hi

    def __repr__(self) -> str:
        return f"Between({self.lo!r}, {self.hi!r})"


class Elapsed:
    """How long a window between two readings lasted: at least ``shortest`` (from the end of the first
    reading's call to the start of the second's), at most ``longest`` (from the start of the first call
    to the end of the second). Where in its call each reading fell is unknown, and on a loaded machine a
    call can last many milliseconds, so a figure is checked against the pair, not one length."""

    def __init__(self, shortest: float, longest: float) -> None:
        self.shortest, self.longest = shortest, longest

    def drawn(self, watts: float, rel: float = 0.0, abs: float = 0.0) -> Between:
        """The energy (J) of a steady ``watts`` over the window, within ``rel`` and ``abs`` of it (the device's own error)."""
        return Between(watts * self.shortest * (1 - rel) - abs, watts * self.longest * (1 + rel) + abs)


def timed_window(begin: Callable[[], object], end: Callable[[], T], seconds: float) -> tuple[T, Elapsed]:
    """``begin()``, about ``seconds`` of sleep, ``end()`` (a monitor's window: ``end`` returns its measurement),
    and how long the window between the two readings lasted, from the times around the two calls."""
    t0 = time.monotonic()
    begin()
    t1 = time.monotonic()
    time.sleep(seconds)
    t2 = time.monotonic()
    got = end()
    return got, Elapsed(t2 - t1, time.monotonic() - t0)


def energy_window(device: DeviceGroup, seconds: float) -> tuple[dict[str, float], Elapsed]:
    """Energy per device name over a window of about ``seconds`` (two ``read_energy`` calls), and the window's length."""
    t0 = time.monotonic()
    e0 = device.read_energy()
    t1 = time.monotonic()
    time.sleep(seconds)
    t2 = time.monotonic()
    e1 = device.read_energy()
    return {n: e1[n] - e0[n] for n in e0}, Elapsed(t2 - t1, time.monotonic() - t0)

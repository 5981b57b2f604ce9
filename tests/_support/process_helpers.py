"""Real processes for tests that list processes on a simulated GPU (energy attribution)."""

from __future__ import annotations

import getpass
import subprocess
import sys
import time

import pytest


def sleeping_processes():
    """A fixture body: ``spawn(tag)`` starts a real Python process that sleeps (``tag`` on its command
    line) and returns its PID once it runs; all are killed at the end."""
    started = []

    def spawn(tag):
        code = "import time; print('ready', flush=True); time.sleep(60)"
        p = subprocess.Popen([sys.executable, "-c", code, tag], stdout=subprocess.PIPE, text=True)
        started.append(p)
        assert p.stdout is not None and p.stdout.readline() == "ready\n"  # past exec: /proc shows its command line
        return p.pid

    yield spawn
    for p in started:
        p.kill()
        p.communicate()


def measure_window(dev, seconds=0.4, **monitor):
    """One window of ``seconds`` over device group ``dev`` (a :class:`zeus_core.Monitor` with ``monitor``)."""
    from zeus_core import Monitor

    mon = Monitor(dev, **monitor)
    mon.begin_window("w")
    time.sleep(seconds)
    return mon.end_window("w")


def assert_split_3_to_1(m, a, b, idle_w, basis):
    """Window ``m``'s attribution of ``gpu0``: process ``a`` ran 3 times ``b``'s work, beside the configured
    ``idle_w``; every joule charged, ``a`` described from ``/proc``; ``basis`` the shares' basis."""
    att = m.attribution["gpu0"]
    assert att.total_j == pytest.approx(m.energy["gpu0"])
    assert att.idle_j == pytest.approx(idle_w * m.time, rel=0.02)  # the configured idle power over the window
    by_pid = {p.pid: p for p in att.processes}
    assert by_pid[a].active_j == pytest.approx(3 * by_pid[b].active_j, rel=0.01)
    assert by_pid[a].energy_j + by_pid[b].energy_j == pytest.approx(m.energy["gpu0"])
    assert att.unattributed_j == 0.0
    assert "job-a" in by_pid[a].command and by_pid[a].user == getpass.getuser()
    assert (att.basis, att.scope, att.idle_source, att.estimate) == (basis, "process", "configured", True)


def assert_alone(m, pid, idle_w, basis):
    """Window ``m``'s attribution of ``gpu0``: process ``pid`` alone is charged every joule, the idle part at
    the ``idle_w`` learned while the GPU was free; ``basis`` the shares' basis."""
    att = m.attribution["gpu0"]
    (p,) = att.processes
    assert p.pid == pid and p.share == 1.0 and p.energy_j == pytest.approx(m.energy["gpu0"])
    assert att.idle_source == "learned" and att.idle_j == pytest.approx(idle_w * m.time, rel=0.05)
    assert att.basis == basis
    return att

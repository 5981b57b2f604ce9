"""``zeus`` puts back what a killed process left changed, after ``-q`` / ``-v`` configured its loggers."""

from __future__ import annotations

import subprocess
import sys

from zeus_test_helpers import run_cli

from zeus_core import hookimpl
from zeus_core.engine.registry import load
from zeus_core.journal import Journal, journal_path

KEY = "dev0:power_limit"


def _registry(restored: list):
    class Plugin:
        @hookimpl
        def zeus_register_restorers(self, register):
            register("testdev", lambda key, original: restored.append((key, original)))

    return load(extra_plugins=[("testdev", Plugin())], entry_points=False)


def _left_by_a_killed_process(owner: str = "testdev") -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with Journal(journal_path()) as j:
        j.add(owner, KEY, 250)
        j._conn.execute("UPDATE journal SET pid = ?", (dead.pid,))


def test_quiet_hides_what_was_restored():
    _left_by_a_killed_process()
    restored: list = []
    r = run_cli(_registry(restored), "-q", "plugins")
    assert r.exit_code == 0
    assert restored == [(KEY, 250)]
    assert r.output == ""  # not the restore message, not the table


def test_by_default_the_restore_is_a_warning_of_zeus_journal():
    _left_by_a_killed_process()
    restored: list = []
    r = run_cli(_registry(restored), "plugins", "--json")
    assert restored == [(KEY, 250)]
    assert f"zeus.journal warning: restored testdev {KEY} to 250 (left by a killed process)" in r.output
    assert Journal(journal_path()).entries() == []


def test_what_cannot_be_restored_is_an_error_that_quiet_still_shows():
    _left_by_a_killed_process(owner="gone-plugin")
    r = run_cli(_registry([]), "-q", "plugins")
    assert "zeus.journal error: a killed process left gone-plugin setting" in r.output
    assert len(Journal(journal_path()).entries()) == 1


def test_a_damaged_journal_is_an_error_naming_the_file_and_the_command_still_runs():
    path = journal_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a database " * 100)
    r = run_cli(_registry([]), "-q", "plugins")
    assert r.exit_code == 0
    assert f"zeus.journal error: could not check the settings journal {path}: file is not a database" in r.output
    assert "move it aside" in r.output
    assert path.read_bytes() == b"not a database " * 100  # left as it was, for the user to look at

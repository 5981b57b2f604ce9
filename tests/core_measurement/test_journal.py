"""The device-settings journal: restore on close, exit, exception, signals, and after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from zeus_core.journal import Journal, RestoreError, SettingsGuard, journal_path, process_alive, restore_pending

REPO = Path(__file__).resolve().parents[2]


class FileSetting:
    """A 'device setting' kept in a JSON file, visible to every process like a driver's."""

    def __init__(self, path: Path, value: int = 300) -> None:
        self.path = path
        path.write_text(json.dumps({"power_limit": value}))

    def get(self) -> int:
        return json.loads(self.path.read_text())["power_limit"]

    def restore(self, key: str, original) -> None:
        assert key == "dev0:power_limit"
        self.path.write_text(json.dumps({"power_limit": original}))


def entries():
    with Journal(journal_path()) as j:
        return j.entries()


def test_guard_journals_before_change_and_clears_after_restore(tmp_path):
    dev = FileSetting(tmp_path / "dev.json")
    guard = SettingsGuard("testdev", dev.restore)
    with guard.changing("dev0:power_limit", dev.get()):
        assert [e[1:4] for e in entries()] == [("testdev", "dev0:power_limit", 300)]
        dev.restore("dev0:power_limit", 150)
    with guard.changing("dev0:power_limit", dev.get()):  # second change keeps the first original
        dev.restore("dev0:power_limit", 100)
    assert guard.pending == {"dev0:power_limit": 300}
    assert len(entries()) == 1
    guard.close()
    assert dev.get() == 300
    assert entries() == []


def test_failed_change_leaves_no_entry(tmp_path):
    guard = SettingsGuard("testdev", lambda k, o: None)
    with pytest.raises(PermissionError):
        with guard.changing("dev0:power_limit", 300):
            raise PermissionError("no")
    assert entries() == [] and guard.pending == {}


def test_failed_restore_keeps_entry_and_says_which(tmp_path):
    def broken(key, original):
        raise OSError("driver gone")

    guard = SettingsGuard("testdev", broken)
    guard.record("dev0:power_limit", 300)
    with pytest.raises(RestoreError, match="testdev dev0:power_limit: OSError: driver gone"):
        guard.close()
    assert len(entries()) == 1
    guard.restorer = lambda k, o: None
    guard.close()
    assert entries() == []


CHILD = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from pathlib import Path
    from zeus_core import SettingsGuard
    path = Path(sys.argv[1]); mode = sys.argv[2]
    def restore(key, original):
        path.write_text(json.dumps({"power_limit": original}))
    guard = SettingsGuard("testdev", restore)
    with guard.changing("dev0:power_limit", json.loads(path.read_text())["power_limit"]):
        path.write_text(json.dumps({"power_limit": 125}))
    if mode == "raise":
        raise RuntimeError("training crashed")
    if mode == "sigint":
        signal.signal(signal.SIGINT, signal.default_int_handler)
    print("ready", flush=True)
    time.sleep(60)
    """
)


def start_child(tmp_path: Path, mode: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path / "dev.json"), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def wait_ready(p: subprocess.Popen) -> None:
    line = p.stdout.readline()
    assert line.strip() == "ready", p.stderr.read()


def test_sigkilled_process_is_restored_at_next_start(tmp_path, caplog):
    dev = FileSetting(tmp_path / "dev.json")
    p = start_child(tmp_path, "sleep")
    wait_ready(p)
    assert dev.get() == 125 and len(entries()) == 1
    # While the process lives, a `zeus` start must leave its setting alone.
    assert restore_pending({"testdev": dev.restore}) == 0
    assert dev.get() == 125
    p.kill()
    p.wait()
    assert dev.get() == 125  # SIGKILL: nothing in the process could run
    assert restore_pending({"testdev": dev.restore}) == 1
    assert dev.get() == 300
    assert entries() == []
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("zeus.journal", "WARNING", "restored testdev dev0:power_limit to 300 (left by a killed process)")
    ]
    assert restore_pending({"testdev": dev.restore}) == 0


@pytest.mark.parametrize("mode,how", [("sleep", signal.SIGTERM), ("sigint", signal.SIGINT), ("raise", None)])
def test_signals_and_exceptions_restore_in_process(tmp_path, mode, how):
    dev = FileSetting(tmp_path / "dev.json")
    p = start_child(tmp_path, mode)
    if how is not None:
        wait_ready(p)
        assert dev.get() == 125
        p.send_signal(how)
    rc = p.wait(timeout=30)
    assert rc != 0
    if how is signal.SIGTERM:
        assert rc == -signal.SIGTERM  # still dies of the signal, after restoring
    assert dev.get() == 300
    assert entries() == []


def test_unknown_owner_is_kept_and_named(tmp_path, caplog):
    with Journal(journal_path()) as j:
        j.add("gone-plugin", "x:1:power_limit", 250)
        j._conn.execute("UPDATE journal SET pid = ?", (_dead_pid(),))
    assert restore_pending({}) == 0
    assert [(r.name, r.levelname) for r in caplog.records] == [("zeus.journal", "ERROR")]
    assert "no installed plugin restores 'gone-plugin'" in caplog.text
    assert len(entries()) == 1


def test_oldest_original_wins_and_live_keys_wait(tmp_path):
    dead = _dead_pid()
    restored = []
    with Journal(journal_path()) as j:
        j.add("testdev", "k", 300)  # first process: saw 300
        j.add("testdev", "k", 200)  # second process: saw the first one's 200
        j.add("testdev", "busy", 1)
        j._conn.execute("UPDATE journal SET pid = ? WHERE key = 'k'", (dead,))
    # 'busy' belongs to this (live) process
    assert restore_pending({"testdev": lambda k, o: restored.append((k, o))}) == 1
    assert restored == [("k", 300)]
    assert [e[2] for e in entries()] == ["busy"]


def test_reused_pid_counts_as_dead(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.05)
        assert process_alive(p.pid, since=time.time() - 3600) is False  # started long after the entry
        assert process_alive(p.pid, since=time.time() + 5) is True
    finally:
        p.kill()
        p.wait()


def test_no_journal_file_is_cheap_and_creates_nothing():
    assert restore_pending({}) == 0
    assert not journal_path().exists()


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_unwritable_journal_refuses_the_change(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("ZEUS_STATE_DIR", str(blocker / "state"))
    guard = SettingsGuard("testdev", lambda k, o: None)
    changed = []
    with pytest.raises(ValueError, match="cannot journal testdev setting dev0:power_limit .*Set ZEUS_STATE_DIR"):
        with guard.changing("dev0:power_limit", 300):
            changed.append(True)
    assert changed == [] and guard.pending == {}


def test_a_journal_kept_in_a_whole_store_file_is_still_restored(tmp_path):
    """Journals written before the journal had a file of its own were zeus stores with a ``journal`` table."""
    import sqlite3

    from zeus_core.engine.stores.sqlite import Store

    with Store(journal_path()) as s, s.transaction() as tx:  # the store's schema, journal table included
        tx.set("k", 1)
    with sqlite3.connect(journal_path()) as c:
        c.execute(
            "INSERT INTO journal (owner, key, original, pid, created) VALUES (?,?,?,?,?)",
            ("testdev", "dev0:power_limit", json.dumps(275), _dead_pid(), time.time()),
        )
    restored = []
    assert restore_pending({"testdev": lambda k, o: restored.append((k, o))}) == 1
    assert restored == [("dev0:power_limit", 275)] and entries() == []
    with Store(journal_path()) as s:  # still the store it was
        assert s.get("k") == 1


def test_a_new_journal_file_holds_the_journal_table_alone(tmp_path):
    guard = SettingsGuard("testdev", lambda k, o: None)
    guard.record("dev0:power_limit", 300)
    try:
        import sqlite3

        with sqlite3.connect(journal_path()) as c:
            tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert tables - {"sqlite_sequence"} == {"journal"}
    finally:
        guard.close()
    assert entries() == []

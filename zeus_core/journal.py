"""The device-settings journal: never leave a device changed.

A plugin that changes a machine-wide setting (a GPU power limit, locked
clocks) journals the setting's original value *before* changing it, in the
machine-wide journal (:class:`Journal`, the SQLite file ``journal.sqlite`` under
:func:`state_dir`). The setting is then put back, and its entry cleared:

* by the plugin's ``close()`` (normal end, and exceptions, through the runner);
* at interpreter exit (``atexit``: an uncaught exception, ``sys.exit``, Ctrl-C);
* on SIGTERM and SIGHUP whose handler was the default (killing): restore, then
  die of the signal as before;
* after SIGKILL, when nothing in the process can run: the next ``zeus`` start
  calls :func:`restore_pending`, which restores every entry whose process is dead
  and logs what it did to the ``zeus.journal`` logger.

Plugins use it through :class:`SettingsGuard`::

    guard = SettingsGuard("nvml", restore_setting)     # restore_setting(key, original)
    with guard.changing(f"gpu:{uuid}:power_limit", current_mw):
        nvml.set_power_limit(...)                      # a failure here drops the entry
    ...
    guard.restore(f"gpu:{uuid}:power_limit")           # or guard.close() for all

The same ``restore_setting`` function is registered through the
``zeus_register_restorers`` hook, so the crash path and the normal path run
the same code.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from zeus_core.errors import DeviceError, RunFailed
from zeus_core.files import connect_shared

Restorer = Callable[[str, Any], Any]

log = logging.getLogger("zeus.journal")

_lock = threading.RLock()
_guards: list[SettingsGuard] = []
_installed = False


def state_dir() -> Path:
    """Machine-wide zeus state folder: ``$ZEUS_STATE_DIR`` or ``~/.local/state/zeus``."""
    env = os.environ.get("ZEUS_STATE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "zeus"


def journal_path() -> Path:
    """The machine-wide journal file."""
    return state_dir() / "journal.sqlite"


class JournalEntry(NamedTuple):
    """A device setting changed by process ``pid`` at ``created`` (epoch seconds), to put back."""

    id: int
    owner: str
    key: str
    original: Any
    pid: int
    created: float


#: The one table of a journal file. Journals written before it had a file of its own were whole
#: zeus stores (``zeus_core.engine.stores.sqlite``) with this same table: they read the same.
_TABLE = """CREATE TABLE IF NOT EXISTS journal (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    owner TEXT NOT NULL,
    key TEXT NOT NULL,
    original TEXT NOT NULL,
    pid INTEGER NOT NULL,
    created REAL NOT NULL
)"""


class Journal:
    """One journal file, opened on first use (and created by the first :meth:`add`). Safe to use
    from several processes at once: every write is one ``BEGIN IMMEDIATE`` transaction, WAL
    lets readers go on, and a busy file is waited for up to ``timeout_s``."""

    def __init__(self, path: os.PathLike[str] | str, timeout_s: float = 60.0) -> None:
        self.path = Path(path)
        self.timeout_s = timeout_s
        self._conn: sqlite3.Connection | None = None

    def _connection(self, create: bool) -> sqlite3.Connection | None:
        if self._conn is not None:
            return self._conn
        if not create and not self.path.exists():
            return None
        self._conn = connect_shared(self.path, self.timeout_s, lambda conn: conn.execute(_TABLE))
        return self._conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self._connection(create=True)
        assert conn is not None
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def add(self, owner: str, key: str, original: Any) -> int:
        """Journal ``original`` of ``owner``'s setting ``key`` for this process; the entry's id."""
        with self._transaction() as conn:
            cur = conn.execute(
                "INSERT INTO journal (owner, key, original, pid, created) VALUES (?,?,?,?,?)",
                (owner, key, json.dumps(original), os.getpid(), time.time()),
            )
            assert cur.lastrowid is not None  # an INSERT sets it
            return cur.lastrowid

    def remove(self, *entry_ids: int) -> None:
        """Clear these entries, together."""
        with self._transaction() as conn:
            conn.executemany("DELETE FROM journal WHERE id = ?", [(i,) for i in entry_ids])

    def entries(self) -> list[JournalEntry]:
        """Pending entries, oldest first (none, and no file made, where there is no journal yet)."""
        conn = self._connection(create=False)
        if conn is None:
            return []
        rows = conn.execute("SELECT id, owner, key, original, pid, created FROM journal ORDER BY id").fetchall()
        return [JournalEntry(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5]) for r in rows]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:  # the connection only: each write committed already
        self.close()


class RestoreError(RunFailed):
    """One or more settings could not be put back; the message lists them and why."""


class SettingsGuard:
    """The settings one plugin instance changed, journaled and restorable.

    ``restorer(key, original)`` puts setting ``key`` back to ``original``
    (a JSON value). A key is journaled once: a second change of the same key
    keeps the first original, which is what must come back.
    """

    def __init__(self, owner: str, restorer: Restorer, journal_path: os.PathLike[str] | str | None = None) -> None:
        self.owner = owner
        self.restorer = restorer
        #: the journal file; None: the machine-wide one under ``$ZEUS_STATE_DIR``
        #: (``zeus daemon`` keeps its own, under its ``journal_dir``)
        self.journal_path = journal_path
        self._entries: dict[str, tuple[int, Any]] = {}
        self._journal: Journal | None = None
        self._journal_pid = 0
        self._pid = os.getpid()
        with _lock:
            _guards.append(self)
            _install_exit_handlers()

    def _j(self) -> Journal:
        """This guard's connection to its journal, opened on first use
        (and again in a forked child, where the parent's connection must not be used)."""
        if self._journal is None or self._journal_pid != os.getpid():
            self._journal = Journal(journal_path() if self.journal_path is None else self.journal_path)
            self._journal_pid = os.getpid()
        return self._journal

    @property
    def pending(self) -> dict[str, Any]:
        """Changed settings not yet restored: key -> original."""
        return {k: v[1] for k, v in self._entries.items()}

    def record(self, key: str, original: Any) -> bool:
        """Journal ``original`` for ``key`` before a change; False if already journaled."""
        with _lock:
            if key in self._entries:
                return False
            if self not in _guards:  # reused after close()
                _guards.append(self)
            try:
                entry_id = self._j().add(self.owner, key, original)
            except (sqlite3.Error, OSError) as e:
                where = self.journal_path or journal_path()
                raise DeviceError(
                    f"cannot journal {self.owner} setting {key} in {where} ({e}); "
                    "zeus changes no device setting it could not put back after a crash. "
                    "Set ZEUS_STATE_DIR to a writable folder"
                ) from e
            self._entries[key] = (entry_id, original)
            return True

    def forget(self, key: str) -> None:
        """Clear ``key``'s entry without restoring (the change did not happen)."""
        with _lock:
            got = self._entries.pop(key, None)
            if got is not None:
                self._j().remove(got[0])

    @contextmanager
    def changing(self, key: str, original: Any) -> Iterator[None]:
        """Journal, then run the body that changes the setting; if the body fails
        and the entry is new, the entry is dropped (nothing was changed)."""
        new = self.record(key, original)
        try:
            yield
        except BaseException:
            if new:
                self.forget(key)
            raise

    def restore(self, key: str) -> bool:
        """Put ``key`` back and clear its entry; False if it was not changed.

        If the restorer fails the entry stays, so that a later ``zeus`` start
        tries again, and the error propagates.
        """
        with _lock:
            got = self._entries.get(key)
            if got is None:
                return False
            self.restorer(key, got[1])
            self.forget(key)
            return True

    def restore_all(self) -> None:
        """Restore every pending setting, newest first; raise :class:`RestoreError` listing failures."""
        errors = []
        for key in reversed(list(self._entries)):
            try:
                self.restore(key)
            except Exception as e:  # noqa: BLE001 - try the others, then report all
                errors.append(f"{self.owner} {key}: {type(e).__name__}: {e}")
        if errors:
            raise RestoreError("could not restore " + "; ".join(errors) + " (the journal keeps them for the next `zeus` start)")

    def close(self) -> None:
        """Restore everything and stop watching process exit for this guard."""
        try:
            self.restore_all()
        finally:
            with _lock:
                if not self._entries:
                    if self in _guards:
                        _guards.remove(self)
                    if self._journal is not None and self._journal_pid == os.getpid():
                        self._journal.close()
                    self._journal = None


# --------------------------------------------------------------------------- process exit


def restore_all_guards() -> list[str]:
    """Restore the settings of every live guard of this process; return the failures."""
    errors = []
    with _lock:
        # A forked child (a data-loader worker) inherits the guards but changed nothing.
        guards = [g for g in reversed(_guards) if g._pid == os.getpid()]
    for g in guards:
        try:
            g.close()
        except Exception as e:  # noqa: BLE001 - an exit path must not raise
            errors.append(str(e))
    return errors


def _at_exit() -> None:
    errors = restore_all_guards()
    if errors:
        from rich.console import Console
        from rich.markup import escape

        Console(stderr=True).print(f"[bold red]zeus:[/] {escape('; '.join(errors))}")


def _on_fatal_signal(signum: int, _frame: Any) -> None:
    """Restore, then die of the same signal as the default action would have."""
    _at_exit()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_exit_handlers() -> None:
    """Once per process: atexit, plus SIGTERM/SIGHUP where their action is the default kill.

    A program (or the ``zeus`` CLI) that installed its own handler keeps it; such
    handlers end in ``sys.exit`` or an exception, which reaches the atexit path.
    Signal handlers can only be set from the main thread; elsewhere atexit and
    :func:`restore_pending` remain.
    """
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(_at_exit)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _on_fatal_signal)


# --------------------------------------------------------------------------- after a crash


def _boot_time() -> float | None:
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def _started_at(pid: int) -> float | None:
    """Unix time process ``pid`` started (Linux ``/proc``), or None where unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    boot = _boot_time()
    if boot is None:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def process_alive(pid: int, since: float | None = None) -> bool:
    """Whether the process that wrote a journal entry at ``since`` still runs.

    A pid reused by a process that started after the entry was written is not
    that process (1 s of slack for clock-tick rounding).
    """
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    if since is not None:
        started = _started_at(pid)
        if started is not None and started > since + 1.0:
            return False
    return True


def restore_pending(restorers: dict[str, Restorer], *, path: os.PathLike[str] | str | None = None, logger: logging.Logger = log) -> int:
    """Restore settings left by dead processes (SIGKILL, power loss); return how many.

    Called at every ``zeus`` start, once its logging is configured: what it restores is a
    warning of the ``zeus.journal`` logger, what it cannot restore an error. For each
    (owner, key) only held by dead processes, the oldest journaled original (the value
    before any zeus process touched it) is restored and the entries are cleared. A key
    that a live process also holds is left for that process and a later start. An owner
    without a restorer (plugin uninstalled) or a restorer that fails is reported and kept.
    ``path``: another journal than the machine-wide one (``zeus daemon``'s); ``logger``: where to
    report instead (``zeus daemon``'s own log).
    """
    path = Path(path) if path is not None else journal_path()
    if not path.exists():
        return 0
    with Journal(path) as j:
        entries = j.entries()
        if not entries:
            return 0
        first_entry: dict[int, float] = {}
        for e in entries:
            first_entry[e.pid] = min(first_entry.get(e.pid, e.created), e.created)
        alive = {pid: process_alive(pid, since) for pid, since in first_entry.items()}
        live_keys = {(e.owner, e.key) for e in entries if alive[e.pid]}
        groups: dict[tuple[str, str], list[tuple[int, Any]]] = {}
        for e in entries:
            if not alive[e.pid] and (e.owner, e.key) not in live_keys:
                groups.setdefault((e.owner, e.key), []).append((e.id, e.original))
        restored = 0
        for (owner, key), items in groups.items():
            restorer = restorers.get(owner)
            if restorer is None:
                from zeus_core import catalog  # install hints: read only for this message

                logger.error(
                    "a killed process left %s setting %s changed, and no installed plugin restores %r settings: "
                    "install that plugin (%s) and run zeus again",
                    owner,
                    key,
                    owner,
                    catalog.hint("restorer", owner) or "the device plugin that changed it",
                )
                continue
            original = items[0][1]  # entries are oldest first
            try:
                restorer(key, original)
            except Exception as e:  # noqa: BLE001 - report, keep the entry for next time
                logger.error("could not restore %s %s to %r left by a killed process: %s: %s", owner, key, original, type(e).__name__, e)
                continue
            j.remove(*(entry_id for entry_id, _ in items))
            logger.warning("restored %s %s to %r (left by a killed process)", owner, key, original)
            restored += 1
        return restored


__all__ = [
    "SettingsGuard",
    "Restorer",
    "RestoreError",
    "Journal",
    "JournalEntry",
    "restore_pending",
    "restore_all_guards",
    "state_dir",
    "journal_path",
    "process_alive",
]

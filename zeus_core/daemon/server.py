"""The daemon: a Unix socket, one thread per client, and the settings clients hold.

Start-up, in this order (any failure stops the daemon before it serves):

1. read and check the configuration (:mod:`zeus_core.daemon.config`);
2. load only the configured plugins and build each served service;
3. put back what a SIGKILLed daemon left changed (its journal, under
   ``journal_dir``; :func:`zeus_core.journal.restore_pending`);
4. create the socket with its owner, group and mode already set (it is bound
   under a temporary name with a 0600 umask and renamed into place), refusing
   to replace the socket of a daemon that still answers.

Each connection is checked against the allow-list with the kernel's
``SO_PEERCRED`` (pid, uid, gid of the peer; a client cannot lie about them),
then served frame by frame. Every operation, release and restore runs on one
*device thread*, in arrival order: two clients never interleave driver calls
or journal writes, and the journal's SQLite connection stays in the thread
that opened it.

Who holds what (:class:`Holds`): the first change of a device setting by any
client journals the setting's original value (through a
:class:`~zeus_core.journal.SettingsGuard` per restorer owner, whose journal is
the daemon's own); each client that changes the setting then *holds* it. When
a client disconnects or dies (the kernel closes its socket), its holds end; a
setting nobody holds any more is put back to the journaled original. So two
clients on one GPU cannot undo each other's changes halfway, and the original
comes back once, when the last of them leaves. SIGTERM, SIGINT and SIGHUP end
the daemon cleanly: it stops accepting, ends every session (restoring), and
removes its socket.

The same socket speaks upstream zeusd's HTTP API (:mod:`zeus_core.daemon.http`,
:mod:`zeus_core.daemon.api`): a connection whose first byte is a letter is HTTP,
one whose first byte is zero is the private framing; both pass the same
credential check and caps first. With ``tcp`` configured, a second listener
serves HTTP over TCP (TLS with ``tls_cert``/``tls_key``); its connections count
towards ``max_clients``. Settings changed over HTTP are held by the request's
*principal* (the token's subject; without auth, the peer's uid on the Unix socket),
a session that outlives the connections: they stay until that principal resets
them, or the daemon stops and puts every original back.
"""

from __future__ import annotations

import logging
import math
import os
import pwd
import signal
import socket
import stat
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from zeus_core import catalog
from zeus_core.daemon.config import ResolvedConfig
from zeus_core.daemon.overrides import Overrides
from zeus_core.daemon.protocol import (
    MAX_FRAME,
    PROTOCOL_VERSION,
    FrameError,
    decode,
    encode,
    error_reply,
    ok_reply,
    read_frame,
)
from zeus_core.engine.registry import Registry
from zeus_core.engine.validation import Problem, structure
from zeus_core.errors import DeviceError, RunFailed
from zeus_core.journal import SettingsGuard, restore_pending
from zeus_core.privileged import (
    Operation,
    OperationFailed,
    Refused,
    ServiceConfigError,
    ServiceContext,
    operations_of,
)

if TYPE_CHECKING:  # the HTTP side (h11, PyJWT) loads when the daemon builds its services
    from zeus_core.daemon.http import NodeApi

#: how long the rest of a frame may take once its first byte arrived
FRAME_TIMEOUT_S = 10.0
#: a refusal of one kind for one user is logged at most once in this many seconds (the rest are counted)
REFUSAL_LOG_EVERY_S = 10.0
_PEERCRED = struct.Struct("3i")

log = logging.getLogger("zeus.daemon")


class RefusalLog:
    """Refusals logged at WARNING, at most one line per (kind, uid) every ``every_s`` seconds; the
    refusals in between are counted and said with the next line, so that a client hammering the
    socket cannot flood the log (or the disk under it)."""

    def __init__(self, every_s: float = REFUSAL_LOG_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self.clock = clock
        self._last: dict[tuple[str, int], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def __call__(self, kind: str, uid: int, message: str) -> bool:
        """Log ``message`` unless a ``kind`` refusal of ``uid`` was logged within ``every_s``; whether it was."""
        now = self.clock()
        with self._lock:
            last, held = self._last.get((kind, uid), (-math.inf, 0))
            if now - last < self.every_s:
                self._last[(kind, uid)] = (last, held + 1)
                return False
            self._last[(kind, uid)] = (now, 0)
            if len(self._last) > 10_000:  # forget the oldest
                for key in sorted(self._last, key=lambda k: self._last[k][0])[:5_000]:
                    del self._last[key]
        more = f" ({held} more {kind} refusals of uid {uid} in the last {now - last:.0f} s not logged)" if held else ""
        log.warning("%s%s", message, more)
        return True


class StartError(RunFailed):
    """The daemon cannot start (another daemon serves the socket, a service cannot open its device)."""


def daemon_version() -> str:
    try:
        return version("zeus-core")
    except PackageNotFoundError:
        return "0+unknown"


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@attrs.define(eq=False)
class Connection:
    """One client connection: who it is (from the kernel) and what it holds."""

    daemon: Daemon
    number: int
    pid: int
    uid: int
    gid: int
    user: str
    #: whether it ran an operation that changes a setting (its leaving is then logged)
    changed: bool = False

    def __str__(self) -> str:
        return f"client #{self.number} (pid {self.pid}, uid {self.uid} {self.user})"

    def change(self, owner: str, key: str, original: Any, apply: Callable[[], Any]) -> None:
        self.daemon.holds.change(self, owner, key, original, self.daemon.overrides.setter(owner, key, apply))

    def release(self, owner: str, key: str, reset: Callable[[], Any] | None = None) -> str:
        return self.daemon.holds.release(self, owner, key, self.daemon.overrides.resetter(owner, key, reset))

    def holds(self, owner: str, key: str) -> bool:
        return self.daemon.holds.held_by(self, owner, key)


class Holds:
    """Device settings changed for clients: journaled once, held per client, restored by the last holder."""

    def __init__(self, restorers: dict[str, Callable[[str, Any], Any]], journal_path: Path) -> None:
        self._restorers = restorers
        self._journal_path = journal_path
        self._guards: dict[str, SettingsGuard] = {}
        self._holders: dict[tuple[str, str], dict[int, Connection]] = {}

    def _guard(self, owner: str) -> SettingsGuard:
        guard = self._guards.get(owner)
        if guard is None:
            restorer = self._restorers.get(owner)
            if restorer is None:
                raise OperationFailed(
                    f"no loaded plugin restores {owner!r} settings, and the daemon changes nothing it could not put "
                    "back; add the plugin that registers it to the daemon's plugins"
                )
            guard = self._guards[owner] = SettingsGuard(owner, restorer, journal_path=self._journal_path)
        return guard

    def change(self, session: Connection, owner: str, key: str, original: Any, apply: Callable[[], Any]) -> None:
        guard = self._guard(owner)
        new = guard.record(key, original)
        try:
            apply()
        except BaseException:
            if new:
                guard.forget(key)
            raise
        if new:
            log.info("journaled %s %s: original %r", owner, key, original)
        self._holders.setdefault((owner, key), {})[session.number] = session

    def held_by(self, session: Connection, owner: str, key: str) -> bool:
        return session.number in self._holders.get((owner, key), {})

    def release(self, session: Connection, owner: str, key: str, reset: Callable[[], Any] | None = None) -> str:
        """End ``session``'s hold; restore when it was the last. Returns what happened:
        ``restored``, ``held`` (others still hold it), ``reset`` (nobody held it: ``reset()`` ran)
        or ``unchanged``."""
        holders = self._holders.get((owner, key), {})
        if session.number in holders:
            del holders[session.number]
            if holders:
                return "held"
            del self._holders[(owner, key)]
            original = self._guards[owner].pending.get(key)
            self._guards[owner].restore(key)
            log.info("restored %s %s to %r (%s released it)", owner, key, original, session)
            return "restored"
        if holders:
            other = next(iter(holders.values()))
            raise Refused(f"{key} is held by {other}; it goes back to its original when every client holding it disconnects")
        if reset is None:
            return "unchanged"
        reset()
        return "reset"

    def release_all(self, session: Connection) -> list[str]:
        """End every hold of ``session`` (it disconnected), newest first; return the failures."""
        errors = []
        for owner, key in reversed([k for k, v in self._holders.items() if session.number in v]):
            try:
                self.release(session, owner, key)
            except Exception as e:  # noqa: BLE001 - the journal keeps it for the next start
                errors.append(f"{owner} {key}: {type(e).__name__}: {e}")
        return errors

    def close(self) -> list[str]:
        """Restore everything still held (daemon exit); return the failures."""
        errors = []
        self._holders.clear()
        for guard in self._guards.values():
            pending = guard.pending
            try:
                guard.close()
            except Exception as e:  # noqa: BLE001 - the journal keeps them for the next start
                errors.append(str(e))
            for key, original in pending.items():
                if key not in guard.pending:
                    log.info("restored %s %s to %r (daemon exit)", guard.owner, key, original)
        return errors


def _peer(conn: socket.socket) -> tuple[int, int, int]:
    return _PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))


class Daemon:
    """``zeus daemon`` for one resolved configuration and registry."""

    def __init__(self, config: ResolvedConfig, registry: Registry) -> None:
        self.config = config
        self.registry = registry
        self.services: dict[str, Any] = {}
        self.operations: dict[str, tuple[str, Operation]] = {}  # "svc.op" -> (service, operation)
        #: [overrides]: setters run as the site's allowed commands; the restorers put those settings back through them
        served = list(config.services)
        service = config.raw.override_service or (served[0] if len(served) == 1 else None)
        self.overrides = Overrides(config.raw.overrides, config.raw.override_timeout_s, lambda: self.services, service)
        self._restorers = self.overrides.wrap(registry.restorers)
        self._restore_after_build = False
        self.holds = Holds(self._restorers, config.journal_path)
        self._device = ThreadPoolExecutor(1, thread_name_prefix="zeus-daemon-device")
        self._lock = threading.Lock()  # guards the session table only
        self._stop = threading.Event()
        self._sessions: dict[int, tuple[Connection, socket.socket]] = {}
        self._threads: list[threading.Thread] = []
        self._next = 0
        self.refused = RefusalLog()
        self._listener: socket.socket | None = None
        self._socket_ino: int | None = None
        self._tcp_listener: socket.socket | None = None
        self._tls: Any = None
        #: the daemon's own reads (discovery, power streams), in the log as client #0
        self.system_session = Connection(self, 0, os.getpid(), os.geteuid(), os.getegid(), "zeus-daemon")
        self._http_sessions: dict[str, Connection] = {}
        self.api: NodeApi | None = None

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def tcp_address(self) -> tuple[str, int] | None:
        """(host, port) the TCP listener is bound to (the port the kernel chose for port 0), or None."""
        return self._tcp_listener.getsockname()[:2] if self._tcp_listener is not None else None

    # -- start-up --

    def restore_left_behind(self) -> int:
        """Put back what a daemon killed with SIGKILL left changed (its journal). With overrides, once the
        services are built (:meth:`build_services`): an override's command names the GPU by its index."""
        path = self.config.journal_path
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.overrides and not self.services:
            self._restore_after_build = True
            return 0
        return restore_pending(self._restorers, path=path, logger=log)

    def build_services(self) -> None:
        """Build every served service; ServiceConfigError becomes a config problem with its path."""
        problems: list[Problem] = []
        ctx = ServiceContext(log=log)
        for name, options in self.config.services.items():
            reg = self.registry.services[name]
            try:
                self.services[name] = reg.factory(options, ctx)
            except ServiceConfigError as e:
                problems.append(Problem(("serve", name) + e.field, str(e)))
                continue
            except Exception as e:  # noqa: BLE001 - e.g. no driver: said plainly, exit 1
                self.close_services()
                raise StartError(f"service {name!r} cannot start: {e}") from e
            for op in operations_of(reg.factory).values():
                self.operations[f"{name}.{op.name}"] = (name, op)
        if problems:
            from zeus_core.daemon.config import ConfigError

            self.close_services()
            raise ConfigError(str(self.config.path), problems, self.config.lines)
        if self._restore_after_build:
            self._restore_after_build = False
            self.restore_left_behind()
        try:
            from zeus_core.daemon.http import NodeApi
        except ImportError as e:  # the core without its daemon extra: the private protocol only
            if self.config.raw.tcp or self.config.raw.auth:
                self.close_services()
                raise StartError(f"the HTTP API needs {e.name}: {catalog.install_command('zeus-core[daemon]')}") from None
            log.warning("the HTTP API is off: %s (%s)", e, catalog.install_command("zeus-core[daemon]"))
            return
        try:
            self.api = NodeApi(self)
        except Exception as e:  # noqa: BLE001 - a device that cannot be described, an unreadable secret: exit 1
            self.close_services()
            raise StartError(f"the HTTP API cannot start: {e}") from e

    def bind(self) -> None:
        """Create the listening socket with its final owner, group and mode before anyone can connect."""
        path = Path(self.config.raw.socket)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        try:
            st = path.lstat()
        except FileNotFoundError:
            st = None
        if st is not None:
            if not stat.S_ISSOCK(st.st_mode):
                raise StartError(f"{path} exists and is not a socket; remove it or set another socket in the configuration")
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            probe.settimeout(2.0)
            try:
                probe.connect(str(path))
            except OSError:
                path.unlink(missing_ok=True)  # left by a daemon that died
            else:
                raise StartError(f"another zeus daemon is serving {path}; stop it first (or set another socket)")
            finally:
                probe.close()
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            s.bind(str(tmp))
        finally:
            os.umask(old)
        try:
            if (self.config.socket_uid, self.config.socket_gid) != (os.geteuid(), os.getegid()):
                os.chown(tmp, self.config.socket_uid, self.config.socket_gid)
            os.chmod(tmp, self.config.socket_mode)
            s.listen(128)
            os.rename(tmp, path)
        except BaseException:
            s.close()
            tmp.unlink(missing_ok=True)
            raise
        s.settimeout(0.2)
        self._listener = s
        self._socket_ino = path.lstat().st_ino
        try:
            self._bind_tcp()
        except BaseException:
            self._listener.close()
            self._listener = None
            path.unlink(missing_ok=True)
            raise

    def _bind_tcp(self) -> None:
        from zeus_core.daemon.config import parse_host_port
        from zeus_core.daemon.http import tls_context

        raw = self.config.raw
        if raw.tcp is None:
            return
        host, port = parse_host_port(raw.tcp)
        if raw.tls_cert and raw.tls_key:
            try:
                self._tls = tls_context(raw.tls_cert, raw.tls_key)
            except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
                raise StartError(f"cannot load tls_cert {raw.tls_cert} and tls_key {raw.tls_key}: {e}") from None
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            family, _, _, _, address = infos[0]
            t = socket.socket(family, socket.SOCK_STREAM)
            t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            t.bind(address)
            t.listen(128)
        except OSError as e:
            raise StartError(f"cannot listen on tcp = {raw.tcp!r}: {e.strerror or e}") from None
        t.settimeout(0.2)
        self._tcp_listener = t
        from zeus_core.daemon.config import is_loopback

        if not is_loopback(host) and self._tls is None:
            log.warning("tcp %s is not loopback and has no TLS: tokens cross the network in clear; set tls_cert and tls_key", raw.tcp)

    # -- serving --

    def stop(self, *_args: Any) -> None:
        """Ask the accept loop to end (signal handlers call this)."""
        self._stop.set()

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self.stop)

    def serve_forever(self) -> None:
        assert self._listener is not None
        log.info(
            "serving %s on %s (owner %d, group %d, mode %04o) for uids %s and gids %s; pid %d",
            ", ".join(sorted(self.operations)),
            self.config.raw.socket,
            self.config.socket_uid,
            self.config.socket_gid,
            self.config.socket_mode,
            sorted(self.config.allowed_uids),
            sorted(self.config.allowed_gids),
            os.getpid(),
        )
        if self._tcp_listener is not None:
            log.info("serving the HTTP API on tcp %s:%d%s", *self.tcp_address, " (TLS)" if self._tls else "")  # type: ignore[misc]
            t = threading.Thread(target=self._accept_tcp, name="zeus-daemon-tcp", daemon=True)
            t.start()
        try:
            while not self._stop.is_set():
                try:
                    conn, _ = self._listener.accept()
                except TimeoutError:
                    continue
                except OSError as e:
                    if self._stop.is_set():
                        break
                    log.error("accept failed: %s", e)
                    continue
                self._start_session(conn)
        finally:
            self.shutdown()

    def _accept_tcp(self) -> None:
        listener = self._tcp_listener
        while listener is not None and not self._stop.is_set():
            try:
                conn, address = listener.accept()
            except TimeoutError:
                continue
            except OSError as e:
                if self._stop.is_set():
                    return
                log.error("tcp accept failed: %s", e)
                continue
            conn.settimeout(None)
            with self._lock:
                if len(self._sessions) < self.config.raw.max_clients:
                    self._next += 1
                    fresh = Connection(self, self._next, 0, -1, -1, f"tcp {address[0]}:{address[1]}")
                    self._sessions[fresh.number] = (fresh, conn)
                    session: Connection | None = fresh
                else:
                    session = None
            if session is None:
                self.refused("busy", -1, f"refused tcp {address[0]}: {self.config.raw.max_clients} clients already (max_clients)")
                conn.close()
                continue
            t = threading.Thread(target=self._serve_tcp, args=(session, conn, address), name="zeus-daemon-client", daemon=True)
            self._threads.append(t)
            t.start()

    def _serve_tcp(self, session: Connection, conn: socket.socket, address: Any) -> None:
        from zeus_core.daemon.http import HttpConnection, Peer

        try:
            if self._tls is not None:
                conn.settimeout(self.config.raw.first_frame_timeout_s)
                try:
                    conn = self._tls.wrap_socket(conn, server_side=True)
                except OSError as e:  # a client that does not speak TLS, or stalls in the handshake
                    log.debug("tls handshake with %s failed: %s", address[0], e)
                    return
                with self._lock:
                    if session.number in self._sessions:
                        self._sessions[session.number] = (session, conn)
            assert self.api is not None
            HttpConnection(self.api, conn, Peer(None, 0, -1, f"{address[0]}:{address[1]}")).serve()
        finally:
            with self._lock:
                self._sessions.pop(session.number, None)
            conn.close()

    def http_session(self, principal: str, peer: Any) -> Connection:
        """The session that holds what ``principal`` changes over HTTP (one per principal, for the daemon's life)."""
        with self._lock:
            session = self._http_sessions.get(principal)
            if session is None:
                self._next += 1
                uid = -1 if peer.uid is None else peer.uid
                session = self._http_sessions[principal] = Connection(self, self._next, peer.pid, uid, peer.gid, f"{principal} over http")
            return session

    def _start_session(self, conn: socket.socket) -> None:
        """Check the peer (its credentials, the allow-list, the caps) and serve it on a thread of its own;
        every refusal is an error reply, then the connection is closed, and it is logged (rate-limited)."""
        conn.settimeout(None)
        self._threads = [t for t in self._threads if t.is_alive()]
        try:
            pid, uid, gid = _peer(conn)
        except OSError as e:
            log.error("cannot read the peer's credentials (%s); closing", e)
            conn.close()
            return
        user = user_name(uid)
        cfg = self.config.raw
        if not self.allowed(uid, gid):
            self.refused("forbidden", uid, f"refused pid {pid} uid {uid} ({user}) gid {gid}: not in allow_users or allow_groups")
            self._send_and_close(
                conn,
                error_reply(
                    None,
                    "forbidden",
                    (
                        f"uid {uid} ({user}) may not use this daemon: the administrator adds the user to allow_users, or one "
                        f"of its groups to allow_groups, in {self.config.path}"
                    ),
                ),
            )
            return
        with self._lock:
            total = len(self._sessions)
            mine = sum(1 for s, _ in self._sessions.values() if s.uid == uid)  # TCP connections (uid -1) count to max_clients only
            per_user = min(cfg.max_clients_per_user, cfg.max_clients)
            if total < cfg.max_clients and mine < per_user:
                self._next += 1
                session = Connection(self, self._next, pid, uid, gid, user)
                self._sessions[session.number] = (session, conn)
            else:
                session = None
        if session is None:
            if mine >= per_user:
                self.refused(
                    "busy", uid, f"refused pid {pid} uid {uid} ({user}): it holds {mine} connections already (max_clients_per_user)"
                )
                why = (
                    f"uid {uid} ({user}) holds {mine} connections to this daemon already (max_clients_per_user); close "
                    "one, or ask the administrator to raise max_clients_per_user"
                )
            else:
                self.refused("busy", uid, f"refused pid {pid} uid {uid} ({user}): {total} clients already (max_clients)")
                why = f"the daemon serves {cfg.max_clients} clients already (max_clients); try again later"
            self._send_and_close(conn, error_reply(None, "busy", why))
            return
        t = threading.Thread(target=self._serve_client, args=(session, conn), name="zeus-daemon-client", daemon=True)
        self._threads.append(t)
        t.start()

    @staticmethod
    def _send_and_close(conn: socket.socket, reply: dict[str, Any]) -> None:
        try:
            conn.sendall(encode(reply))
        except OSError:
            pass
        finally:
            conn.close()

    def allowed(self, uid: int, gid: int) -> bool:
        """Root, a listed uid, or a user whose primary or supplementary groups meet the listed gids."""
        cfg = self.config
        if uid == 0 or uid in cfg.allowed_uids:
            return True
        groups = {gid}
        try:
            pw = pwd.getpwuid(uid)
            groups.update(os.getgrouplist(pw.pw_name, pw.pw_gid))
        except KeyError:
            pass
        return bool(groups & cfg.allowed_gids)

    def _serve_client(self, session: Connection, conn: socket.socket) -> None:
        # Connections come and go with every training process: logged at DEBUG. What a client
        # changes, and its leaving, and what is put back then, are logged at INFO.
        log.debug("%s connected", session)
        try:
            speaks = self._first_byte(conn)
            if speaks == "http" and self.api is not None:
                from zeus_core.daemon.http import HttpConnection, Peer

                assert self.api is not None
                HttpConnection(self.api, conn, Peer(session.uid, session.pid, session.gid, "unix")).serve()
            elif speaks == "silent":
                self._silent(session, conn)
            elif speaks == "frames" or speaks == "http":  # http without the extra: the framed loop says bad_frame
                self._session_loop(session, conn)
        finally:
            try:
                errors = self._on_device(self.holds.release_all, session)
            except RuntimeError:  # the device thread is gone: shutdown restored everything already
                errors = []
            with self._lock:
                self._sessions.pop(session.number, None)
            for failed in errors:
                log.error("could not restore %s after %s left (kept in the journal)", failed, session)
            log.log(logging.INFO if session.changed else logging.DEBUG, "%s disconnected", session)
            conn.close()

    def _first_byte(self, conn: socket.socket) -> str:
        """What the connection speaks, from its first byte (peeked: it stays for the reader): ``http`` (a
        method's letter), ``frames`` (a frame starts with the zero byte of its length), ``silent`` (nothing
        within first_frame_timeout_s) or ``gone``."""
        conn.settimeout(self.config.raw.first_frame_timeout_s)
        try:
            first = conn.recv(1, socket.MSG_PEEK)
        except TimeoutError:
            return "silent"
        except OSError:
            return "gone"
        finally:
            conn.settimeout(None)
        if not first:
            return "gone"
        return "http" if first.isalpha() else "frames"

    def _silent(self, session: Connection, conn: socket.socket) -> None:
        self.refused(
            "silent",
            session.uid,
            f"closed {session}: no request within {self.config.raw.first_frame_timeout_s:g} s of connecting (first_frame_timeout_s)",
        )
        self._send(conn, error_reply(None, "timeout", "no request within first_frame_timeout_s of connecting"))

    def _session_loop(self, session: Connection, conn: socket.socket) -> None:
        first = True
        while not self._stop.is_set():
            try:
                if first:  # a client says hello at once; a connection that says nothing holds a slot for nothing
                    conn.settimeout(self.config.raw.first_frame_timeout_s)
                body = read_frame(conn, FRAME_TIMEOUT_S)
            except TimeoutError:
                self._silent(session, conn)
                return
            except FrameError as e:
                log.warning("%s sent a bad frame: %s", session, e)
                if not self._send(conn, error_reply(None, "bad_frame", str(e))) or e.fatal:
                    return
                continue
            except OSError:
                return
            if body is None:
                return
            if first:
                first = False
                conn.settimeout(None)
            try:
                msg = decode(body)
            except FrameError as e:
                log.warning("%s sent a bad frame: %s", session, e)
                if not self._send(conn, error_reply(None, "bad_frame", str(e))):
                    return
                continue
            if not self._send(conn, self.dispatch(session, msg)):
                return

    def _send(self, conn: socket.socket, reply: dict[str, Any]) -> bool:
        try:
            frame = encode(reply)
        except (ValueError, TypeError) as e:
            frame = encode(error_reply(reply.get("id"), "failed", f"the operation's result cannot be sent ({e})"))
        try:
            conn.sendall(frame)
            return True
        except OSError:
            return False

    def dispatch(self, session: Connection, msg: dict[str, Any]) -> dict[str, Any]:
        """The reply to one request. Never raises: every failure is an error reply."""
        req_id = msg.get("id")
        if not (
            req_id is None or (isinstance(req_id, int) and not isinstance(req_id, bool)) or (isinstance(req_id, str) and len(req_id) <= 64)
        ):
            return error_reply(None, "bad_request", "id must be an integer or a string of at most 64 characters")
        extra = sorted(set(msg) - {"id", "op", "args"})
        if extra:
            return error_reply(req_id, "bad_request", f"unknown request keys {extra}; a request has id, op and args")
        op = msg.get("op")
        args = msg.get("args", {})
        if not isinstance(op, str) or not op:
            return error_reply(req_id, "bad_request", "op must name an operation (a string)")
        if not isinstance(args, dict):
            return error_reply(req_id, "bad_request", f"args must be an object, got {type(args).__name__}")
        if op == "hello":
            return ok_reply(req_id, self.hello(session))
        if op == "ping":
            return ok_reply(req_id, {})
        entry = self.operations.get(op)
        if entry is not None and entry[1].changes and "gpu-control" not in self.config.raw.enable:
            return error_reply(
                req_id, "refused", f"{op}: this daemon only monitors (its configuration's enable lacks gpu-control): it changes no setting"
            )
        entry = self.operations.get(op)
        if entry is None:
            return self._unknown(req_id, op)
        service_name, operation = entry
        problems: list[Problem] = []
        parsed = structure(operation.args, args, ("args",), problems)
        if parsed is None:
            text = "; ".join(f"{p.message} @ {p.jsonpath()}" for p in problems)
            log.warning("%s: %s refused, invalid arguments: %s", session, op, text)
            return error_reply(
                req_id, "invalid_arguments", f"{op}: {text}", {"problems": [{"path": p.jsonpath(), "message": p.message} for p in problems]}
            )
        method = getattr(self.services[service_name], operation.method)
        level = logging.INFO if operation.changes else logging.DEBUG
        try:
            result = self._on_device(self.overrides.running(method), parsed, session)
        except Refused as e:
            log.warning("%s: %s %s refused: %s", session, op, args, e)
            return error_reply(req_id, "refused", f"{op}: {e}")
        except (OperationFailed, DeviceError) as e:
            log.error("%s: %s %s failed: %s", session, op, args, e)
            return error_reply(req_id, "failed", f"{op}: {e}", getattr(e, "detail", None))
        except (ValueError, TypeError) as e:
            log.warning("%s: %s %s refused: %s", session, op, args, e)
            return error_reply(req_id, "invalid_arguments", f"{op}: {e}")
        except Exception as e:  # noqa: BLE001 - a plugin's bug must not take the daemon down
            log.error("%s: %s %s failed:\n%s", session, op, args, traceback.format_exc())
            return error_reply(req_id, "failed", f"{op}: {type(e).__name__}: {e}")
        log.log(level, "%s: %s %s -> %s", session, op, args, result)
        session.changed = session.changed or operation.changes
        return ok_reply(req_id, result)

    def _on_device(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn`` on the device thread and return (or raise) what it did."""
        return self._device.submit(fn, *args).result()

    def _unknown(self, req_id: Any, op: str) -> dict[str, Any]:
        service = op.partition(".")[0]
        if service in self.registry.services and service not in self.services:
            return error_reply(
                req_id,
                "refused",
                (f"{op}: this daemon does not serve {service!r} (its configuration {self.config.path} has no [serve.{service}] table)"),
            )
        return error_reply(
            req_id, "unknown_operation", f"unknown operation {op!r}; this daemon serves: {', '.join(sorted(self.operations)) or 'nothing'}"
        )

    def hello(self, session: Connection) -> dict[str, Any]:
        return {
            "protocol": PROTOCOL_VERSION,
            "daemon": daemon_version(),
            "pid": os.getpid(),
            "session": session.number,
            "max_frame": MAX_FRAME,
            "operations": sorted(self.operations),
            "client": {"pid": session.pid, "uid": session.uid, "gid": session.gid, "user": session.user},
        }

    # -- shutdown --

    def shutdown(self) -> None:
        """Stop accepting, end every session (restoring what it held), restore the rest, remove the socket."""
        self._stop.set()
        if self._tcp_listener is not None:
            self._tcp_listener.close()
            self._tcp_listener = None
        if self.api is not None:
            self.api.close()  # ends the power streams (their connections close)
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            path = Path(self.config.raw.socket)
            try:
                if path.lstat().st_ino == self._socket_ino:
                    path.unlink()
            except FileNotFoundError:
                pass
        with self._lock:
            conns = [c for _, c in self._sessions.values()]
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self._threads:
            t.join(10.0)
        errors = self._on_device(self.holds.close)
        for e in errors:
            log.error("%s", e)
        self._on_device(self.close_services)
        self._device.shutdown()
        log.info("stopped")

    def close_services(self) -> None:
        """Close every service, after the HTTP API whose accounting and power streams read through them
        (left running, they would read closed drivers)."""
        if self.api is not None:
            self.api.close()
        for name, svc in self.services.items():
            close = getattr(svc, "close", None)
            if callable(close):
                try:
                    close()
                except Exception as e:  # noqa: BLE001 - report, close the others
                    log.error("service %s did not close cleanly: %s", name, e)


def setup_logging(destination: str, level: int = logging.INFO) -> None:
    """Log every change (at info; ``level``: the least shown) to stderr (systemd's journal), a file, or nowhere."""
    log.handlers.clear()
    log.propagate = False
    log.setLevel(level)
    if destination == "none":
        log.addHandler(logging.NullHandler())
        return
    handler: logging.Handler
    if destination == "stderr":
        handler = logging.StreamHandler(sys.stderr)
    else:
        Path(destination).parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(destination)
    handler.setFormatter(logging.Formatter("%(asctime)s zeus-daemon[%(process)d] %(levelname)s %(message)s"))
    log.addHandler(handler)

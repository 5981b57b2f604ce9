"""A throwaway PostgreSQL server on loopback, for tests and benchmarks.

``initdb`` and ``pg_ctl`` come from the machine's PostgreSQL server package
(``.ci/run`` installs it when absent). PostgreSQL refuses to run as root, so
under root both run as the ``postgres`` system user (or ``nobody``) in a
temporary folder that user owns. The server listens on 127.0.0.1 at a free
port, with its Unix socket in that folder, and a password (SCRAM) for TCP
clients, so tests see a real password to keep out of messages.

    with PgServer.start_new() as pg:
        url = pg.url(pg.create_database())

The server is stopped (and its folder removed) when the ``with`` block ends,
however it ends.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

USER = "zeus"
PASSWORD = "pg-Secret-9b1f"


def find_bin(name: str = "initdb") -> str | None:
    """A PostgreSQL server program: on PATH, or the newest /usr/lib/postgresql/*/bin."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0
    )
    return versions[-1] if versions else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_user() -> str | None:
    """Who runs the server: nobody else when we are not root; else ``postgres`` (or ``nobody``)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as")


class PgServer:
    def __init__(self, root: Path, port: int, user: str | None) -> None:
        self.root = root
        self.data = root / "data"
        self.port = port
        self.user = user
        self.log = root / "server.log"

    # -- running programs as the server's user --

    def _run(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C", "HOME": str(self.root)}
        return subprocess.run(
            list(args), user=self.user, cwd=self.root, env=env, capture_output=True, text=True, check=check, timeout=timeout
        )

    @classmethod
    def start_new(cls) -> PgServer:
        initdb = find_bin("initdb")
        if initdb is None:
            raise FileNotFoundError("PostgreSQL server programs (initdb, pg_ctl) not found: apt-get install postgresql")
        user = _server_user()
        root = Path(tempfile.mkdtemp(prefix="zeus-pg-"))
        if user is not None:
            pw = pwd.getpwnam(user)
            os.chown(root, pw.pw_uid, pw.pw_gid)
        os.chmod(root, 0o700)
        server = cls(root, free_port(), user)
        try:
            pwfile = root / "pw"
            pwfile.write_text(PASSWORD + "\n")
            if user is not None:
                os.chown(pwfile, pwd.getpwnam(user).pw_uid, -1)
            server._run(
                initdb,
                "-D",
                str(server.data),
                "-U",
                USER,
                f"--pwfile={pwfile}",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            )
            pwfile.unlink()
            server.start()
        except BaseException:
            server.remove()
            raise
        return server

    def start(self) -> None:
        opts = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=300 -c shared_buffers=32MB"
        )
        self._run(find_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", opts, "start")

    def stop(self, mode: str = "fast") -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(find_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop", check=False)

    def remove(self) -> None:
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PgServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    # -- clients --

    def url(self, database: str = "postgres", password: bool = True, **params: str) -> str:
        auth = f"{USER}:{PASSWORD}" if password else USER
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{database}" + (f"?{query}" if query else "")

    def create_database(self, name: str | None = None) -> str:
        import psycopg

        name = name or f"t{time.monotonic_ns()}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def sql(self, database: str, statement: str, params: tuple = ()) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description else []

    def wait_until_up(self, timeout: float = 30) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url(), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

"""The README's three commands for a cluster work as written (with free ports instead of 5433 and 8020).

Step 1 runs as a user other than root (as the README says), in a temporary folder;
step 2 in the background; step 3 must finish, through the service, with its history in
the database. Every server is stopped at the end, however the test ends.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from cluster_helpers import server_missing
from pg_server import find_bin, free_port

REPO = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## A cluster", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_the_readme_cluster_commands_work_as_written(tmp_path):
    initdb = find_bin("initdb")
    if initdb is None:
        server_missing("PostgreSQL server programs not found; .ci/run installs them")
    start_pg, serve, run = readme_commands()
    assert start_pg.startswith("initdb ") and serve.startswith("zeus serve ") and run.startswith("zeus run ")
    pg_port, serve_port = free_port(), free_port()
    start_pg = start_pg.replace("5433", str(pg_port))
    serve = serve.replace("5433", str(pg_port)).rstrip(" &") + f" --port {serve_port}"
    run = run.replace("8020", str(serve_port))

    user = "postgres" if os.geteuid() == 0 else None
    folder = Path(tempfile.mkdtemp(prefix="zeus-readme-pg-"))
    if user is not None:
        pw = pwd.getpwnam(user)
        os.chown(folder, pw.pw_uid, pw.pw_gid)
    bindir = str(Path(initdb).parent)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{bindir}{os.pathsep}{os.environ['PATH']}"}
    pg_env = {"PATH": env["PATH"], "LC_ALL": "C", "HOME": str(folder)}
    service = None
    try:
        subprocess.run(start_pg, shell=True, cwd=folder, user=user, env=pg_env, check=True, capture_output=True, text=True, timeout=120)
        service = subprocess.Popen(
            serve, shell=True, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        r = subprocess.run(
            run,
            shell=True,
            cwd=REPO,
            env={**env, "ZEUS_DISABLED_PLUGINS": "perseus,hetero,torch"},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        assert "recurrence 140:" in r.stdout  # the example's 140 recurrences, each printed
        import psycopg

        with psycopg.connect(f"postgresql://zeus@127.0.0.1:{pg_port}/postgres") as conn:
            rows = conn.execute("SELECT job, count(*) FROM zeus.tries GROUP BY job").fetchall()
        assert rows and rows[0][0] == "zeus-cifar100" and rows[0][1] >= 140, rows
    finally:
        if service is not None and service.poll() is None:
            os.killpg(service.pid, signal.SIGTERM)
            try:
                service.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(service.pid, signal.SIGKILL)
        subprocess.run(
            [str(Path(initdb).parent / "pg_ctl"), "-D", "pgdata", "-m", "immediate", "stop"],
            cwd=folder,
            user=user,
            env=pg_env,
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(folder, ignore_errors=True)

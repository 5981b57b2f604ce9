"""Fixtures shared by every distribution's tests."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
TOY_PKG = REPO / "tests" / "core" / "toy_plugin_pkg"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The public traces and profiles in ../shared/data (never copied into the project)."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"public data folder {SHARED_DATA} is missing: CI has ../shared beside the checkout")
    return SHARED_DATA


def _import_toy():
    name = "zeus_toy_plugin"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, TOY_PKG / name / "__init__.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def toy_plugin():
    """The test-only simulated device and workload plugin (module object)."""
    return _import_toy()


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The example custom-policy plugin and the toy plugin, pip-installed into a private folder
    (put it on PYTHONPATH for a `zeus` subprocess: its entry points are then found for real)."""
    import subprocess

    target = tmp_path_factory.mktemp("site")
    for pkg in (REPO / "examples" / "custom_policy", TOY_PKG):
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(target), str(pkg)],
            check=True,
            capture_output=True,
            text=True,
        )
    return target


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path, monkeypatch):
    """Every test gets its own machine-wide state folder and working directory."""
    monkeypatch.setenv("ZEUS_STATE_DIR", str(tmp_path / "zeus-state"))
    monkeypatch.delenv("ZEUS_DISABLED_PLUGINS", raising=False)
    monkeypatch.delenv("ZEUS_TRACE_PLUGINS", raising=False)
    monkeypatch.delenv("ZEUS_DAEMON_SOCKET", raising=False)  # a developer's daemon must not serve the tests
    monkeypatch.delenv("ZEUSD_SOCK_PATH", raising=False)  # nor one named by upstream's variable
    monkeypatch.delenv("ZEUSD_HOST_PORT", raising=False)  # nor a TCP one (upstream's zeusd client reads it)
    monkeypatch.delenv("ZEUSD_TOKEN", raising=False)
    # outside any scheduler (zeus_core.scheduler), so that a suite run in a Slurm job or a pod writes
    # the same files; a test that wants a context sets it
    for var in [v for v in os.environ if v.startswith("SLURM_")] + ["POD_NAME", "POD_NAMESPACE", "KUBERNETES_SERVICE_HOST"]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.chdir(tmp_path)


def _pg_server():
    """A new PostgreSQL server, removed (stopped) when the fixture using it ends, however it ends."""
    from pg_server import PgServer, find_bin

    if find_bin("initdb") is None:
        from cluster_helpers import server_missing

        server_missing("PostgreSQL server programs (initdb, pg_ctl) not found; .ci/run installs them (apt-get install postgresql)")
    with PgServer.start_new() as server:
        yield server


@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL server on loopback for the whole session (tests that stop or restart a
    server use ``own_pg_server``)."""
    yield from _pg_server()


@pytest.fixture
def own_pg_server():
    """A PostgreSQL server of this test alone (it may stop and restart it)."""
    yield from _pg_server()


@pytest.fixture
def pg_url(pg_server):
    """A URL (with its password) of a new, empty database on the session's server."""
    return pg_server.url(pg_server.create_database())

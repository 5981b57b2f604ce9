"""How loud zeus is (#23): the ``zeus`` loggers, ``-q`` / ``-v``, ``ZEUS_LOG_LEVEL``; a monitor over
no device; figures through matplotlib's object API. The knobs are checked through the real
``zeus`` command in a subprocess, on a small trace-replay job."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from zeus_core import logs

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "examples" / "zeus_nsdi23" / "cifar100.toml"


def zeus(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != logs.ENV} | (env or {})
    return subprocess.run([sys.executable, "-m", "zeus_core.cli", *args], capture_output=True, text=True, env=full, cwd=cwd, timeout=120)


def run_job(tmp_path: Path, *flags: str, recurrences: int = 2, env: dict[str, str] | None = None, out: str = "out"):
    return zeus(
        *flags,
        "run",
        str(JOB),
        "--set",
        f"job.recurrences={recurrences}",
        "--set",
        f'job.store="{tmp_path / "store.sqlite"}"',
        "--fresh",
        "--output",
        str(tmp_path / out),
        env=env,
    )


# -- the library: nothing configured at import ------------------------------------------------------


def test_importing_zeus_configures_nothing_and_adds_a_null_handler():
    code = (
        "import logging, zeus_core\n"
        "top = logging.getLogger('zeus')\n"
        "print([type(h).__name__ for h in top.handlers], top.level, logging.getLogger().handlers, top.propagate)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["['NullHandler']", "0", "[]", "True"], out


def test_resolve_level_flags_then_the_variable_then_the_default():
    assert logs.resolve_level(environ={}) == logging.WARNING
    assert logs.resolve_level(environ={"ZEUS_LOG_LEVEL": "DEBUG"}) == logging.DEBUG
    assert logs.resolve_level(1, environ={"ZEUS_LOG_LEVEL": "error"}) == logging.INFO  # a flag wins
    assert logs.resolve_level(2, environ={}) == logging.DEBUG
    assert logs.resolve_level(5, environ={}) == logging.DEBUG  # clamped
    assert logs.resolve_level(quiet=1, environ={}) == logging.ERROR
    assert logs.resolve_level(quiet=9, environ={}) == logging.CRITICAL
    assert logs.resolve_level(1, 1, environ={"ZEUS_LOG_LEVEL": "info"}) == logging.WARNING  # they cancel: still flags
    assert logs.resolve_level(1, default=logging.INFO, environ={}) == logging.DEBUG  # a server's default moves too
    with pytest.raises(logs.LogLevelError, match="ZEUS_LOG_LEVEL='loud' is not a log level; use one of debug") as e:
        logs.resolve_level(2, environ={"ZEUS_LOG_LEVEL": "loud"})  # checked even when flags win
    assert e.value.exit_code == 2


# -- zeus run -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def quiet_run(tmp_path_factory):
    """``zeus -q run`` of two recurrences into ``out``, after the same run without ``-q`` into ``loud``."""
    tmp_path = tmp_path_factory.mktemp("quiet")
    loud = run_job(tmp_path, out="loud")
    assert loud.returncode == 0 and "recurrence 1:" in loud.stdout and "wrote" in loud.stdout, loud.stderr
    assert "zeus.engine" not in loud.stderr  # warnings and errors only, by default
    return tmp_path, run_job(tmp_path, "-q")


def test_quiet_run_prints_nothing_but_writes_everything(quiet_run):
    tmp_path, r = quiet_run
    assert r.returncode == 0, r.stderr
    assert (r.stdout, r.stderr) == ("", "")
    assert {p.name for p in (tmp_path / "out").iterdir()} == {p.name for p in (tmp_path / "loud").iterdir()}
    assert (tmp_path / "out" / "recurrences.csv").read_text().count("\n") == 3  # the header and two tries
    env_quiet = run_job(tmp_path, env={"ZEUS_LOG_LEVEL": "error"}, out="env")
    assert env_quiet.returncode == 0 and (env_quiet.stdout, env_quiet.stderr) == ("", "")


def test_quiet_run_still_prints_its_errors(tmp_path):
    r = zeus("-q", "run", str(JOB), "--set", "job.recurrences=-1", "--output", str(tmp_path / "out"))
    assert r.returncode == 2 and r.stdout == ""
    assert "job.recurrences" in r.stderr and "error" in r.stderr


def test_log_levels_show_their_records(tmp_path):
    debug = run_job(tmp_path, recurrences=1, env={"ZEUS_LOG_LEVEL": "debug"})
    assert debug.returncode == 0, debug.stderr
    assert "zeus.engine debug: [device] built by plugin 'trace': TraceDevice" in debug.stderr
    assert "zeus.engine debug: recurrence 1, try 1: batch size" in debug.stderr
    assert "zeus.engine info: job 'zeus-cifar100'" in debug.stderr
    info = run_job(tmp_path, "-v", recurrences=1)
    assert "zeus.engine info: job 'zeus-cifar100'" in info.stderr and " debug: " not in info.stderr
    both = run_job(tmp_path, "-vv", recurrences=1)
    assert "zeus.engine debug: recurrence 1, try 1" in both.stderr


def test_a_bad_log_level_is_bad_input_and_runs_nothing(tmp_path):
    r = run_job(tmp_path, "-v", env={"ZEUS_LOG_LEVEL": "verbose"})
    assert r.returncode == 2, r.stderr
    assert "ZEUS_LOG_LEVEL='verbose' is not a log level; use one of debug, info, warning, error, critical" in r.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "store.sqlite").exists()


def test_the_daemon_takes_the_same_knobs(tmp_path):
    config = tmp_path / "daemon.toml"
    config.write_text('socket = "x.sock"\n')
    r = zeus("daemon", "-q", "--check", "--config", str(config), env={"ZEUS_LOG_LEVEL": "noisy"})
    assert r.returncode == 2 and "ZEUS_LOG_LEVEL='noisy' is not a log level" in r.stderr
    r = zeus("daemon", "--help")
    assert "-q, --quiet" in r.stdout and "-v, --verbose" in r.stdout


def test_daemon_level(tmp_path):
    from zeus_core.daemon.server import log, setup_logging

    path = tmp_path / "daemon.log"
    try:
        setup_logging(str(path), logging.WARNING)
        log.info("a change")
        log.warning("a refusal")
        setup_logging(str(path))  # the default logs every change
        log.info("another change")
    finally:
        for h in list(log.handlers):
            h.close()
        setup_logging("none")
    text = path.read_text()
    assert "a refusal" in text and "another change" in text and "a change\n" not in text


# -- a monitor over no device ------------------------------------------------------------------------


def test_a_monitor_that_opens_no_device_warns():
    from zeus_core import ZeusMonitor
    from zeus_core.engine.registry import load

    bare = load(entry_points=False)  # no device plugin at all
    with pytest.warns(UserWarning, match=r"opened no device: its windows measure time only, and 0 J \(no installed"):
        m = ZeusMonitor(registry=bare)
    m.begin_window("w")
    assert m.end_window("w").energy == {} and m.groups == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one that opens a device says nothing
        ZeusMonitor(gpu_indices=[], cpu_indices=[0], device="cpu-estimate").close()


# -- figures: matplotlib's object API ----------------------------------------------------------------


def test_figures_leave_the_users_matplotlib_alone(tmp_path):
    code = (
        "import sys, matplotlib\n"
        "matplotlib.use('svg')\n"
        "from zeus_core.cli.main import main\n"
        "try:\n"
        f"    main(['-q', 'run', {str(JOB)!r}, '--set', 'job.recurrences=1', '--set', 'job.store=\"{tmp_path}/s.sqlite\"',"
        f" '--output', {str(tmp_path / 'out')!r}])\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print(matplotlib.get_backend(), 'matplotlib.pyplot' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["svg", "False"]
    assert (tmp_path / "out" / "pareto.png").read_bytes()[:4] == b"\x89PNG"


def test_no_source_switches_the_backend_or_uses_pyplot():
    found = []
    for root in ("zeus_core", "plugins", "zeus_plugins_mab", "zeus_plugins_hetero", "zeus_plugins_perseus"):
        for path in (REPO / root).rglob("*.py"):
            if "tests" in path.parts:
                continue
            text = path.read_text()
            found += [
                f"{path.relative_to(REPO)}: {what}"
                for what in ("matplotlib.use(", "import matplotlib.pyplot", "from matplotlib import pyplot")
                if what in text
            ]
    assert not found, found


def test_configure_keeps_one_handler_that_filters_at_the_level():
    import io

    top = logging.getLogger(logs.ROOT)
    before = (list(top.handlers), top.level, warnings.showwarning)
    out = io.StringIO()
    try:
        logs.configure(logging.ERROR, stream=out)
        handler = logs.configure(logging.ERROR, stream=out)
        assert [h for h in top.handlers if isinstance(h, logging.StreamHandler)] == [handler]
        logging.getLogger("zeus.engine").warning("hidden")
        logging.getLogger("zeus.engine").error("shown")
        warnings.warn("a plugin's warning, hidden", stacklevel=1)
        logs.configure(logging.DEBUG, stream=out)
        logging.getLogger("zeus.engine").debug("shown too")
        warnings.warn("a plugin's warning", stacklevel=1)
        assert out.getvalue().splitlines() == [
            "zeus.engine error: shown",
            "zeus.engine debug: shown too",
            "zeus.warnings warning: a plugin's warning",
        ]
    finally:
        top.handlers[:] = before[0]
        top.setLevel(before[1])
        warnings.showwarning = before[2]
        logs._handler = None


def test_a_command_run_in_process_leaves_no_handler_or_warnings_hook_behind(tmp_path):
    """A CLI command called from a longer-lived process (a test, a notebook) undoes its logging set-up
    when it ends: the handler goes, Python's warnings display is the caller's again."""
    from click.testing import CliRunner

    from zeus_core.cli.main import cli
    from zeus_core.engine.registry import get_registry

    top = logging.getLogger(logs.ROOT)
    before = (list(top.handlers), top.level, warnings.showwarning)
    result = CliRunner().invoke(cli, ["-v", "plugins"], obj={"registry": get_registry()})
    assert result.exit_code == 0, result.output
    assert (list(top.handlers), top.level, warnings.showwarning) == before
    from zeus_core.cli.consoles import is_quiet

    quiet = CliRunner().invoke(cli, ["-q", "plugins"], obj={"registry": get_registry()})
    assert quiet.exit_code == 0 and quiet.output == ""  # the table is its result: silent under -q
    assert not is_quiet() and (list(top.handlers), top.level) == before[:2]  # and the consoles speak again after it

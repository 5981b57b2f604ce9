"""``zeus daemon``: the command that runs the device daemon (as root, usually under systemd).

Exit status: 0 after SIGTERM/SIGINT/SIGHUP (every device put back), 1 when it
cannot start (another daemon serves the socket, a served device cannot be
opened), 2 for a bad configuration (every problem with its line and path).

The ``zeus`` entry point hands ``zeus daemon`` straight to :func:`main`, before
it loads every installed plugin: the root process imports only the plugins its
configuration names (``plugins``), so no training stack (torch, scipy) is ever
loaded with root's privileges.

It logs every change at info: ``-v`` adds debug records (every call), ``-q`` keeps warnings
and errors only (``ZEUS_LOG_LEVEL`` names a level, as for every ``zeus`` command); the
configuration's ``log`` says where the records go.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.markup import escape

from zeus_core.cli.consoles import requested_level, verbosity_options
from zeus_core.engine.registry import load
from zeus_core.errors import PluginError

if TYPE_CHECKING:  # the configuration's reader (and job-file validation under it) loads when the daemon starts
    from zeus_core.daemon.config import ConfigError

EXIT_OK, EXIT_FAILED, EXIT_BAD_CONFIG = 0, 1, 2
#: The daemon's configuration file, unless ``--config`` or :data:`CONFIG_ENV` names another.
DEFAULT_CONFIG = "/etc/zeus/daemon.toml"
CONFIG_ENV = "ZEUS_DAEMON_CONFIG"


def _print_problems(err: Console, e: ConfigError) -> None:
    n = len(e.problems)
    err.print(f"[bold red]{n} error{'s' if n != 1 else ''} in {escape(e.source)}:[/]")
    for line in e.format_lines():
        err.print(escape(line), highlight=False, soft_wrap=True)


def run_daemon(config_path: Path, check: bool = False, level: int = logging.INFO) -> int:
    """Start the daemon for ``config_path`` and serve until a stop signal, logging at ``level``; the exit status."""
    from zeus_core.daemon.config import ConfigError, read_config, resolve
    from zeus_core.daemon.server import Daemon, StartError, setup_logging  # only a starting daemon needs it

    err = Console(stderr=True, soft_wrap=True)
    cfg, problems, lines, _ = read_config(config_path)
    if cfg is None:
        _print_problems(err, ConfigError(str(config_path), problems, lines))
        return EXIT_BAD_CONFIG
    try:
        registry = load(only=cfg.plugins)
    except PluginError as e:
        err.print(f"[bold red]error:[/] {escape(str(e))}")
        return EXIT_BAD_CONFIG
    try:
        resolved = resolve(cfg, {n: r.options for n, r in registry.services.items()}, config_path, lines)
    except ConfigError as e:
        _print_problems(err, e)
        return EXIT_BAD_CONFIG
    setup_logging("stderr" if check else cfg.log, level)
    daemon = Daemon(resolved, registry)
    if not check:
        daemon.install_signal_handlers()
    try:
        if not check:
            daemon.restore_left_behind()
        daemon.build_services()
        if check:
            Console().print(
                f"[green]ok[/] {escape(str(config_path))}: would serve {escape(', '.join(sorted(daemon.operations)))} "
                f"on {escape(cfg.socket)}"
            )
            daemon.close_services()
            return EXIT_OK
        daemon.bind()
    except ConfigError as e:
        _print_problems(err, e)
        return EXIT_BAD_CONFIG
    except (StartError, OSError) as e:
        daemon.close_services()
        err.print(f"[bold red]zeus daemon cannot start:[/] {escape(str(e))}")
        return EXIT_FAILED
    daemon.serve_forever()
    return EXIT_OK


@click.command("daemon", context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar=CONFIG_ENV,
    default=DEFAULT_CONFIG,
    show_default=True,
    help=f"The daemon's TOML configuration (or ${CONFIG_ENV}).",
)
@click.option("--check", is_flag=True, help="Check the configuration and open the served devices, then exit without serving.")
@verbosity_options
def daemon_command(config_path: Path, check: bool) -> None:
    """Serve device settings (power limits, clocks, RAPL reads) to unprivileged training processes; run as root."""
    sys.exit(run_daemon(config_path, check, requested_level(click.get_current_context(), default=logging.INFO)))


def main(argv: list[str]) -> None:
    """``zeus daemon ARGS`` without the rest of the ``zeus`` command (see the module docstring)."""
    daemon_command.main(args=argv, prog_name="zeus daemon")

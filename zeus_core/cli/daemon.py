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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
                + (f", and the HTTP API ({escape(', '.join(daemon.api.enabled))}) there" if daemon.api else "")
                + (
                    f" and on tcp {escape(cfg.tcp)}{' with TLS' if cfg.tls_cert else ''}{', tokens required' if cfg.auth else ''}"
                    if cfg.tcp and daemon.api
                    else ""
                )
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


def _config_option(more: str = "") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--config``: the daemon's configuration, for the daemon and for ``token issue`` (``more`` adds to its help)."""
    return click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar=CONFIG_ENV,
        default=DEFAULT_CONFIG,
        show_default=True,
        help=f"The daemon's TOML configuration (or ${CONFIG_ENV}).{more}",
    )


@click.group("daemon", invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@_config_option()
@click.option("--check", is_flag=True, help="Check the configuration and open the served devices, then exit without serving.")
@verbosity_options
@click.pass_context
def daemon_command(ctx: click.Context, config_path: Path, check: bool) -> None:
    """Serve device settings (power limits, clocks, RAPL reads) to unprivileged training processes, and
    upstream zeusd's HTTP API on the same socket (and TCP when configured); run as root."""
    if ctx.invoked_subcommand is None:
        sys.exit(run_daemon(config_path, check, requested_level(ctx, default=logging.INFO)))


@daemon_command.group("token")
def token_group() -> None:
    """Tokens for the HTTP API (configuration: auth = true)."""


@token_group.command("issue")
@_config_option(" Its auth_secret_file signs the token (created 0600 when missing).")
@click.option("--subject", required=True, help="Who the token is for (its sub claim; the daemon's log names it).")
@click.option(
    "--scope", "scope", required=True, help="The API groups it may call, comma-separated: gpu-read,gpu-control,cpu-read,cpu-control."
)
@click.option("--expires", default="7d", show_default=True, help="Its lifetime: 30m, 12h, 7d, 2w ..., or never.")
def token_issue(config_path: Path, subject: str, scope: str, expires: str) -> None:
    """Print a signed token for the daemon's HTTP API on stdout."""
    from zeus_core.daemon.config import ConfigError, read_config
    from zeus_core.daemon.tokens import issue, load_secret, parse_expiry, parse_scopes
    from zeus_core.errors import BadInput

    err = Console(stderr=True, soft_wrap=True)
    cfg, problems, lines, _ = read_config(config_path)
    if cfg is None:
        _print_problems(err, ConfigError(str(config_path), problems, lines))
        sys.exit(EXIT_BAD_CONFIG)
    try:
        if not subject.strip() or len(subject) > 256:
            raise BadInput("--subject must name someone (1 to 256 characters)")
        scopes, exp = parse_scopes(scope), parse_expiry(expires)
        secret = load_secret(cfg.secret_path)
    except BadInput as e:
        err.print(f"[bold red]error:[/] {escape(str(e))}")
        sys.exit(EXIT_BAD_CONFIG)
    except OSError as e:
        err.print(f"[bold red]error:[/] cannot read or create the signing secret {escape(str(cfg.secret_path))}: {escape(str(e))}")
        sys.exit(EXIT_FAILED)
    if not cfg.auth:
        err.print(f"[yellow]note:[/] {escape(str(config_path))} has auth = false: the daemon does not ask for this token until auth = true")
    click.echo(issue(secret, subject, scopes, exp))


def main(argv: list[str]) -> None:
    """``zeus daemon ARGS`` without the rest of the ``zeus`` command (see the module docstring)."""
    daemon_command.main(args=argv, prog_name="zeus daemon")

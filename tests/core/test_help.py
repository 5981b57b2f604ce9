"""``-h`` works on every command, ``zeus daemon`` (which runs before the plugins load) included,
and upstream Zeus's ``ZEUSD_SOCK_PATH`` names the daemon's socket when ``ZEUS_DAEMON_SOCKET`` does not."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from zeus_core.cli import main as zcli
from zeus_core.daemon import socket_path
from zeus_core.engine.registry import load


def _paths(group: click.Group, ctx: click.Context, prefix: tuple[str, ...] = ()):
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        yield (*prefix, name)
        if isinstance(command, click.Group):
            yield from _paths(command, click.Context(command, parent=ctx), (*prefix, name))


def test_every_command_of_zeus_takes_h():
    reg = load()
    reg.pm.hook.zeus_register_commands(cli=zcli.cli)  # as `zeus` does: plugins' commands too
    paths = list(_paths(zcli.cli, click.Context(zcli.cli)))
    assert ("run",) in paths and ("daemon",) in paths
    runner = CliRunner()
    for path in [(), *paths]:
        if path == ("daemon",):
            continue  # its own entry point, below
        r = runner.invoke(zcli.cli, [*path, "-h"], obj={"registry": reg})
        assert r.exit_code == 0 and "Usage:" in r.output, (path, r.output)


def test_zeus_daemon_takes_h(capsys):
    with pytest.raises(SystemExit) as e:
        zcli.main(["daemon", "-h"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "Usage: zeus daemon" in out and "--config" in out


def test_upstream_socket_variable_is_an_alias(monkeypatch):
    assert socket_path() is None
    monkeypatch.setenv("ZEUSD_SOCK_PATH", "/run/zeusd.sock")
    assert socket_path() == "/run/zeusd.sock"
    monkeypatch.setenv("ZEUS_DAEMON_SOCKET", "/run/zeus/daemon.sock")  # ours wins where both are set
    assert socket_path() == "/run/zeus/daemon.sock"
    assert socket_path("/tmp/option.sock") == "/tmp/option.sock"

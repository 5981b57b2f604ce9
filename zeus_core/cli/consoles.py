"""The terminal output of every ``zeus`` command: rich consoles that never cut a table in a pipe,
and the ``-q`` / ``-v`` options that say how much a command shows.

Rich sizes a console that is not a terminal to 80 columns, so a table printed
into a CI log or through ``| tee`` comes out with numbers cut (``32,98…``).
:func:`make_console` gives such a console room instead (unless ``COLUMNS``
says otherwise); commands of the core and of plugins use it.

A command's result (tables, summaries, progress) goes to its results console, its
diagnostics to the ``zeus`` loggers (:mod:`zeus_core.logs`), its errors to its error
console. :func:`verbosity_options` adds ``-q`` / ``-v`` to a command; at a level
quieter than warning (``-q``, ``ZEUS_LOG_LEVEL=error``) the results consoles are
silent too, so that the command prints only its errors.
"""

from __future__ import annotations

import logging
import os
import sys
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from zeus_core import logs

#: Width of a console that is not a terminal: wider than any table zeus prints.
PIPE_WIDTH = 240

#: Results consoles made so far: silenced together when the command is quiet.
_results: weakref.WeakSet[Console] = weakref.WeakSet()
_quiet = False


def make_console(stderr: bool = False) -> Console:
    """A console for a command's output (``stderr=True``: for its errors, soft-wrapped).

    A results console (``stderr=False``) is silent while the command is quiet
    (:func:`set_quiet`); an error console always prints.
    """
    c = Console(stderr=stderr, soft_wrap=stderr)
    if not c.is_terminal and "COLUMNS" not in os.environ:
        c = Console(stderr=stderr, soft_wrap=stderr, width=PIPE_WIDTH)
    if not stderr:
        c.quiet = _quiet
        _results.add(c)
    return c


def set_quiet(quiet: bool) -> None:
    """Silence (or not) every results console, made already or later."""
    global _quiet
    _quiet = quiet
    for c in list(_results):
        c.quiet = quiet


def is_quiet() -> bool:
    """Whether the command shows only its errors."""
    return _quiet


#: Where the flags of a command line (the ``zeus`` group's and its subcommand's) add up.
_META = "zeus.verbosity"
F = TypeVar("F", bound=Callable[..., Any])


def _counts(ctx: click.Context) -> dict[str, int]:
    return ctx.find_root().meta.setdefault(_META, {"verbose": 0, "quiet": 0})


def requested_level(ctx: click.Context, default: int = logs.DEFAULT) -> int:
    """The level the command line asks for (its ``-v`` / ``-q`` counted from ``default``, else
    ``$ZEUS_LOG_LEVEL``); a bad ``$ZEUS_LOG_LEVEL`` prints the error and exits 2."""
    counts = _counts(ctx)
    try:
        return logs.resolve_level(counts["verbose"], counts["quiet"], default)
    except logs.LogLevelError as e:
        Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(str(e))}")
        sys.exit(e.exit_code)


def _counted(which: str) -> Callable[[click.Context, click.Parameter, int], None]:
    def callback(ctx: click.Context, _param: click.Parameter, value: int) -> None:
        if ctx.resilient_parsing:
            return
        counts = _counts(ctx)
        counts[which] += value
        level = requested_level(ctx)
        logs.configure(level)
        if not counts.get("undo"):  # once per command line: the root context's end undoes it
            counts["undo"] = 1
            ctx.find_root().call_on_close(logs.unconfigure)
            ctx.find_root().call_on_close(lambda: set_quiet(False))
        set_quiet(level > logging.WARNING)

    return callback


def verbosity_options(command: F) -> F:
    """``-v`` / ``--verbose`` and ``-q`` / ``--quiet`` (each repeatable) on a click command.

    They configure the ``zeus`` loggers (:func:`zeus_core.logs.configure`) and the results
    consoles as soon as they are parsed; a command with another default level (a server's)
    reads :func:`requested_level` with its own default.
    """
    command = click.option(
        "-q",
        "--quiet",
        count=True,
        expose_value=False,
        callback=_counted("quiet"),
        help="Log less, one level a -q; at error and above (zeus -q) only errors show: no tables, no progress.",
    )(command)
    command = click.option(
        "-v",
        "--verbose",
        count=True,
        expose_value=False,
        callback=_counted("verbose"),
        help=f"Log more, one level a -v (info, then debug); or set ${logs.ENV} to {'|'.join(logs.LEVELS)}.",
    )(command)
    return command


__all__ = ["make_console", "requested_level", "verbosity_options", "set_quiet", "is_quiet", "PIPE_WIDTH"]

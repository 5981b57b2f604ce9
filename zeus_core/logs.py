"""The ``zeus`` loggers, and how loud a command is.

Library code, the core's and every plugin's, logs to ``logging.getLogger("zeus.<area>")``
(``zeus.engine``, ``zeus.monitor``, ``zeus.daemon``, a plugin's ``zeus.<plugin>``).
Importing zeus configures nothing: the top ``zeus`` logger carries a
:class:`logging.NullHandler` (added when this module is imported, which ``import
zeus_core`` does), so a program that embeds zeus decides where its records go, as the
standard library asks of libraries.

A command decides once, at start, with :func:`resolve_level` and :func:`configure`:
``-v`` / ``-vv`` and ``-q`` / ``-qq`` move the command's default level (warning for
``zeus``) a step each, else ``$ZEUS_LOG_LEVEL`` names the level (``debug``, ``info``,
``warning``, ``error``, ``critical``), else the default holds. A bad value of the
variable is bad input (:class:`LogLevelError`, exit 2), never silently ignored.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import TextIO

from zeus_core.errors import BadInput

#: The top library logger: every logger of zeus and its plugins is below it.
ROOT = "zeus"
#: The environment variable that names a level.
ENV = "ZEUS_LOG_LEVEL"
#: Level names the variable and the servers' ``--log-level`` accept, quietest last.
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL}
#: A ``zeus`` command's level when nothing says otherwise.
DEFAULT = logging.WARNING

logging.getLogger(ROOT).addHandler(logging.NullHandler())


class LogLevelError(BadInput):
    """A level that is not one of :data:`LEVELS` (exit 2)."""


def parse_level(text: str, source: str = ENV) -> int:
    """The level ``text`` names (any case); ``source`` names where it came from in the error."""
    level = LEVELS.get(text.strip().lower())
    if level is None:
        raise LogLevelError(f"{source}={text!r} is not a log level; use one of {', '.join(LEVELS)}")
    return level


def resolve_level(verbose: int = 0, quiet: int = 0, default: int = DEFAULT, environ: Mapping[str, str] | None = None) -> int:
    """The level a command runs at: its flags (each ``-v`` one step louder, each ``-q`` one
    quieter than ``default``), else ``$ZEUS_LOG_LEVEL``, else ``default``. The variable is
    checked even when flags win, so that a typo in it never goes unnoticed."""
    text = (os.environ if environ is None else environ).get(ENV, "")
    named = parse_level(text) if text.strip() else None
    if verbose or quiet:
        return min(max(default + 10 * (quiet - verbose), logging.DEBUG), logging.CRITICAL)
    return default if named is None else named


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        record.levelname_lower = record.levelname.lower()
        return super().format(record)


class _Stderr(logging.StreamHandler):
    """A handler that writes to whatever ``sys.stderr`` is when a record comes (a test runner's capture too)."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


#: What a command's records look like on stderr: ``zeus.monitor warning: ...``.
FORMAT = "%(name)s %(levelname_lower)s: %(message)s"
_handler: logging.Handler | None = None


def configure(level: int, stream: TextIO | None = None) -> logging.Handler:
    """Show the ``zeus`` loggers' records at ``level`` and above on ``stream`` (stderr).

    For commands, never for library code. A second call replaces the first one's
    handler, so a command that learns its level in steps ends with one handler. The
    handler filters; the ``zeus`` logger's own level is lowered only for a level below
    warning, so that another handler (a test's capture) still gets what it asks for.
    Python warnings (a device plugin's ``warnings.warn``) become warnings of
    ``zeus.warnings``: one line each, and ``-q`` hides them as it hides the rest.
    """
    global _handler
    top = logging.getLogger(ROOT)
    if _handler is not None:
        top.removeHandler(_handler)
    _handler = logging.StreamHandler(stream) if stream is not None else _Stderr()
    _handler.setFormatter(_Formatter(FORMAT))
    _handler.setLevel(level)
    top.addHandler(_handler)
    top.setLevel(level if level < logging.WARNING else logging.NOTSET)
    global _shown_by
    if warnings.showwarning is not _show_warning:
        _shown_by = warnings.showwarning
        warnings.showwarning = _show_warning
    return _handler


#: What showed Python warnings before :func:`configure` (put back by :func:`unconfigure`).
_shown_by: Callable[..., None] | None = None


def unconfigure() -> None:
    """Undo :func:`configure`: its handler removed, the ``zeus`` logger's level and Python's
    warnings display as they were. A command that ran in a longer-lived process (a test, a
    notebook calling the CLI) leaves no handler or warnings hook behind."""
    global _handler, _shown_by
    top = logging.getLogger(ROOT)
    if _handler is not None:
        top.removeHandler(_handler)
        _handler = None
        top.setLevel(logging.NOTSET)
    if _shown_by is not None and warnings.showwarning is _show_warning:
        warnings.showwarning = _shown_by
    _shown_by = None


def _show_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file: TextIO | None = None, line: str | None = None
) -> None:
    logging.getLogger(f"{ROOT}.warnings").warning("%s", message)


def level_name(level: int) -> str:
    """The lower-case name of ``level`` (a name of :data:`LEVELS`), as uvicorn's ``log_level`` takes it."""
    return logging.getLevelName(level).lower()


__all__ = ["LEVELS", "DEFAULT", "ENV", "LogLevelError", "parse_level", "resolve_level", "level_name", "configure", "unconfigure"]

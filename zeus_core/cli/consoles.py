"""The terminal output of every ``zeus`` command: rich consoles that never cut a table in a pipe.

Rich sizes a console that is not a terminal to 80 columns, so a table printed
into a CI log or through ``| tee`` comes out with numbers cut (``32,98…``).
:func:`make_console` gives such a console room instead (unless ``COLUMNS``
says otherwise); commands of the core and of plugins use it.
"""

from __future__ import annotations

import os

from rich.console import Console

#: Width of a console that is not a terminal: wider than any table zeus prints.
PIPE_WIDTH = 240


def make_console(stderr: bool = False) -> Console:
    """A console for a command's output (``stderr=True``: for its errors, soft-wrapped)."""
    c = Console(stderr=stderr, soft_wrap=stderr)
    if not c.is_terminal and "COLUMNS" not in os.environ:
        c = Console(stderr=stderr, soft_wrap=stderr, width=PIPE_WIDTH)
    return c

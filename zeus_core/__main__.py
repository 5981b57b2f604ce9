"""``python -m zeus_core``: the ``zeus`` command."""

from zeus_core.cli import main

main()

"""``python -m zeus_core``: the ``zeus`` command."""

from zeus_core.cli.main import main

main()

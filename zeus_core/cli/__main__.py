"""``python -m zeus_core.cli``: the ``zeus`` command."""

from zeus_core.cli.main import main

main()

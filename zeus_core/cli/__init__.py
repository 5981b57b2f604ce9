"""The ``zeus`` command line: :mod:`~zeus_core.cli.main` (run, validate, report, plugins),
:mod:`~zeus_core.cli.monitor`, :mod:`~zeus_core.cli.store`, and :mod:`~zeus_core.cli.consoles`
for the rich consoles every command (a plugin's too) prints through."""

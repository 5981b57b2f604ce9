"""zeus-core: hooks, registry, job files, the recurring-job loop and the store.

Plugins need only ``from zeus_core import hookimpl``.
"""

from zeus_core.hookspecs import hookimpl

__all__ = ["hookimpl"]

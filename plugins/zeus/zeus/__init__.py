"""Upstream Zeus 0.16's ``zeus`` import package on zeus-core's engine (the ``zeus-compat`` distribution).

Code written for upstream (``from zeus.monitor import ZeusMonitor``) runs unchanged: the
devices come from zeus's device plugins, the optimizers steer them through the core's
protocols. Where this project deliberately differs from upstream, the ``zeus_core`` API keeps
the project's behaviour and this package keeps upstream's; the README lists each difference.
"""

__version__ = "0.16.0"

"""Zeus inside the user's own training loop: :class:`~zeus_core.inloop.monitor.ZeusMonitor`,
:class:`~zeus_core.inloop.power.PowerLimitOptimizer`, :class:`~zeus_core.inloop.batch_size.BatchSizeOptimizer`,
and :mod:`~zeus_core.inloop.trainer` for trainer callbacks. ``from zeus_core import ZeusMonitor`` is how
scripts reach them."""

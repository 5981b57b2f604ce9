"""Zeus inside the user's own training loop: :class:`~zeus_core.inloop.monitor.ZeusMonitor`,
:class:`~zeus_core.inloop.power.PowerLimitOptimizer`, :class:`~zeus_core.inloop.batch_size.BatchSizeOptimizer`,
and :mod:`~zeus_core.inloop.trainer` for trainer callbacks. ``from zeus_core import ZeusMonitor`` is how
scripts reach them."""

#: The device plugin whose GPUs ``ZeusMonitor`` (and the power and temperature monitors) measure
#: where GPUs of several plugins open (a machine with NVIDIA and AMD GPUs), e.g. ``ZEUS_GPU_DEVICE=nvml``.
GPU_DEVICE_ENV = "ZEUS_GPU_DEVICE"

__all__ = ["GPU_DEVICE_ENV"]

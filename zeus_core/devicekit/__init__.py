"""What device plugins share, declared once in the core (a contract package: plugins import from it).

Every device plugin that measures and steers real hardware needs the same few
pieces; each lives here so that no two plugins hold near-copies of it:

* :mod:`~zeus_core.devicekit.polling`: :class:`Sampler`, the background thread that
  polls a device, and :class:`PowerIntegral`, energy from polled power;
* :mod:`~zeus_core.devicekit.counters`: :class:`WrappingCounter`, an energy counter
  extended past its wraparounds (RAPL, a 32-bit AMD accumulator), and
  :func:`watch_period`, how often to read such counters; :func:`check_counters`, the check a
  counter passes when its device opens (:class:`CounterProbe`) before it is trusted, and
  :class:`ConfirmedCounter`, one it saw stand still under load, watched longer; :func:`update_period`
  and :func:`model_update_period`, a counter's update period as the check saw it, kept per model;
* :mod:`~zeus_core.devicekit.settings`: :class:`SettingsPath`, setting changes made in
  this process (journaled) or through ``zeus daemon``;
* :mod:`~zeus_core.devicekit.drivers`: :class:`DriverErrors` and :class:`DriverDevice`,
  a vendor library's failures in messages and through the daemon;
* :mod:`~zeus_core.devicekit.served`: the GPUs a daemon service serves, and :class:`GpuService`;
* :mod:`~zeus_core.devicekit.simulated`: the shared state of a simulated driver;
* :mod:`~zeus_core.devicekit.groups`: :class:`ClosedOnExit`, and :class:`GpuGroup`, what a
  group of GPUs does with all of them at once, and :class:`GpuClocks` and :class:`GpuClockRanges`,
  its clock locks (:func:`check_clock`); :func:`deferred_factory` (from :mod:`zeus_core.loading`),
  a device factory that loads the device's code when a device opens.

What a device group *is* and may declare stays in :mod:`zeus_core.device`. The names load on
first use, so that a plugin's entry point that names one (``deferred_factory``) loads only its module.
"""

from typing import TYPE_CHECKING

from zeus_core.loading import lazy_exports

if TYPE_CHECKING:  # loaded on first use (lazy_exports reads this list)
    from zeus_core.devicekit.counters import (
        ConfirmedCounter,
        CounterProbe,
        WrappingCounter,
        check_counters,
        model_update_period,
        update_period,
        watch_period,
    )
    from zeus_core.devicekit.drivers import DriverDevice, DriverErrors
    from zeus_core.devicekit.groups import ClosedOnExit, GpuClockRanges, GpuClocks, GpuGroup, check_clock
    from zeus_core.devicekit.polling import PowerIntegral, Sampler
    from zeus_core.devicekit.served import GpuArgs, GpuService, ServedGpus, all_or_list, select_gpus
    from zeus_core.devicekit.settings import CAP_DAC_OVERRIDE, DaemonCall, SettingsPath
    from zeus_core.loading import deferred_factory

__all__ = [
    "CAP_DAC_OVERRIDE",
    "ClosedOnExit",
    "ConfirmedCounter",
    "CounterProbe",
    "DaemonCall",
    "DriverDevice",
    "DriverErrors",
    "GpuArgs",
    "GpuClockRanges",
    "GpuClocks",
    "GpuGroup",
    "GpuService",
    "PowerIntegral",
    "Sampler",
    "ServedGpus",
    "SettingsPath",
    "WrappingCounter",
    "all_or_list",
    "check_clock",
    "check_counters",
    "deferred_factory",
    "model_update_period",
    "select_gpus",
    "update_period",
    "watch_period",
]
__getattr__ = lazy_exports(__name__)

"""The device group the runner sees when the torch workload trains on several ranks or by an allocation.

The runner measures and steers one device group; a data-parallel job has one
per rank. :class:`DataParallelDevices` stands for all of them: rank 0's reads,
clock and capabilities (the other ranks follow the limits rank 0 sets), with
the maximum power summed over ranks so that the cost metric weighs time
against the whole job's power.

Capabilities are forwarded by protocol, each as instance attributes bound to
rank 0's device, rather than through ``__getattr__``: ``isinstance(view,
PowerLimitControl)`` then answers from the view itself on every Python the
plugin supports (from 3.12 on, runtime-checkable protocols look attributes up
with ``inspect.getattr_static``, which does not call ``__getattr__``), and a
capability the view withholds is simply absent (AttributeError).

Under an allocation every rank holds its own allocated limit, so the view
withholds per-device limits and its power control is rank 0's
:class:`~zeus_plugins_torch.allocated.LimitHolder`: it reads and keeps the
allocated limit and refuses any other. The default ``max`` policy then sets
the allocated limit (nothing changes), and results record rank 0's limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zeus_core import PerDevicePowerLimits, PowerLimitControl
from zeus_core.device import DEVICE_CAPABILITIES, copy_capabilities

if TYPE_CHECKING:  # annotations only
    from zeus_plugins_torch.allocated import LimitHolder

#: The device capabilities the view forwards: every one zeus_core defines (its
#: ``zeus_core.device.DEVICE_CAPABILITIES``, not a top-level name yet; test_devices.py
#: fails when the core adds one that is missing here).
FORWARDED: tuple[type, ...] = DEVICE_CAPABILITIES


class DataParallelDevices:
    """Rank 0's device group standing for every rank's: what the runner measures and steers.

    ``local`` is rank 0's device, ``max_power_w`` the sum over ranks. With
    ``held`` (an allocation), power control is rank 0's allocated limit only
    and per-device limits are not offered.
    """

    def __init__(self, local: Any, max_power_w: float, world_size: int, held: LimitHolder | None = None) -> None:
        self.local = local
        self.max_power_w = float(max_power_w)
        self.world_size = world_size
        self.names = list(local.names)
        self.energy_sources = dict(local.energy_sources)
        sources = {cap: local for cap in FORWARDED if isinstance(local, cap)}
        if held is not None:
            sources.pop(PerDevicePowerLimits, None)
            sources[PowerLimitControl] = held
        copy_capabilities(self, sources)

    def clock(self) -> float:
        return self.local.clock()

    def read_energy(self) -> dict[str, float]:
        return self.local.read_energy()

    def close(self) -> None:
        self.local.close()

"""The device group the runner sees in a data-parallel job (``DataParallelDevices``).

It stands for every rank's devices: rank 0's reads and capabilities, the ranks'
maximum power summed. The runner and the power policies ask it for
capabilities with ``isinstance``; under an allocation it must answer no for
per-device limits and hold rank 0's allocated limit as its only power control.
"""

from __future__ import annotations

import inspect
import time

import pytest

from zeus_core import (
    ClockControl,
    DeviceError,
    DeviceGroup,
    GpuSync,
    Monitor,
    PerDevicePowerLimits,
    PowerLimitControl,
    PowerReadings,
    SupportedPowerLimits,
    read_allocation,
)
from zeus_core.device import capability_members
from zeus_plugins_torch.allocated import LimitHolder
from zeus_plugins_torch.devices import FORWARDED, DataParallelDevices


class TwoGpus:
    """A device group with every capability but a discrete set of limits; records what is set."""

    names = ["gpu0", "gpu1"]
    energy_sources = {"gpu0": "counter", "gpu1": "counter"}
    max_power_w = 600.0
    sync_indices = [0, 1]

    def __init__(self):
        self.limits = {"gpu0": 300.0, "gpu1": 300.0}
        self.sets: list[tuple[str, object]] = []
        self.clocks: int | None = None
        self.closed = False

    def clock(self) -> float:
        return time.monotonic()

    def read_energy(self) -> dict[str, float]:
        return {n: 100.0 * self.clock() for n in self.names}

    def close(self) -> None:
        self.closed = True

    def power_limit_range(self):
        return (100.0, 300.0)

    def power_limit(self):
        return self.limits["gpu0"]

    def set_power_limit(self, watts):
        self.sets.append(("all", watts))
        self.limits = dict.fromkeys(self.names, float(watts))

    def power_limits(self):
        return dict(self.limits)

    def set_power_limits(self, watts):
        self.sets.append(("each", dict(watts)))
        self.limits.update(watts)

    def supported_clocks(self):
        return [1410, 1200]

    def lock_clocks(self, mhz):
        self.clocks = mhz

    def reset_clocks(self):
        self.clocks = None

    def read_power(self):
        return {n: 100.0 for n in self.names}


def test_every_device_capability_of_the_core_is_forwarded():
    from zeus_core.device import DEVICE_CAPABILITIES  # the core's own list (a test may read it)

    assert set(FORWARDED) == set(DEVICE_CAPABILITIES)


def test_the_view_offers_rank_0s_capabilities_and_the_summed_power():
    local = TwoGpus()
    view = DataParallelDevices(local, 1200.0, 2)
    assert isinstance(view, DeviceGroup) and view.max_power_w == 1200.0 and view.names == local.names
    for cap in (PowerLimitControl, PerDevicePowerLimits, ClockControl, PowerReadings, GpuSync):
        assert isinstance(view, cap), cap.__name__
        for name in capability_members(cap):  # found without __getattr__ (how isinstance looks from Python 3.12 on)
            inspect.getattr_static(view, name)
    assert not isinstance(view, SupportedPowerLimits)  # rank 0's device has none, so neither has the view
    with pytest.raises(AttributeError):
        view.supported_power_limits  # noqa: B018
    # Calls reach rank 0's device.
    view.set_power_limit(200)
    view.set_power_limits({"gpu1": 150.0})
    view.lock_clocks(1200)
    assert local.sets == [("all", 200), ("each", {"gpu1": 150.0})] and local.clocks == 1200
    assert view.power_limit() == 200.0 and view.sync_indices == [0, 1]
    monitor = Monitor(view, sync="none")  # the runner measures through the view
    monitor.begin_window("w")
    assert set(monitor.end_window("w").energy) == {"gpu0", "gpu1"}
    view.close()
    assert local.closed


ALLOCATION = {
    "ranks": [
        {"rank": 0, "gpu": "A10", "local_batch": 20, "power_limit": 250},
        {"rank": 1, "gpu": "T4", "local_batch": 12, "power_limit": 150},
    ]
}


def test_under_an_allocation_power_control_is_the_allocated_limit_only():
    local = TwoGpus()
    held = LimitHolder(local, read_allocation(ALLOCATION), 0, "device 'two' (rank 0)")
    view = DataParallelDevices(local, 1200.0, 2, held)
    # Each rank holds its own limit: no per-device limits for a policy to set.
    assert isinstance(local, PerDevicePowerLimits) and not isinstance(view, PerDevicePowerLimits)
    for name in ("set_power_limits", "power_limits"):
        with pytest.raises(AttributeError):
            getattr(view, name)
    # What else rank 0's device can do is still offered.
    assert isinstance(view, GpuSync) and isinstance(view, ClockControl) and isinstance(view, PowerReadings)
    # Power control: rank 0's allocated limit, and nothing else.
    assert isinstance(view, PowerLimitControl)
    assert view.power_limit_range() == (250.0, 250.0) and view.power_limit() is None
    view.set_power_limit(view.power_limit_range()[1])  # what the default `max` policy does: granted, ...
    assert local.sets == [] and view.power_limit() is None  # ... but held only once the try's batch is checked
    held.hold()  # the workload, before each try
    held.hold()
    assert local.sets == [("all", 250.0)] and view.power_limit() == 250.0  # set once; results record it
    with pytest.raises(DeviceError, match=r"rank 0 holds 250 W, its limit in workload.allocation .*asked for 200 W"):
        view.set_power_limit(200.0)
    assert local.sets == [("all", 250.0)]

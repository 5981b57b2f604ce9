"""The baseline policies: what every research policy is measured against."""

from __future__ import annotations

from typing import Any

import attrs

from zeus_core import (
    BuildContext,
    ClockControl,
    JobSummary,
    OffersBatchSizes,
    PolicyContext,
    PowerLimitControl,
    Session,
    TryRecord,
)
from zeus_core.validators import positive, positive_or_none


class FixedBatchSize:
    """Always the same batch size: ``default``, or the workload's default batch size."""

    @attrs.define
    class Options:
        default: int | None = attrs.field(default=None, validator=positive_or_none)

    def __init__(self, options: Options, context: BuildContext) -> None:
        bs = options.default
        workload = context.parts.get("workload")
        if bs is None and isinstance(workload, OffersBatchSizes):
            bs = workload.default_batch_size
        if bs is None:
            raise ValueError("set batch_size.default: the workload has no default batch size")
        self.batch_size = int(bs)

    def choose(self, ctx: PolicyContext) -> int:
        return self.batch_size

    def observe(self, ctx: PolicyContext, record: TryRecord) -> None:
        return None

    def get_state(self) -> None:
        return None

    def set_state(self, state: Any) -> None:
        return None


class _HoldPower:
    """A power policy that sets one limit at the start of each run and holds it."""

    def target(self, devices: Any) -> float | None:  # pragma: no cover - overridden
        raise NotImplementedError

    def begin_run(self, session: Session) -> None:
        devices = session.devices
        limit = self.target(devices)
        if limit is not None:
            assert isinstance(devices, PowerLimitControl)  # a limit is targeted only on a device that sets one (needs_device)
            devices.set_power_limit(limit)

    def on_epoch_end(self, session: Session, epoch: int, measurement: Any) -> None:
        return None

    def end_run(self, session: Session) -> None:
        return None

    def get_state(self) -> None:
        return None

    def set_state(self, state: Any) -> None:
        return None


class MaxPower(_HoldPower):
    """Hold the maximum power limit: the paper's "default" baseline (a no-op where limits can't be set)."""

    def __init__(self, options: Any, context: BuildContext) -> None:
        pass

    def target(self, devices: Any) -> float | None:
        if not isinstance(devices, PowerLimitControl):
            return None
        return float(devices.power_limit_range()[1])


@attrs.define
class FixedPowerOptions:
    limit_w: float = attrs.field(validator=positive)


class FixedPower(_HoldPower):
    """Hold ``limit_w`` watts on every device (must lie in the device's range)."""

    needs_device = (PowerLimitControl,)

    def __init__(self, options: FixedPowerOptions, context: BuildContext) -> None:
        self.limit = float(options.limit_w)
        device = context.parts.get("device")
        if isinstance(device, PowerLimitControl):
            lo, hi = device.power_limit_range()
            if not lo <= self.limit <= hi:
                raise ValueError(f"power.limit_w = {self.limit:g} W is outside the device's range [{lo:g}, {hi:g}] W")

    def target(self, devices: Any) -> float:
        return self.limit


class MaxFrequencyPlan:
    """Every pipeline instruction at the default (maximum) SM clock: the Perseus baseline.

    On a device that can lock clocks, planning unlocks them (``reset_clocks``),
    so the GPU runs at its default maximum boost behaviour.
    """

    def __init__(self, options: Any, context: BuildContext) -> None:
        self.device = context.parts.get("device")
        self.applied = False

    def plan(self, ctx: BuildContext) -> None:
        if isinstance(self.device, ClockControl):
            self.device.reset_clocks()
            self.applied = True

    def summary(self, job: JobSummary) -> dict:
        return {"plan": "max", "clocks_reset": self.applied}

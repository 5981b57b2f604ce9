"""The baseline policies: what every research policy is measured against."""

from __future__ import annotations

from typing import Any

import attrs

from zeus_core.validators import positive, positive_or_none


class FixedBatchSize:
    """Always the same batch size: ``default``, or the workload's default batch size."""

    @attrs.define
    class Options:
        default: int | None = attrs.field(default=None, validator=positive_or_none)

    def __init__(self, options: Options, context: Any) -> None:
        bs = options.default
        if bs is None:
            bs = getattr(context.parts.get("workload"), "default_batch_size", None)
        if bs is None:
            raise ValueError("set batch_size.default: the workload has no default batch size")
        self.batch_size = int(bs)

    def choose(self, ctx) -> int:
        return self.batch_size

    def observe(self, ctx, record) -> None:
        return None

    def get_state(self) -> None:
        return None

    def set_state(self, state) -> None:
        return None


class _HoldPower:
    """A power policy that sets one limit at the start of each run and holds it."""

    def target(self, devices) -> float | None:  # pragma: no cover - overridden
        raise NotImplementedError

    def begin_run(self, session) -> None:
        limit = self.target(session.devices)
        if limit is not None:
            session.devices.set_power_limit(limit)

    def wants_iterations(self, session) -> bool:
        return False

    def on_iteration(self, session, iteration) -> None:
        return None

    def on_epoch_end(self, session, epoch, measurement) -> None:
        return None

    def end_run(self, session) -> None:
        return None

    def get_state(self) -> None:
        return None

    def set_state(self, state) -> None:
        return None


class MaxPower(_HoldPower):
    """Hold the maximum power limit: the paper's "default" baseline."""

    def __init__(self, options: Any, context: Any) -> None:
        pass

    def target(self, devices) -> float | None:
        rng = getattr(devices, "power_limit_range", None)
        if rng is None or not callable(getattr(devices, "set_power_limit", None)):
            return None
        return float(rng()[1])


@attrs.define
class FixedPowerOptions:
    limit_w: float = attrs.field(validator=positive)


class FixedPower(_HoldPower):
    """Hold ``limit_w`` watts on every device (must lie in the device's range)."""

    requires_device = ("power_limit_range", "set_power_limit")

    def __init__(self, options: FixedPowerOptions, context: Any) -> None:
        self.limit = float(options.limit_w)
        device = context.parts.get("device")
        rng = getattr(device, "power_limit_range", None)
        if callable(rng):
            lo, hi = rng()
            if not lo <= self.limit <= hi:
                raise ValueError(f"power.limit_w = {self.limit:g} W is outside the device's range [{lo:g}, {hi:g}] W")

    def target(self, devices) -> float:
        return self.limit


class MaxFrequencyPlan:
    """Every pipeline instruction at the default (maximum) SM clock: the Perseus baseline.

    On a device that can lock clocks, planning unlocks them (``reset_clocks``),
    so the GPU runs at its default maximum boost behaviour.
    """

    def __init__(self, options: Any, context: Any) -> None:
        self.device = context.parts.get("device")
        self.applied = False

    def plan(self, ctx) -> None:
        reset = getattr(self.device, "reset_clocks", None)
        if callable(reset):
            reset()
            self.applied = True

    def summary(self, summary=None) -> dict:
        return {"plan": "max", "clocks_reset": self.applied}

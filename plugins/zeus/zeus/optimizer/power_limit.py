"""Upstream's ``GlobalPowerLimitOptimizer``: profile each power limit just in time, then hold the best.

A state machine driven by ``on_step_begin`` and ``on_epoch_end``: wait ``wait_steps``, then for
each limit from the highest down by ``pl_step`` watts warm up ``warmup_steps`` and measure
``profile_steps`` in a :class:`~zeus.monitor.ZeusMonitor` window; when every limit is measured,
the ``optimum_selector`` picks the one to hold. Limits are set through :func:`zeus.device.get_gpus`
(zeus's device plugins: journaled, put back when the process ends).

This is upstream's sequence, kept here on purpose: an epoch that ends while a limit is being
warmed up or measured cancels that limit's window, sets the maximum limit, and measures the
limit again from the next step. ``zeus_core.PowerLimitOptimizer`` (the ``jit`` policy) instead
starts a limit only when it can finish within the epoch; the README of ``zeus-compat`` says so.

The optimum selectors are the core's (:mod:`zeus_core.selection`). Under ``torch.distributed``
each rank measures its own GPUs; energy is summed and time maxed over ranks, and
:class:`ZeusCost`'s ``world_size`` weighs the time term (upstream's default: 1 per monitored GPU
of this rank).
"""

from __future__ import annotations

import atexit
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from zeus.callback import Callback
from zeus.device import get_gpus
from zeus.device.gpu import ZeusGPUNoPermissionError
from zeus.monitor import ZeusMonitor
from zeus.utils.framework import all_reduce, is_distributed
from zeus_core.datafiles import DataFileError
from zeus_core.selection import Energy, MaxSlowdownConstraint, OptimumSelector, PowerLimitMeasurement, Time, ZeusCost, read_power_profile

logger = logging.getLogger(__name__)

PERMISSION_MESSAGE = (
    "SYS_ADMIN capability is required to modify GPU power limits. See "
    "https://ml.energy/zeus/getting_started/#system-privileges for more information."
)


@dataclass
class Ready:
    """Waiting ``steps`` more step beginnings before warming up ``next_power_limit`` (mW)."""

    next_power_limit: int
    steps: int


@dataclass
class Warmup:
    """Warming up ``current_power_limit`` (mW) for ``steps`` more steps."""

    current_power_limit: int
    steps: int


@dataclass
class Profiling:
    """Measuring ``current_power_limit`` (mW) for ``steps`` more steps."""

    current_power_limit: int
    steps: int


@dataclass
class Done:
    """Holding ``optimal_power_limit`` (mW)."""

    optimal_power_limit: int


def _window(limit_mw: int) -> str:
    return f"__GlobalPowerLimitOptimizer_{limit_mw // 1000}"


def load_profile(path: Path) -> list[PowerLimitMeasurement]:
    """The measurements of a profile file (``{"measurements": [{power_limit, energy, time}, ...]}``)."""
    try:
        return read_power_profile(path, milliwatts=True)
    except DataFileError as e:
        raise ValueError(f"not a power-limit profile: {e}\ndelete it to profile again") from None


class GlobalPowerLimitOptimizer(Callback):
    """One power limit for every GPU the monitor measures, chosen by just-in-time profiling (see the module)."""

    def __init__(
        self,
        monitor: ZeusMonitor,
        optimum_selector: OptimumSelector | None = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: int = 25,
        profile_path: str | Path | None = None,
    ) -> None:
        for name, value, least in (("wait_steps", wait_steps, 0), ("warmup_steps", warmup_steps, 0)):
            if value < least:
                raise ValueError(f"{name} must be non-negative.")
        if profile_steps <= 0:
            raise ValueError("profile_steps must be positive.")
        if pl_step <= 0:
            raise ValueError("pl_step must be positive.")
        self.monitor = monitor
        self.optimum_selector = optimum_selector or ZeusCost(eta_knob=0.5, world_size=len(monitor.gpu_indices))
        self.warmup_steps = warmup_steps
        self.profile_steps = profile_steps
        self.pl_step = pl_step * 1000
        self.profile_path = Path(profile_path) if profile_path is not None else None
        if is_distributed() and len(monitor.gpu_indices) > 1:
            logger.warning(
                "Distributed training with %d GPUs per monitor: monitor one GPU per rank; the optimizer all-reduces over ranks.",
                len(monitor.gpu_indices),
            )
        gpus = get_gpus(ensure_homogeneous=True)
        ranges = [gpus.get_power_management_limit_constraints(i) for i in monitor.gpu_indices]
        if any(r != ranges[0] for r in ranges):
            raise ValueError("Power limits ranges are not uniform across GPUs.")
        lowest, highest = ranges[0]
        self.power_limits: list[int] = list(range(highest, lowest - 1, -self.pl_step))
        self.current_power_limit = 0
        self.measurements: list[PowerLimitMeasurement] = []
        self.state: Ready | Warmup | Profiling | Done
        try:
            if self.profile_path is not None and self.profile_path.exists():
                self.measurements = load_profile(self.profile_path)
                logger.info("Loaded previous profiling results from '%s'.", self.profile_path)
                self.state = Done(optimal_power_limit=self._optimal_power_limit())
                self._set_power_limit(self.state.optimal_power_limit)
            else:
                self.state = Ready(next_power_limit=self.power_limits[0], steps=wait_steps + 1)
                self._set_power_limit(max(self.power_limits))
        except ZeusGPUNoPermissionError as e:
            raise RuntimeError(PERMISSION_MESSAGE) from e
        atexit.register(self._restore)

    def _restore(self) -> None:
        import zeus.device.gpu

        if zeus.device.gpu._gpus is None:  # closed: the device plugin put the limits back
            return
        try:
            self._set_power_limit(max(self.power_limits))
        except Exception as e:  # noqa: BLE001 - at exit; the device plugin's journal puts the limit back regardless
            logger.warning("could not set the maximum power limit at exit: %s", e)

    def on_epoch_end(self) -> None:
        """An epoch ended: a limit being warmed up or measured is dropped, to be measured again next epoch."""
        state = self.state
        if isinstance(state, (Warmup, Profiling)):
            logger.info("%s of %d W interrupted by the end of an epoch.", type(state).__name__, state.current_power_limit // 1000)
            if isinstance(state, Profiling):
                self.monitor.end_window(_window(state.current_power_limit), cancel=True)
            self.state = Ready(next_power_limit=state.current_power_limit, steps=1)
            self._set_power_limit(max(self.power_limits))

    def on_step_begin(self) -> None:
        """A step begins: advance the profiling state machine."""
        state = self.state
        if isinstance(state, Done):
            return
        state.steps -= 1
        if state.steps > 0:
            return
        if isinstance(state, Ready):
            self._warm_up(state.next_power_limit)
        elif isinstance(state, Warmup):
            self.state = Profiling(current_power_limit=state.current_power_limit, steps=self.profile_steps)
            self.monitor.begin_window(_window(state.current_power_limit))
        else:
            self._measured(state.current_power_limit)

    def _warm_up(self, limit: int) -> None:
        logger.info("Warming up %d W.", limit // 1000)
        self._set_power_limit(limit)
        self.state = Warmup(current_power_limit=limit, steps=self.warmup_steps)
        if self.warmup_steps == 0:  # nothing to warm up: measure from this step
            self.state = Profiling(current_power_limit=limit, steps=self.profile_steps)
            self.monitor.begin_window(_window(limit))

    def _measured(self, limit: int) -> None:
        m = self.monitor.end_window(_window(limit))
        self.measurements.append(
            PowerLimitMeasurement(
                power_limit=limit // 1000,
                energy=sum(all_reduce(list(m.gpu_energy.values()), operation="sum")),
                time=max(all_reduce([m.time], operation="max")),
            )
        )
        position = self.power_limits.index(limit)
        if position == len(self.power_limits) - 1:
            self.state = Done(optimal_power_limit=self._optimal_power_limit())
            self._set_power_limit(self.state.optimal_power_limit)
            self._save_profile()
        else:
            self._warm_up(self.power_limits[position + 1])

    def _set_power_limit(self, power_limit: int) -> None:
        """Every monitored GPU to ``power_limit`` mW (nothing when they are there already)."""
        if self.current_power_limit == power_limit:
            return
        gpus = get_gpus()
        for index in self.monitor.gpu_indices:
            gpus._gpu(index)._set_power_limit_journaled(power_limit)  # put back at exit, unlike a direct set
        self.current_power_limit = power_limit

    def _optimal_power_limit(self) -> int:
        optimum = self.optimum_selector.select(self.measurements) * 1000
        logger.info("Optimal power limit is %d W.", optimum // 1000)
        return optimum

    def _save_profile(self) -> None:
        if self.profile_path is None:
            return
        text = json.dumps({"measurements": [attrs.asdict(m) for m in self.measurements]}, indent=4)
        self.profile_path.write_text(text, encoding="utf-8")
        logger.info("Profile saved to '%s'.", self.profile_path)


def _hf_callback() -> type:
    """The Hugging Face callback class, made on first use so that importing this module does not import transformers."""
    base: type
    try:
        from transformers.trainer_callback import TrainerCallback as base
    except ImportError:
        base = object

    class HFGlobalPowerLimitOptimizer(base):
        """:class:`GlobalPowerLimitOptimizer` as a Hugging Face ``TrainerCallback`` (the same arguments)."""

        def __init__(
            self,
            monitor: ZeusMonitor,
            optimum_selector: OptimumSelector | None = None,
            wait_steps: int = 1,
            warmup_steps: int = 10,
            profile_steps: int = 40,
            pl_step: int = 25,
            profile_path: str | Path | None = None,
        ) -> None:
            if base is object:
                raise ImportError("The transformers package is not installed. Please install it to use the HFGlobalPowerLimitOptimizer.")
            self.optimizer = GlobalPowerLimitOptimizer(
                monitor, optimum_selector, wait_steps, warmup_steps, profile_steps, pl_step, profile_path
            )

        def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.optimizer.on_epoch_end()

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.optimizer.on_step_begin()

    HFGlobalPowerLimitOptimizer.__module__ = __name__
    return HFGlobalPowerLimitOptimizer


_lazy: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    if name == "HFGlobalPowerLimitOptimizer":
        if name not in _lazy:
            _lazy[name] = _hf_callback()
        return _lazy[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    HFGlobalPowerLimitOptimizer = _hf_callback()


__all__ = [
    "Done",
    "Energy",
    "GlobalPowerLimitOptimizer",
    "HFGlobalPowerLimitOptimizer",
    "MaxSlowdownConstraint",
    "OptimumSelector",
    "PowerLimitMeasurement",
    "Profiling",
    "Ready",
    "Time",
    "Warmup",
    "ZeusCost",
]

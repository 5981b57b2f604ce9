"""Upstream's ``TemperatureMonitor`` and ``TemperatureSample``: the core's sampler of GPU temperatures.

The sampling is the core's (:class:`zeus_core.inloop.timeline.TemperatureMonitor`); this
module gives it upstream's face: temperatures are whole degrees Celsius (``int``, as NVML
and upstream give them), a GPU asked for that is not monitored is left out of a timeline
query, and a GPU library that cannot be used is a ``ZeusGPUInitError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zeus.device.gpu.common import ZeusGPUInitError, translate
from zeus.monitor.power import check_homogeneous
from zeus.utils.multiprocessing import warn_if_global_in_subprocess
from zeus_core.engine import DeviceOpenError
from zeus_core.errors import DeviceError
from zeus_core.inloop import timeline as _core


@dataclass
class TemperatureSample:
    """One temperature reading: ``timestamp`` (``time.time()`` s), ``gpu_index``, ``temperature_c`` (whole °C)."""

    timestamp: float
    gpu_index: int
    temperature_c: int


class TemperatureMonitor(_core.TemperatureMonitor):
    """GPU temperatures sampled in the background (every ``update_period`` s, 1 s by default).

    ``gpu_indices``: None (every GPU) or a non-empty list; ``max_samples_per_gpu``: points
    kept per GPU (None: the core's bound, 100,000, a run of equal readings being two of them).
    GPUs of more than one model are a ``ZeusGPUHeterogeneousError``, as upstream.
    """

    def __init__(
        self, gpu_indices: list[int] | None = None, update_period: float = 1.0, max_samples_per_gpu: int | None = None, **engine: Any
    ) -> None:
        warn_if_global_in_subprocess(self)
        if gpu_indices is not None and not gpu_indices:
            raise ValueError("`gpu_indices` must be either `None` or non-empty")
        check_homogeneous(engine)
        try:
            super().__init__(gpu_indices, update_period, max_samples_per_gpu, **engine)
        except DeviceOpenError as e:  # no GPU opens: upstream's get_gpus() fails so
            raise ZeusGPUInitError(str(e)) from e
        except DeviceError as e:
            raise translate(e) from e

    def get_temperature_timeline(  # type: ignore[override]
        self,
        gpu_index: int | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
    ) -> dict[int, list[tuple[float, int]]]:
        """``{gpu index: [(time, °C), ...]}`` between the two ``time.time()`` stamps (None: open)."""
        with self._lock:
            return {
                i: [(t, int(round(c))) for t, c in self._timelines[(n, "temperature")].points(start_time, end_time)]
                for i, n in self._gpus(None)
                if gpu_index is None or i == gpu_index
            }

    def get_temperature(self, time: float | None = None) -> dict[int, int] | None:  # type: ignore[override]
        """``{gpu index: °C}`` at the reading nearest to ``time`` (None: the latest); None where a GPU has none."""
        got = super().get_temperature(time)
        return None if got is None else {i: int(round(c)) for i, c in got.items()}


__all__ = ["TemperatureMonitor", "TemperatureSample"]

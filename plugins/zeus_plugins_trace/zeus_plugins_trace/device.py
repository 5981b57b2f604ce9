"""The ``trace`` device: a simulated GPU whose time and energy come from a power trace.

It has a virtual clock (a :class:`zeus_core.device.SimulatedClock`: a job's ``[grid]``
places it at ``start``) and a virtual energy counter. The trace workload tells
it the batch size of a run and advances it iteration range by iteration
range; each iteration takes ``time_per_epoch / iterations_per_epoch`` at the
current (batch size, power limit) and draws that time's share of the epoch's
energy. Its settable power limits are the limits the trace has for the
current batch size; its maximum power (MAXPOWER of the cost) is the GPU's
largest limit anywhere in its power trace, as in the paper's simulator.

The trace itself is loaded by the workload (which knows the dataset, model and
trace folder) and handed over with :meth:`TraceDevice.attach`.

How sure a figure is (``energy_precision``): every figure is a replay of a
published measurement (the power trace's ``average_power`` times
``time_per_epoch``), so its method is ``estimate``. Its error is the error of
that measurement, and the trace's README (Zeus, NSDI'23, ``summary_power_<gpu>.csv``)
says how the figures were taken only as "profiled ... measured once", naming
neither the method (counter or polled power) nor an error, so no relative error
is declared and the bound is unknown (NaN). The replay itself adds nothing:
each epoch draws exactly the traced energy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zeus_core import EpochPrediction
from zeus_core.device import Precision
from zeus_plugins_trace.options import TraceDeviceOptions
from zeus_plugins_trace.traces import WorkloadTrace


class TraceDevice:
    """One simulated GPU replaying a power trace."""

    names = ["gpu0"]
    energy_sources = {"gpu0": "estimate"}
    #: a replayed measurement whose source states no error: an estimate with an unknown bound (the module says why)
    energy_precision = {"gpu0": Precision("estimate", "gpu", 0.0)}

    def __init__(self, options: TraceDeviceOptions, context: Any = None) -> None:
        self.gpu = options.gpu
        #: the GPU whose trace is replayed (zeus_core.DeviceModels), not this machine's
        self.device_models = {"gpu0": f"{options.gpu} (replayed trace)"}
        self.trace: WorkloadTrace | None = None
        self._clock = 0.0
        self._energy = 0.0
        self._row: int | None = None
        self._limit: float | None = None

    # -- wiring --

    def attach(self, trace: WorkloadTrace) -> None:
        self.trace = trace

    def _need(self) -> WorkloadTrace:
        if self.trace is None:
            raise RuntimeError('the trace device replays the trace the trace workload loads: use [workload] plugin = "trace"')
        return self.trace

    @property
    def max_power_w(self) -> float:
        return float(self._need().max_power_w)

    # -- DeviceGroup --

    def clock(self) -> float:
        return self._clock

    def clock_is_simulated(self) -> bool:
        """The clock is the replay's (:class:`zeus_core.device.SimulatedClock`): grid signals place it at ``[grid] start``."""
        return True

    def read_energy(self) -> dict[str, float]:
        return {"gpu0": self._energy}

    def close(self) -> None:
        return None

    # -- power control --

    def power_limit_range(self) -> tuple[float, float]:
        t = self._need()
        return float(np.min(t.power_limits)), float(t.max_power_w)

    def supported_power_limits(self) -> list[float]:
        """The limits the trace has for the current batch size, high to low."""
        t = self._need()
        if self._row is None:
            return [float(p) for p in t.power_limits]
        return [float(p) for p in t.power_limits[~np.isnan(t.time[self._row])]]

    def power_limit(self) -> float | None:
        return self._limit

    def set_power_limit(self, watts: float) -> None:
        allowed = self.supported_power_limits()
        watts = float(watts)
        if watts not in allowed:
            # A limit between two traced ones (e.g. the top of power_limit_range
            # for a batch size traced only lower) snaps to the nearest traced one
            # not above it, as a GPU would cap at the request.
            below = [p for p in allowed if p <= watts]
            if not below:
                raise ValueError(
                    f"power limit {watts:g} W is below every limit the {self.gpu} trace has for this batch size "
                    f"({', '.join(f'{p:g}' for p in allowed)})"
                )
            watts = max(below)
        self._limit = watts

    # -- simulation --

    def use_batch_size(self, batch_size: int) -> None:
        """Start replaying ``batch_size``; a limit the trace lacks for it becomes its highest one."""
        t = self._need()
        self._row = t.index(batch_size)
        limits = self.supported_power_limits()
        if self._limit not in limits:
            self._limit = limits[0]

    def _col(self) -> int:
        t = self._need()
        if self._row is None or self._limit is None:
            raise RuntimeError("the trace device has no batch size yet (the trace workload sets it)")
        return int(np.flatnonzero(t.power_limits == self._limit)[0])

    def epoch_time_energy(self, limit: float | None = None) -> tuple[float, float]:
        """(time, energy) of one epoch at the current batch size and ``limit`` (default: the current one)."""
        t = self._need()
        j = self._col() if limit is None else int(np.flatnonzero(t.power_limits == float(limit))[0])
        time = float(t.time[self._row, j])
        return time, time * float(t.power[self._row, j])

    def advance(self, iterations: int, iterations_per_epoch: int) -> None:
        """Run ``iterations`` of an epoch of ``iterations_per_epoch`` at the current settings."""
        time, energy = self.epoch_time_energy()
        share = iterations / iterations_per_epoch
        self._clock += time * share
        self._energy += energy * share

    # -- prediction --

    def predict_epoch(self, batch_size: int) -> list[EpochPrediction] | None:
        """(power limit, time_s, energy_j) of one epoch at ``batch_size`` for every limit the trace has,
        before any run: what a batch-size policy may plan with (a real GPU offers no such method).
        None for a batch size the trace lacks."""
        t = self._need()
        hits = np.flatnonzero(t.batch_sizes == int(batch_size))
        if not len(hits):
            return None
        i = int(hits[0])
        return [
            EpochPrediction(float(p), float(t.time[i, j]), float(t.time[i, j] * t.power[i, j]))
            for j, p in enumerate(t.power_limits)
            if not np.isnan(t.time[i, j])
        ]

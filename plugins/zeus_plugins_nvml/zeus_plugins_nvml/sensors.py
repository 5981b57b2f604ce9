"""What NVIDIA's sensors are known to do, per GPU model: how a GPU's energy is measured and how sure it is.

A GPU's :class:`~zeus_core.device.Precision` (the ``nvml`` device's ``energy_precision``)
comes from these facts and from what the device saw when it opened:

* the energy counter's update period is inferred when the device opens, from the moves the
  counter check saw (:func:`zeus_core.devicekit.check_counters`), and kept per model
  (:func:`zeus_core.devicekit.model_update_period`); where the check saw too few moves, NVIDIA's
  documented period, :data:`COUNTER_PERIOD_S`, stands; its resolution is NVML's unit, 1 mJ;
* the power reading (what polling integrates: ``nvmlDeviceGetPowerUsage``) is, on A100 and
  H100, refreshed every 100 ms from 25 ms of it (Yang et al., SC'24, "Part-time Power
  Measurements", 70+ GPUs measured against an external meter): :data:`PARTIAL_COVERAGE`;
* on Ampere and later the default reading is an average (over 1 s on most boards; GA100's
  default reading is an average too, same source): :data:`AVERAGED_FROM_ARCH`;
* GH200 and GB200 superchips report module power, which includes the Grace CPU and memory:
  scope ``module``.

These are facts about models, not measured on this machine; a model not listed gets the
cautious side where the source leaves doubt (an averaged reading from Ampere on).
"""

from __future__ import annotations

from zeus_core.device import Precision

#: NVIDIA's energy counter updates about every 100 ms (Yang et al., SC'24); used where the check at open saw too few moves
COUNTER_PERIOD_S = 0.1
#: NVML counts energy in millijoules
COUNTER_RESOLUTION_J = 0.001
#: how often the power reading refreshes (s)
SENSOR_PERIOD_S = 0.1
#: models (a substring of NVML's name) whose power reading covers only part of each refresh period (SC'24: 25 ms of 100 ms)
PARTIAL_COVERAGE = {"A100": 0.25, "H100": 0.25}
#: from this NVML architecture on (Ampere = 7) the default power reading is a trailing average over :data:`AVERAGE_S`
AVERAGED_FROM_ARCH = 7
AVERAGE_S = 1.0
#: models whose counter and reading cover the whole module (GPU, Grace CPU and memory)
MODULE_SCOPE = ("GH200", "GB200")


def scope(model: str) -> str:
    """``module`` for a superchip that reports module power, else ``gpu``."""
    return "module" if any(m in model for m in MODULE_SCOPE) else "gpu"


def coverage(model: str) -> float:
    """The part of each refresh period the power reading covers (1.0 where no partial coverage is known)."""
    return min((c for m, c in PARTIAL_COVERAGE.items() if m in model), default=1.0)


def counter_precision(model: str, max_w: float, period_s: float | None) -> Precision:
    """A counter GPU's precision: its update period as inferred (else :data:`COUNTER_PERIOD_S`), NVML's 1 mJ."""
    return Precision(
        "counter",
        scope(model),
        max_w,
        period_s=COUNTER_PERIOD_S if period_s is None else period_s,
        resolution_j=COUNTER_RESOLUTION_J,
    )


def polling_precision(model: str, arch: int | None, max_w: float, poll_s: float) -> Precision:
    """A polled GPU's precision: the polling period, the reading's refresh period and coverage, and
    its averaging (an unknown architecture is taken as averaged)."""
    averaged = arch is None or arch >= AVERAGED_FROM_ARCH
    return Precision(
        "polling",
        scope(model),
        max_w,
        period_s=poll_s,
        sensor_period_s=SENSOR_PERIOD_S,
        coverage=coverage(model),
        average_s=AVERAGE_S if averaged else 0.0,
    )


__all__ = [
    "AVERAGED_FROM_ARCH",
    "AVERAGE_S",
    "COUNTER_PERIOD_S",
    "COUNTER_RESOLUTION_J",
    "MODULE_SCOPE",
    "PARTIAL_COVERAGE",
    "SENSOR_PERIOD_S",
    "counter_precision",
    "coverage",
    "polling_precision",
    "scope",
]

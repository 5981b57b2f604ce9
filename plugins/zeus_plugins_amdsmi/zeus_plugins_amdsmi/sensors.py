"""What AMD's sensors are known to do: how an AMD GPU's energy is measured and how sure it is.

An AMD GPU's :class:`~zeus_core.device.Precision` (the ``amdsmi`` device's ``energy_precision``)
comes from these facts and from what the device saw when it opened:

* the energy accumulator (``amdsmi_get_energy_count``) is the SMU firmware's ``energy_accumulator``
  of the GPU metrics table (rocm_smi_lib ``rsmi_dev_energy_count_get`` reads
  ``gpu_metrics.energy_accumulator``); each count is ``counter_resolution`` µJ as the library
  reports it (``kEnergyCounterResolution = 15.3F`` in rocm_smi.cc, the same for every ASIC): the
  counter's step, :attr:`~zeus_core.device.Precision.resolution_j`;
* the kernel caches the metrics table and reads the firmware's again only once a jiffy past 1 ms
  has gone (``smu_cmn_get_metrics_table``: ``time_after(jiffies, metrics_time +
  msecs_to_jiffies(1))``; AMD's SMI team: "The driver can read at 1ms intervals. If multiple calls
  come within 1ms then previous cached value is returned", ROCm/legacy-rocm-build issue 1649), so a
  reading can be two jiffies old: 20 ms at HZ=100, the coarsest tick Linux offers
  (:data:`COUNTER_PERIOD_S`). How often the firmware itself renews the table AMD does not
  document: the update period is inferred when the device opens, from the moves the counter check
  saw (:func:`zeus_core.devicekit.check_counters`), and kept per model
  (:func:`zeus_core.devicekit.model_update_period`); :data:`COUNTER_PERIOD_S` stands only where
  the check saw too few moves;
* polled power (``amdsmi_get_power_info``) is ``current_socket_power`` where the GPU reports it
  (MI300 on: the firmware's ``SocketPower``, renewed with the same table) and else
  ``average_socket_power``, an average whose window AMD does not document: its lag, and so the
  bound of a window polled from it, is unknown (NaN), never guessed small.

* the firmware counts in 2**-16 J (15.259 µJ; kernel ``smu_v13_0_6_ppt.c``: "Energy counter
  reported in 15.259uJ (2^-16) units"; rocm_smi.cc hard-codes one resolution "since all ASICs have
  same resolution") while the library multiplies by the 15.3 µJ it reports, so counted energy is
  about 0.27 % high whatever the window: the counter's :attr:`~zeus_core.device.Precision.scale`,
  from the resolution the library reports against :data:`FIRMWARE_UNIT_UJ` (0 should it report
  the exact unit one day).
"""

from __future__ import annotations

from zeus_core.device import Precision

#: the oldest a metrics-table reading can be where the check at open saw too few moves: the kernel's
#: 1 ms cache rounded up to two jiffies at HZ=100 (s)
COUNTER_PERIOD_S = 0.02
#: the unit the SMU firmware counts energy in (µJ): 2**-16 J
FIRMWARE_UNIT_UJ = 1e6 / 65536


def counter_precision(max_w: float, period_s: float | None, resolution_uj: float) -> Precision:
    """An accumulator GPU's precision: its update period as inferred (else :data:`COUNTER_PERIOD_S`), the
    step the library reports (``counter_resolution``, µJ), and how far that step is from the unit the
    firmware counts in."""
    return Precision(
        "counter",
        "gpu",
        max_w,
        period_s=COUNTER_PERIOD_S if period_s is None else period_s,
        resolution_j=resolution_uj / 1e6,
        scale=abs(resolution_uj / FIRMWARE_UNIT_UJ - 1.0),
    )


def polling_precision(max_w: float, poll_s: float, instant: bool, sensor_period_s: float | None) -> Precision:
    """A polled GPU's precision: ``current_socket_power`` (``instant``) renewed with the metrics table
    every ``sensor_period_s``, else ``average_socket_power``, whose averaging window is not documented
    (``average_s`` NaN: the bound is unknown)."""
    return Precision(
        "polling",
        "gpu",
        max_w,
        period_s=poll_s,
        sensor_period_s=COUNTER_PERIOD_S if sensor_period_s is None else sensor_period_s,
        average_s=0.0 if instant else float("nan"),
    )


__all__ = ["COUNTER_PERIOD_S", "FIRMWARE_UNIT_UJ", "counter_precision", "polling_precision"]

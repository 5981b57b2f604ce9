"""The ``apple-silicon`` device: CPU, GPU, ANE and DRAM energy of an Apple Silicon chip.

``zeus_apple_silicon`` reads the chip's IOReport energy channels, which count
from boot; ``get_cumulative_energy()`` gives each in millijoules, ``None`` for a
channel the chip does not have. Each channel present when the device opens is
one device name: ``cpu`` (all CPU clusters), ``gpu``, ``gpu-sram``, ``ane``
(the Neural Engine) and ``dram``. Per-core and per-cluster channels are inside
``cpu`` and are not separate names.

How sure a figure is (``energy_precision``): every channel is a ``counter`` in
whole millijoules (zeus-apple-silicon's ``AppleEnergyMetrics`` fields are
``int64_t`` mJ; ``apple_energy.hpp`` divides the GPU channel's nJ by 1e6), so its
step is 1 mJ. Apple documents neither how often IOReport's "Energy Model"
channels are renewed nor their error: the update period is inferred when the
device opens, from the moves the counter check sees (as upstream's
``infer_counter_update_period``), and kept per chip; a channel the check did not
see move three times has an unknown bound (NaN) until a later open of the same
chip sees one. The most a channel may draw is ``max_power_w``, else
:data:`CHIP_MAX_W`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

from zeus_core import DeviceError
from zeus_core.device import Precision
from zeus_core.devicekit import ClosedOnExit, CounterProbe, check_counters, model_update_period
from zeus_plugins_apple_silicon.control import apple_module, chip_name
from zeus_plugins_apple_silicon.options import AppleSiliconOptions

#: how long the check at open watches the channels (s): with no power reading it can only see a
#: counter go back or jump beyond what the chip can draw
CHECK_S = 0.2
#: the most an Apple Silicon chip draws, for the jump check where ``max_power_w`` is unset (an M2
#: Ultra's whole package stays under 300 W)
CHIP_MAX_W = 500.0

#: device name -> AppleEnergyMetrics field
CHANNELS = {"cpu": "cpu_total_mj", "gpu": "gpu_mj", "gpu-sram": "gpu_sram_mj", "ane": "ane_mj", "dram": "dram_mj"}
#: what each channel's energy covers (zeus_core.device.SCOPES): the CPU clusters, the GPU, DRAM; the rest ``device``
SCOPES = {"cpu": "cpu_package", "gpu": "gpu", "dram": "dram"}
#: zeus-apple-silicon reports whole millijoules: a channel's step (J)
RESOLUTION_J = 0.001


class AppleSilicon(ClosedOnExit):
    """The ``apple-silicon`` device group: one name per energy channel the chip reports."""

    clock = staticmethod(time.monotonic)

    def __init__(self, options: AppleSiliconOptions | None = None, module: Any = None) -> None:
        self.options = options = options or AppleSiliconOptions()
        self._module = module = module or apple_module()
        try:
            self._monitor = module.AppleEnergyMonitor()
        except RuntimeError as e:
            raise DeviceError(
                f"zeus_apple_silicon cannot read the energy channels ({e}); IOReport is available on macOS on Apple Silicon (M1 and newer)"
            ) from None
        first = self._monitor.get_cumulative_energy()
        self._fields = {name: field for name, field in CHANNELS.items() if getattr(first, field) is not None}
        if not self._fields:
            raise DeviceError("zeus_apple_silicon reports no CPU, GPU, ANE or DRAM energy on this chip")
        self.model = chip_name(module)
        self._check_counters(options)
        self.names = list(self._fields)
        self.energy_sources = dict.fromkeys(self.names, "counter")
        self.max_power_w = float(options.max_power_w or 0.0)
        period = model_update_period(self._period_key())
        max_w = options.max_power_w or CHIP_MAX_W
        #: how each channel is measured and how sure it is (zeus_core.device.EnergyPrecision): NaN period where none was seen
        self.energy_precision = {
            name: Precision(
                "counter",
                SCOPES.get(name, "device"),
                max_w,
                period_s=float("nan") if period is None else period,
                resolution_j=RESOLUTION_J,
            )
            for name in self.names
        }

    def _period_key(self) -> str:
        """Update periods are kept per chip (every channel of a chip is one IOReport subscription)."""
        return f"apple-silicon {self.model or 'unknown chip'}"

    def _check_counters(self, options: AppleSiliconOptions) -> None:
        """Watch every channel's counter for :data:`CHECK_S` before trusting it: one that runs backwards
        or jumps beyond what the chip can draw is left out, with a warning. IOReport reports no power,
        so there is nothing to poll instead, and a counter that stands still cannot be told from an
        idle channel (the check keeps it)."""
        max_w = options.max_power_w or CHIP_MAX_W
        probes = {name: CounterProbe(self._channel_j(field), lambda: None, max_w, period_s=0.001) for name, field in self._fields.items()}
        periods: dict[str, float] = {}
        refused = check_counters(probes, CHECK_S, kind="chip", periods=periods)
        for seen in periods.values():  # the update period as the check saw it, kept per chip (the longest seen)
            model_update_period(self._period_key(), seen)
        for name, why in refused.items():
            warnings.warn(
                f"{self.model or 'Apple Silicon'} {name} channel ({self._fields[name]}): its energy counter {why}; "
                "refused, and left out: IOReport reports no power to poll instead",
                stacklevel=4,
            )
            del self._fields[name]
        if not self._fields:
            raise DeviceError("every energy channel of this chip failed the counter check; see the warnings above")

    def _channel_j(self, field: str) -> Callable[[], float]:
        return lambda: float(getattr(self._monitor.get_cumulative_energy(), field)) / 1000.0

    def read_energy(self) -> dict[str, float]:
        """Joules per channel since boot (a fixed point: windows subtract it away)."""
        m = self._monitor.get_cumulative_energy()
        out = {}
        for name, field in self._fields.items():
            mj = getattr(m, field)
            if mj is None:
                raise DeviceError(f"zeus_apple_silicon stopped reporting {field} ({name}) energy")
            out[name] = mj / 1000.0
        return out

    @property
    def device_models(self) -> dict[str, str]:
        """The chip, for each of its channels (:class:`zeus_core.device.DeviceModels`)."""
        return dict.fromkeys(self.names, self.model) if self.model else {}

    def identity(self) -> dict[str, Any]:
        """The chip (:class:`zeus_core.HasIdentity`): energy learned on one chip means nothing on another."""
        return {"soc_model": self.model}

    def close(self) -> None:
        self._monitor = _Closed()


class _Closed:
    def get_cumulative_energy(self) -> Any:
        raise DeviceError("the apple-silicon device is closed")


def make_apple_silicon(options: AppleSiliconOptions, context: Any) -> AppleSilicon:
    """Apple Silicon CPU, GPU, ANE and DRAM energy through zeus_apple_silicon."""
    job = getattr(context, "job", None)
    if job is not None and options.max_power_w is None and job.eta_knob < 1:
        raise DeviceError(
            "Apple Silicon has no power limit to weigh time by in the cost metric (eta_knob < 1): "
            "set max_power_w in [device] to the chip's power budget"
        )
    return AppleSilicon(options)

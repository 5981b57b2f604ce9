"""The ``amdsmi`` device: the HIP-visible AMD GPUs, measured and steered through amdsmi.

Energy comes from each GPU's energy accumulator (:mod:`zeus_plugins_amdsmi.energy`)
where a check at open finds it moving and agreeing with the power the GPU
reports, and from polled power otherwise. A GPU that reports no power at all
(the odd die of a dual-die MI250X, whose sibling reports both) cannot be
measured on its own: it is an error when named in ``gpus``, and left out with a
warning otherwise. A power limit on AMD is a power cap: read, set (journaled
first) and put back exactly as NVML's limits (:class:`zeus_core.devicekit.SettingsPath`).
Power domains are amdsmi's ``instant`` (``current_socket_power``, MI300 on) and
``average`` (``average_socket_power``); amdsmi reports no memory power.
Temperatures are the hotspot (junction) sensor, else the edge sensor.

Clocks (:class:`zeus_core.device.ClockControl`, what Perseus's frequency plans
lock): amdsmi sets a clock's soft limits, a range whose minimum must lie below
its maximum, not one frequency as NVML locks. Locking the GFX clock at ``f``
sets the range ``[hardware minimum, f]``: a busy GPU runs at its ceiling, so ``f``
is the clock it computes at, as under NVML's lock. The supported clocks are the
hardware maximum and every multiple of :data:`CLOCK_STEP_MHZ` below it (AMD's
fine-grained DPM takes any value in the range), read before this group locks
anything: amdsmi reads back the limits in force, never the hardware's once a
lock is set. The range before the change is journaled and put back like the
cap; the memory clock is left alone.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any

from zeus_core import DeviceError
from zeus_core.attribution import DeviceActivity
from zeus_core.device import Precision
from zeus_core.devicekit import (
    CAP_DAC_OVERRIDE,
    CounterProbe,
    DriverDevice,
    GpuClockRanges,
    GpuGroup,
    PowerIntegral,
    Sampler,
    SettingsPath,
    WrappingCounter,
    check_clock,
    check_counters,
    model_update_period,
    watch_period,
)
from zeus_core.errors import DeviceAbsent
from zeus_plugins_amdsmi.control import (
    FAKE_ENV,
    OWNER,
    STATUS_INVAL,
    STATUS_NOT_SUPPORTED,
    acquire,
    clock_range,
    driver_errors,
    key_for,
    release,
    restore_setting,
    set_cap,
    set_clock_range,
    smi_module,
)
from zeus_plugins_amdsmi.energy import WRAP_COUNTS
from zeus_plugins_amdsmi.options import AmdsmiOptions
from zeus_plugins_amdsmi.processes import GfxTimeSampler
from zeus_plugins_amdsmi.sensors import counter_precision, polling_precision
from zeus_plugins_amdsmi.visible import AmdGpuRef, VisibleDevicesError, visible_gpus

#: no GPU draws more; bounds how fast a 32-bit accumulator can wrap when the caps cannot be read
ASSUMED_MAX_W = 3000.0

#: the step between the GFX clocks offered to frequency plans (MHz): NVIDIA's between its supported SM clocks
CLOCK_STEP_MHZ = 15

#: amdsmi_init's status where the machine has no amdgpu driver to talk to
_NO_DRIVER = (18, 34)  # AMDSMI_STATUS_INIT_ERROR, AMDSMI_STATUS_DRIVER_NOT_LOADED


def _watts(value: Any) -> float | None:
    """amdsmi's socket power (whole W, or "N/A" where the GPU does not report it)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class AmdGpu(DriverDevice):
    """One HIP-visible AMD GPU: identity, power, caps (W here; µW in amdsmi) and temperature."""

    def __init__(self, smi: Any, ref: AmdGpuRef, settings: SettingsPath) -> None:
        self._smi = smi
        self.driver_errors = driver_errors(smi)
        self.name = f"gpu{ref.hip_index}"
        self.hip_index = ref.hip_index
        self.uuid = ref.uuid
        self.model = "AMD GPU"  # until amdsmi names it (for a message about naming it)
        self.handle = ref.handle
        self._settings = settings
        self._hardware_clocks: dict[str, tuple[int, int]] = {}  # setting -> the hardware range (MHz), read before any lock
        self.model = str(self.call("read the model", smi.amdsmi_get_gpu_asic_info, ref.handle)["market_name"])

    # -- reads --

    def power_domains(self) -> dict[str, float]:
        """``instant`` and ``average`` socket power (W), each where the GPU reports it."""
        info = self.call("read the power", self._smi.amdsmi_get_power_info, self.handle)
        out = {}
        for domain, key in (("instant", "current_socket_power"), ("average", "average_socket_power")):
            w = _watts(info.get(key))
            if w is not None:
                out[domain] = w
        return out

    def read_power(self) -> float | None:
        """Power (W): instant where reported, else the driver's average; None where neither is."""
        domains = self.power_domains()
        return domains.get("instant", domains.get("average"))

    def counts(self) -> tuple[int, float]:
        """(energy accumulator, µJ per count)."""
        got = self.call("read the energy accumulator", self._smi.amdsmi_get_energy_count, self.handle)
        return int(got["energy_accumulator"]), float(got["counter_resolution"])

    def _caps(self) -> dict[str, int]:
        return self.call("read the power cap", self._smi.amdsmi_get_power_cap_info, self.handle)

    def power_limit_range(self) -> tuple[float, float]:
        caps = self._caps()
        return caps["min_power_cap"] / 1e6, caps["max_power_cap"] / 1e6

    def power_limit(self) -> float:
        return self._caps()["power_cap"] / 1e6

    def temperature(self) -> float | None:
        """The hotspot (junction) temperature (°C), else the edge one; None where the GPU has neither."""
        smi = self._smi
        for sensor in (smi.AmdSmiTemperatureType.HOTSPOT, smi.AmdSmiTemperatureType.EDGE):
            try:
                return float(smi.amdsmi_get_temp_metric(self.handle, sensor, smi.AmdSmiTemperatureMetric.CURRENT))
            except smi.AmdSmiLibraryException as e:
                if e.get_error_code() != STATUS_NOT_SUPPORTED:
                    raise self.explain("read the temperature", e) from None
        return None

    # -- clocks --

    def hardware_clock_range(self, setting: str = "locked_clocks") -> tuple[int, int]:
        """The hardware range (MHz) of the GFX clock (or ``locked_memory_clocks``), read once, before this
        group locks it."""
        if setting not in self._hardware_clocks:
            what = "GFX" if setting == "locked_clocks" else "memory"
            lo, hi = self.call(f"read the {what} clock range", clock_range, self._smi, self.handle, setting)
            self._hardware_clocks[setting] = (lo, hi)
        return self._hardware_clocks[setting]

    def clocks(self) -> dict[str, float]:
        """The current GFX (``sm``) and memory clocks (MHz, ``amdsmi_get_clock_info``'s ``clk``), each where
        the GPU reports it."""
        smi = self._smi
        out = {}
        for clock, kind in (("sm", smi.AmdSmiClkType.SYS), ("memory", smi.AmdSmiClkType.MEM)):
            try:
                mhz = smi.amdsmi_get_clock_info(self.handle, kind)["clk"]
            except smi.AmdSmiLibraryException as e:
                if e.get_error_code() != STATUS_NOT_SUPPORTED:
                    raise self.explain(f"read the {clock} clock", e) from None
                continue
            if isinstance(mhz, (int, float)) and not isinstance(mhz, bool):  # "N/A" where the GPU does not say
                out[clock] = float(mhz)
        return out

    def supported_clocks(self) -> list[int]:
        """GFX clocks (MHz, highest first): the hardware maximum, then every multiple of :data:`CLOCK_STEP_MHZ`
        below it down to just above the minimum (a lock's ceiling must lie above the range's floor). Multiples,
        not steps from each GPU's maximum, so that GPUs with different ranges share the clocks they both take."""
        lo, hi = self.hardware_clock_range()
        below = hi - 1 - (hi - 1) % CLOCK_STEP_MHZ
        return [hi, *(c for c in range(below, lo, -CLOCK_STEP_MHZ))] if hi > lo else []

    def lock_clocks(self, mhz: int) -> None:
        """Hold the GFX clock at ``mhz`` or below: soft limits ``[hardware minimum, mhz]`` (journaled)."""
        check_clock(
            mhz, self.supported_clocks(), f"GFX clock of {self.label}", f", every multiple of {CLOCK_STEP_MHZ} MHz below the maximum"
        )
        self._lock_range("locked_clocks", self.hardware_clock_range()[0], mhz)

    def _lock_range(self, setting: str, min_mhz: int, max_mhz: int) -> None:
        """Set a clock's soft limits (journaled: the limits in force before are put back)."""
        lo, hi = self.hardware_clock_range(setting)  # known before the first lock narrows what amdsmi reads
        what = "GFX clock" if setting == "locked_clocks" else "memory clock"
        if not lo <= min_mhz < max_mhz <= hi:
            raise ValueError(
                f"{what} {min_mhz}..{max_mhz} MHz is not a range {self.label} takes: the minimum below the maximum, "
                f"both within {lo}..{hi} MHz (amdsmi sets a clock's limits; it cannot hold one frequency)"
            )
        smi = self._smi
        original = self.call(f"read the {what} range", clock_range, smi, self.handle, setting)
        op = "lock_clocks" if setting == "locked_clocks" else "lock_memory_clocks"
        self.call(
            f"lock the {what} to {min_mhz}..{max_mhz} MHz",
            self._settings.change,
            key_for(self.uuid, setting),
            original,
            lambda: set_clock_range(smi, self.handle, setting, min_mhz, max_mhz),
            (f"amdsmi.{op}", {"gpu": self.uuid, "min_mhz": int(min_mhz), "max_mhz": int(max_mhz)}),
            (f"amdsmi.{op.replace('lock', 'reset')}", {"gpu": self.uuid}),
        )

    def reset_clocks(self) -> None:
        """Put the GFX clock's limits back if this group set them, else back to the hardware range."""
        self._reset_range("locked_clocks")

    def _reset_range(self, setting: str) -> None:
        """Put a clock's soft limits back if this group set them, else back to the hardware range."""
        smi = self._smi
        lo, hi = self.hardware_clock_range(setting)
        op = "reset_clocks" if setting == "locked_clocks" else "reset_memory_clocks"
        what = "GFX clock" if setting == "locked_clocks" else "memory clock"
        self.call(
            f"reset the {what}",
            self._settings.reset,
            key_for(self.uuid, setting),
            lambda: set_clock_range(smi, self.handle, setting, lo, hi),
            (f"amdsmi.{op}", {"gpu": self.uuid}),
        )

    # -- clock ranges (upstream Zeus's clock API, zeus-compat): the limits as given, amdsmi checks them --

    def supported_memory_clocks(self) -> list[int]:
        """The memory clock's hardware range as ``[maximum, minimum]`` (MHz), as upstream lists an AMD GPU's."""
        lo, hi = self.hardware_clock_range("locked_memory_clocks")
        return [hi, lo]

    def supported_graphics_clocks(self, memory_mhz: int) -> list[int]:
        """The GFX clocks of :meth:`supported_clocks`, whatever the memory clock (an AMD GPU's do not depend on it)."""
        return self.supported_clocks()

    def lock_clock_range(self, min_mhz: int, max_mhz: int) -> None:
        """Set the GFX clock's limits to ``[min_mhz, max_mhz]`` (journaled)."""
        self._lock_range("locked_clocks", min_mhz, max_mhz)

    def lock_memory_clock_range(self, min_mhz: int, max_mhz: int) -> None:
        """Set the memory clock's limits to ``[min_mhz, max_mhz]`` (journaled)."""
        self._lock_range("locked_memory_clocks", min_mhz, max_mhz)

    def reset_sm_clocks(self) -> None:
        self._reset_range("locked_clocks")

    def reset_memory_clocks(self) -> None:
        self._reset_range("locked_memory_clocks")

    # -- control (journaled) --

    def set_power_limit(self, watts: float) -> None:
        lo, hi = self.power_limit_range()
        if not lo <= watts <= hi:
            raise ValueError(f"power cap {watts:g} W is outside the range of {self.label}: {lo:g} to {hi:g} W")
        microwatts = int(round(watts * 1e6))
        current = self._caps()["power_cap"]
        if current == microwatts:
            return
        try:
            self._settings.change(
                key_for(self.uuid),
                current,
                lambda: set_cap(self._smi, self.handle, microwatts),
                ("amdsmi.set_power_cap", {"gpu": self.uuid, "microwatts": microwatts}),
                ("amdsmi.reset_power_cap", {"gpu": self.uuid}),
            )
        except self._smi.AmdSmiLibraryException as e:
            if e.get_error_code() == STATUS_INVAL:
                raise DeviceError(
                    f"cannot set the power cap of {self.label} to {watts:g} W: amdsmi refused it as invalid "
                    f"(its range is {lo:g} to {hi:g} W)"
                ) from None
            raise self.explain("set the power cap", e) from None


class AmdGpus(GpuClockRanges, GpuGroup):
    """The ``amdsmi`` device group: HIP-visible AMD GPUs, named ``gpu<i>`` with ``i`` torch's index.

    Group-level control applies one cap to every GPU; ``set_power_limits`` sets
    one per GPU (allocators over mixed GPUs). Clock locks and ranges (:class:`~zeus_core.devicekit.GpuClockRanges`)
    apply to every GPU.
    """

    clock = staticmethod(time.monotonic)
    limit_name = "power cap"

    def __init__(self, options: AmdsmiOptions | None = None, smi: Any = None) -> None:
        self.options = options = options or AmdsmiOptions()
        self._smi = smi = smi or smi_module()
        self._sampler: Sampler | None = None
        try:
            acquire(smi)
        except smi.AmdSmiLibraryException as e:
            if os.environ.get(FAKE_ENV) and smi.__name__.endswith("fake_amdsmi"):
                raise DeviceError(
                    f"the simulated AMD driver ${FAKE_ENV}={os.environ[FAKE_ENV]} cannot start ({e.get_error_info()}): "
                    f"create its state first with `python -m zeus_plugins_amdsmi.fake_amdsmi {os.environ[FAKE_ENV]}`, "
                    f"or unset {FAKE_ENV} to use the real driver"
                ) from None
            error = DeviceAbsent if e.get_error_code() in _NO_DRIVER else DeviceError
            raise error(
                f"amdsmi cannot start ({e.get_error_info()}): is the amdgpu driver loaded? "
                'Measure the CPU instead with [device] plugin = "rapl" or "cpu-estimate"'
            ) from None
        try:
            self._setup(options)
        except BaseException:
            self.release()
            raise

    def _setup(self, options: AmdsmiOptions) -> None:
        smi = self._smi
        try:
            refs = visible_gpus(smi, os.environ)
        except VisibleDevicesError as e:
            raise DeviceError(str(e)) from None
        except smi.AmdSmiLibraryException as e:
            raise DeviceError(f"amdsmi cannot list the GPUs ({e.get_error_info()})") from None
        if not refs:
            raise DeviceAbsent("amdsmi finds no AMD GPU on this machine")
        if options.gpus is not None:
            bad = [i for i in options.gpus if i >= len(refs)]
            if bad:
                raise DeviceError(
                    f"gpus {bad} are not HIP-visible: HIP sees {len(refs)} GPU(s), indices 0..{len(refs) - 1}" + _visibility_note()
                )
            refs = [refs[i] for i in options.gpus]
        self.settings = SettingsPath(OWNER, restore_setting, options.daemon_socket, CAP_DAC_OVERRIDE, driver_errors(smi))
        gpus = [AmdGpu(smi, r, self.settings) for r in refs]
        self.gpus = self._measurable(gpus, explicit=options.gpus is not None)
        self.names = [g.name for g in self.gpus]
        self.sync_indices = [g.hip_index for g in self.gpus]
        self.max_power_w = self._max_power(options.max_power_w)
        self.energy_sources = self._sources(options)
        self._precisions = self._precision_table(options)
        self._polled = PowerIntegral()
        self._counters: dict[str, WrappingCounter] = {}
        for g in self.gpus:
            if self.energy_sources[g.name] == "counter":
                self._counters[g.name] = self._counter(g)
            else:
                self._sample(g)
        polled = any(s == "polling" for s in self.energy_sources.values())
        period = options.poll_interval_s if polled else watch_period(self._counters.values())
        self._sampler = Sampler(period, self._tick, "zeus-amdsmi-sampler")
        self._processes = GfxTimeSampler(smi, self.gpus, options.idle_power_w)

    def _counter(self, g: AmdGpu) -> WrappingCounter:
        """GPU ``g``'s accumulator, extended past 32-bit wraps; a step above twice the GPU's maximum
        cap is a counter reset, not a wrap."""
        smi = self._smi
        resolution_uj = float(smi.amdsmi_get_energy_count(g.handle)["counter_resolution"])
        return WrappingCounter(
            g.name,
            lambda: int(smi.amdsmi_get_energy_count(g.handle)["energy_accumulator"]),
            WRAP_COUNTS,
            resolution_uj / 1e6,
            2 * self._cap_or(g, ASSUMED_MAX_W / 2),
            resets=True,
        )

    def _measurable(self, gpus: list[AmdGpu], explicit: bool) -> list[AmdGpu]:
        """The GPUs that report power. One that reads 0 W with a still accumulator reports nothing
        (the odd die of an MI250X): an error if asked for by index, else left out with a warning."""
        silent = [g for g in gpus if (d := g.power_domains()) and not any(d.values()) and not _moves(g)]
        for g in silent:
            hint = (
                f" {g.model} is a dual-die GPU: the die before it reports the power and energy of both; measure that one"
                if "MI250" in g.model
                else ""
            )
            msg = f"{g.label} reports no power (0 W, its energy accumulator still).{hint}"
            if explicit:
                raise DeviceError(msg + "; leave it out of gpus")
            warnings.warn(msg + "; it is left out", stacklevel=4)
        kept = [g for g in gpus if g not in silent]
        if not kept:
            raise DeviceError("no visible AMD GPU reports its power")
        return kept

    def _sources(self, options: AmdsmiOptions) -> dict[str, str]:
        if options.energy == "polling":
            silent = [g.label for g in self.gpus if g.read_power() is None]
            if silent:
                raise DeviceError(f'{silent[0]} reports no power to poll (amdsmi: N/A); use energy = "auto"')
            return {g.name: "polling" for g in self.gpus}
        try:
            probes = {g.name: self._probe(g) for g in self.gpus}
            periods: dict[str, float] = {}
            bad = check_counters(probes, options.counter_check_s, kind="GPU", periods=periods)
            for g in self.gpus:  # the update period as the check saw it, kept per model (the longest seen)
                model_update_period(g.model, periods.get(g.name))
        except self._smi.AmdSmiLibraryException as e:
            if options.energy == "counter" or e.get_error_code() != STATUS_NOT_SUPPORTED:
                raise DeviceError(f"cannot read the energy accumulators ({e.get_error_info()})") from None
            bad = {g.name: "it has no energy accumulator (AMDSMI_STATUS_NOT_SUPPORTED)" for g in self.gpus}
        if bad and options.energy == "counter":
            name, why = next(iter(bad.items()))
            g = next(g for g in self.gpus if g.name == name)
            raise DeviceError(
                f"{g.label} cannot be measured by its energy accumulator: {why}. "
                'Use energy = "auto" (polled power where the accumulator fails) or "polling"'
            )
        for name, why in bad.items():
            g = next(g for g in self.gpus if g.name == name)
            if g.read_power() is None:
                raise DeviceError(f"{g.label} cannot be measured: {why}, and it reports no power to poll")
            warnings.warn(f"{g.label}: {why}; its energy is polled power instead", stacklevel=4)
        return {g.name: "polling" if g.name in bad else "counter" for g in self.gpus}

    def _probe(self, g: AmdGpu) -> CounterProbe:
        """GPU ``g``'s accumulator and power for the check at open: it updates about every millisecond
        and wraps at :data:`WRAP_COUNTS` where the firmware accumulates in 32 bits."""

        def joules() -> float:
            counts, resolution_uj = g.counts()
            return counts * resolution_uj / 1e6

        resolution_j = float(self._smi.amdsmi_get_energy_count(g.handle)["counter_resolution"]) / 1e6
        return CounterProbe(
            joules,
            g.read_power,
            self._cap_or(g, ASSUMED_MAX_W),
            period_s=0.001,
            range_j=WRAP_COUNTS * resolution_j,
            resolution_j=resolution_j,
        )

    @staticmethod
    def _cap_or(g: AmdGpu, default: float) -> float:
        try:
            return g.power_limit_range()[1]
        except DeviceError:
            return default

    def _max_power(self, per_gpu: float | None) -> float:
        if per_gpu is not None:
            return per_gpu * len(self.gpus)
        total = 0.0
        for g in self.gpus:
            try:
                total += g.power_limit_range()[1]
            except DeviceError:
                raise DeviceError(f"cannot read the maximum power cap of {g.label}; set max_power_w in [device]") from None
        return total

    # -- measurement --

    def _sample(self, g: AmdGpu) -> None:
        watts = g.read_power()
        if watts is not None:
            self._polled.add(g.name, time.monotonic(), watts)

    def _tick(self) -> None:
        """What the sampler thread does each period: poll the polled GPUs, read every accumulator
        (so that no wraparound goes unseen)."""
        for g in self.gpus:
            if g.name in self._counters:
                self._counters[g.name].joules()
            else:
                self._sample(g)

    def read_energy(self) -> dict[str, float]:
        """Cumulative joules per GPU since the device opened."""
        sampler = self._sampler
        if sampler is not None and sampler.error is not None and self._polled_names():
            raise DeviceError(f"the AMD power poller failed: {sampler.error}")
        now = time.monotonic()
        out = {}
        for g in self.gpus:
            counter = self._counters.get(g.name)
            try:
                out[g.name] = counter.joules() if counter is not None else self._polled.joules(g.name, now)
            except self._smi.AmdSmiLibraryException as e:
                raise g.explain("read the energy", e) from None
        return out

    def _precision_table(self, options: AmdsmiOptions) -> dict[str, Precision]:
        """Per GPU, how its energy is measured and how sure it is (:mod:`zeus_plugins_amdsmi.sensors`)."""
        table = {}
        for g in self.gpus:
            max_w = self._cap_or(g, ASSUMED_MAX_W)
            period = model_update_period(g.model)
            if self.energy_sources[g.name] == "counter":
                resolution_uj = float(self._smi.amdsmi_get_energy_count(g.handle)["counter_resolution"])
                table[g.name] = counter_precision(max_w, period, resolution_uj)
            else:
                instant = "instant" in g.power_domains()
                table[g.name] = polling_precision(max_w, options.poll_interval_s, instant, period)
        return table

    @property
    def energy_precision(self) -> dict[str, Precision]:
        """How each GPU's energy is measured and how sure it is (:class:`zeus_core.device.EnergyPrecision`)."""
        return dict(self._precisions)

    def read_process_activity(self, since: float) -> dict[str, DeviceActivity]:
        """Who ran on each GPU since ``since`` (Unix seconds) and their GFX engine time, for energy
        attribution (:class:`~zeus_core.attribution.ProcessActivityReadings`; :mod:`zeus_plugins_amdsmi.processes`)."""
        return self._processes.activity(since)

    def _polled_names(self) -> list[str]:
        return [n for n, s in self.energy_sources.items() if s == "polling"]

    # -- control --

    @property
    def driver_versions(self) -> dict[str, str]:
        """The amdgpu driver and the amdsmi library (:class:`zeus_core.device.DriverVersions`)."""
        smi = self._smi
        out = {}
        try:
            out["amdgpu driver"] = str(smi.amdsmi_get_gpu_driver_info(self.gpus[0].handle)["driver_version"])
        except (smi.AmdSmiException, KeyError):
            pass
        try:
            lib = smi.amdsmi_get_lib_version()
            out["amdsmi library"] = ".".join(str(lib[k]) for k in ("major", "minor", "release") if k in lib)
        except (smi.AmdSmiException, KeyError, TypeError):
            pass
        return out

    # -- lifetime --

    def release(self) -> None:
        """Stop the sampler and release amdsmi (after the caps are back: :meth:`close`)."""
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None
        release(self._smi)


def _moves(g: AmdGpu, seconds: float = 0.05) -> bool:
    """Whether the GPU's energy accumulator moves (False where it has none)."""
    try:
        first = g.counts()[0]
        time.sleep(seconds)
        return g.counts()[0] != first
    except DeviceError:
        return False


def _visibility_note() -> str:
    visibility = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
    set_vars = [f"{v}={os.environ[v]!r}" for v in visibility if v in os.environ]
    return f" ({', '.join(set_vars)})" if set_vars else ""


def make_amdsmi(options: AmdsmiOptions, context: Any) -> AmdGpus:
    """AMD GPUs through amdsmi: accumulator or polled energy, power caps, temperatures."""
    return AmdGpus(options)

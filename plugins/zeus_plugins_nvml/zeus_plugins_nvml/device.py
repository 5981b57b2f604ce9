"""The ``nvml`` device: the CUDA-visible NVIDIA GPUs, measured and steered through NVML.

Energy comes from each GPU's total-energy counter (Volta and newer, one NVML
call per window edge) or, on older GPUs, from power polled in a background
process (:mod:`zeus_plugins_nvml.poller`). Every setting changed (power limit,
locked SM and memory clocks) is journaled first and put back on close, at exit,
on SIGTERM, or at the next ``zeus`` start after a SIGKILL (:mod:`zeus_core.journal`).
A process without CAP_SYS_ADMIN changes them through ``zeus daemon`` instead,
when a daemon socket is configured (:class:`zeus_core.devicekit.SettingsPath`).
Power domains (instant, average, memory) are NVML's power field values, each
where the GPU reports it; temperatures are the die's.

Locking the SM clock also locks the memory clock to its highest supported
value (as the published Perseus controller does): the SM clocks NVML lists are
those valid at the highest memory clock, and a memory clock the driver lowers
on its own would change an instruction's time and energy under the plan.
GPUs that refuse memory-clock locks (``NotSupported``: before Ampere, and some
boards after) run with the SM clock locked alone.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any

from zeus_core import DeviceError
from zeus_core.attribution import DeviceActivity
from zeus_core.daemon import CAP_SYS_ADMIN
from zeus_core.device import Precision
from zeus_core.devicekit import (
    ConfirmedCounter,
    CounterProbe,
    DriverDevice,
    GpuClockRanges,
    GpuGroup,
    SettingsPath,
    check_clock,
    check_counters,
    model_update_period,
)
from zeus_core.errors import DeviceAbsent
from zeus_plugins_nvml.control import (
    DAEMON_OPS,
    FAKE_ENV,
    OWNER,
    apply,
    daemon_args,
    driver_errors,
    key_for,
    nvml_module,
    restore_setting,
)
from zeus_plugins_nvml.options import NvmlOptions
from zeus_plugins_nvml.poller import PollerError, PowerPoller
from zeus_plugins_nvml.processes import ProcessSampler
from zeus_plugins_nvml.sensors import counter_precision, polling_precision
from zeus_plugins_nvml.visible import VisibleDevicesError, VisibleGpu, visible_gpus

#: NVIDIA's energy counter updates about every 100 ms (Yang et al., SC'24)
NVML_COUNTER_PERIOD_S = 0.1


class NvmlGpu(DriverDevice):
    """One CUDA-visible GPU: identity, energy source and control, in watts and MHz."""

    def __init__(self, nvml: Any, vis: VisibleGpu, settings: SettingsPath, source: str) -> None:
        self._nvml = nvml
        self.driver_errors = driver_errors(nvml)
        self.name = f"gpu{vis.cuda_index}"
        self.cuda_index = vis.cuda_index
        self.uuid = vis.uuid
        self.handle = vis.handle
        self.mig_uuid = vis.mig_uuid
        self.model = nvml.nvmlDeviceGetName(vis.handle)
        self.source = source
        self._settings = settings
        self._clocks: tuple[int, list[int]] | None = None  # (highest memory clock, SM clocks at it)
        #: True / False once a memory-clock lock was tried; None before
        self.memory_clock_lockable: bool | None = None

    def _change(self, setting: str, original: Any, value: Any) -> None:
        """Set ``setting`` to ``value`` here (``original`` journaled first) or through the daemon; NVML errors propagate."""
        set_op, reset_op = DAEMON_OPS[setting]
        self._settings.change(
            key_for(self.uuid, setting),
            original,
            lambda: apply(self._nvml, self.handle, setting, value),
            (set_op, {"gpu": self.uuid, **daemon_args(setting, value)}),
            (reset_op, {"gpu": self.uuid}),
        )

    def _require_whole_gpu(self, action: str) -> None:
        if self.mig_uuid is not None:
            raise DeviceError(
                f"cannot {action} of {self.label}: CUDA sees only MIG slice {self.mig_uuid} of it, and the "
                "GPU's power limit and clocks are shared with the other slices; zeus does not change them"
            )

    # -- reads --

    def read_power(self) -> float:
        """Instant power draw (W)."""
        return self.call("read the power", self._nvml.nvmlDeviceGetPowerUsage, self.handle) / 1000.0

    def counter_j(self) -> float:
        """The energy counter (J, from NVML's mJ)."""
        return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)) / 1000.0

    def instant_power(self) -> float | None:
        """The instant power draw (W): NVML's POWER_INSTANT field where the driver has it, since the
        default reading is an average on Ampere and later (over 1 s on most boards), which lags a
        load that just changed; else the default reading; None where NVML reports neither."""
        try:
            instant = self.power_domains().get("instant")
        except DeviceError:  # a driver without field values
            instant = None
        if instant is not None:
            return instant
        try:
            return self.read_power()
        except DeviceError:
            return None

    def power_domains(self) -> dict[str, float]:
        """NVML's power domains (W), each where the GPU reports it (one field-values call):
        ``instant`` and ``average`` (``NVML_FI_DEV_POWER_INSTANT`` / ``..._AVERAGE`` at GPU scope)
        and ``memory`` (``..._AVERAGE`` at memory scope, which H100-class boards report)."""
        nvml = self._nvml
        asked = [
            ("instant", (nvml.NVML_FI_DEV_POWER_INSTANT, nvml.NVML_POWER_SCOPE_GPU)),
            ("average", (nvml.NVML_FI_DEV_POWER_AVERAGE, nvml.NVML_POWER_SCOPE_GPU)),
            ("memory", (nvml.NVML_FI_DEV_POWER_AVERAGE, nvml.NVML_POWER_SCOPE_MEMORY)),
        ]
        values = self.call("read the power domains", nvml.nvmlDeviceGetFieldValues, self.handle, [f for _, f in asked])
        return {domain: v.value.uiVal / 1000.0 for (domain, _), v in zip(asked, values) if v.nvmlReturn == nvml.NVML_SUCCESS}

    def temperature(self) -> float:
        """The GPU die's temperature (°C)."""
        return float(self.call("read the temperature", self._nvml.nvmlDeviceGetTemperature, self.handle, self._nvml.NVML_TEMPERATURE_GPU))

    def clocks(self) -> dict[str, float]:
        """The current SM and memory clocks (MHz, ``nvmlDeviceGetClockInfo``), each where the GPU reports it."""
        nvml = self._nvml
        out = {}
        for clock, kind in (("sm", nvml.NVML_CLOCK_SM), ("memory", nvml.NVML_CLOCK_MEM)):
            try:
                out[clock] = float(nvml.nvmlDeviceGetClockInfo(self.handle, kind))
            except nvml.NVMLError_NotSupported:
                pass
            except nvml.NVMLError as e:
                raise self.explain(f"read the {clock} clock", e) from None
        return out

    def power_limit_range(self) -> tuple[float, float]:
        lo, hi = self.call("read the power-limit range", self._nvml.nvmlDeviceGetPowerManagementLimitConstraints, self.handle)
        return lo / 1000.0, hi / 1000.0

    def power_limit(self) -> float:
        return self.call("read the power limit", self._nvml.nvmlDeviceGetPowerManagementLimit, self.handle) / 1000.0

    def _clock_table(self) -> tuple[int, list[int]]:
        """(highest memory clock, SM clocks at it, highest first); read once: the hardware's list does not change."""
        if self._clocks is None:
            mems = self.call("read the supported memory clocks", self._nvml.nvmlDeviceGetSupportedMemoryClocks, self.handle)
            mem = max(int(m) for m in mems)
            clocks = self.call("read the supported SM clocks", self._nvml.nvmlDeviceGetSupportedGraphicsClocks, self.handle, mem)
            self._clocks = (mem, sorted({int(c) for c in clocks}, reverse=True))
        return self._clocks

    def supported_clocks(self) -> list[int]:
        """SM clocks (MHz, highest first) the GPU supports at its highest memory clock."""
        return list(self._clock_table()[1])

    def max_memory_clock(self) -> int:
        """The highest supported memory clock (MHz): what :meth:`lock_clocks` locks the memory clock to."""
        return self._clock_table()[0]

    # -- control (journaled) --

    def set_power_limit(self, watts: float) -> None:
        self._require_whole_gpu("set the power limit")
        lo, hi = self.power_limit_range()
        if not lo <= watts <= hi:
            raise ValueError(f"power limit {watts:g} W is outside the range of {self.label}: {lo:g} to {hi:g} W")
        mw = int(round(watts * 1000))
        current = self.call("read the power limit", self._nvml.nvmlDeviceGetPowerManagementLimit, self.handle)
        if current == mw:
            return
        self.call("set the power limit", self._change, "power_limit", current, mw)

    def lock_clocks(self, mhz: int) -> None:
        self._require_whole_gpu("lock the SM clock")
        check_clock(mhz, self.supported_clocks(), f"SM clock of {self.label}")
        new_memory_lock = self._lock_memory_clock()
        try:
            self.call("lock the SM clock", self._change, "locked_clocks", None, [mhz, mhz])
        except BaseException:
            if new_memory_lock:  # a failed lock_clocks leaves the GPU as it was
                try:
                    self._reset("memory clock", "locked_memory_clocks")
                except Exception:  # noqa: BLE001 - the journal keeps the entry; report the first error
                    pass
            raise

    def _lock_memory_clock(self) -> bool:
        """Lock the memory clock to the highest supported one, unless this process already did or the
        GPU refuses (``NotSupported`` is remembered and ignored); True if this call locked it."""
        if self.memory_clock_lockable is False or self._settings.holds(key_for(self.uuid, "locked_memory_clocks")):
            return False
        mem = self.max_memory_clock()
        try:
            self._change("locked_memory_clocks", None, [mem, mem])
        except self._nvml.NVMLError_NotSupported:
            self.memory_clock_lockable = False
            return False
        except self._nvml.NVMLError as e:
            raise self.explain(f"lock the memory clock (to {mem} MHz, done before the SM clock)", e) from None
        self.memory_clock_lockable = True
        return True

    def _reset(self, what: str, setting: str, unsupported_ok: bool = False) -> bool:
        """Put ``setting`` back through the journal if this process changed it, else reset it directly.
        False if the GPU answered NotSupported and ``unsupported_ok`` (nothing to reset)."""
        try:
            self._settings.reset(
                key_for(self.uuid, setting),
                lambda: apply(self._nvml, self.handle, setting, None),
                (DAEMON_OPS[setting][1], {"gpu": self.uuid}),
            )
        except self._nvml.NVMLError_NotSupported as e:
            if unsupported_ok:
                return False
            raise self.explain(f"reset the {what}", e) from None
        except self._nvml.NVMLError as e:
            raise self.explain(f"reset the {what}", e) from None
        return True

    def reset_clocks(self) -> None:
        """Unlock the SM clock, then the memory clock (skipped on a GPU that cannot lock it)."""
        self._require_whole_gpu("reset the SM clock")
        self._reset("SM clock", "locked_clocks")
        if self.memory_clock_lockable is not False and not self._reset("memory clock", "locked_memory_clocks", unsupported_ok=True):
            self.memory_clock_lockable = False

    # -- clock ranges (upstream Zeus's clock API, zeus-compat): no memory lock implied --

    def supported_memory_clocks(self) -> list[int]:
        """Memory clocks (MHz) the GPU supports, in NVML's order."""
        return [int(m) for m in self.call("read the supported memory clocks", self._nvml.nvmlDeviceGetSupportedMemoryClocks, self.handle)]

    def supported_graphics_clocks(self, memory_mhz: int) -> list[int]:
        """SM clocks (MHz) the GPU supports at memory clock ``memory_mhz``, in NVML's order."""
        return [
            int(c)
            for c in self.call(
                f"read the SM clocks supported at {memory_mhz} MHz memory clock",
                self._nvml.nvmlDeviceGetSupportedGraphicsClocks,
                self.handle,
                int(memory_mhz),
            )
        ]

    def lock_clock_range(self, min_mhz: int, max_mhz: int) -> None:
        """Lock the SM clock to ``[min_mhz, max_mhz]`` (journaled; the memory clock is left alone)."""
        self._require_whole_gpu("lock the SM clock")
        self.call("lock the SM clock", self._change, "locked_clocks", None, [int(min_mhz), int(max_mhz)])

    def lock_memory_clock_range(self, min_mhz: int, max_mhz: int) -> None:
        """Lock the memory clock to ``[min_mhz, max_mhz]`` (journaled)."""
        self._require_whole_gpu("lock the memory clock")
        self.call("lock the memory clock", self._change, "locked_memory_clocks", None, [int(min_mhz), int(max_mhz)])
        self.memory_clock_lockable = True

    def reset_sm_clocks(self) -> None:
        """Unlock the SM clock only."""
        self._require_whole_gpu("reset the SM clock")
        self._reset("SM clock", "locked_clocks")

    def reset_memory_clocks(self) -> None:
        """Unlock the memory clock only (``NotSupported`` where the GPU cannot lock it)."""
        self._require_whole_gpu("reset the memory clock")
        self._reset("memory clock", "locked_memory_clocks")


class NvmlGpus(GpuClockRanges, GpuGroup):
    """The ``nvml`` device group (:class:`zeus_core.parts.DeviceGroup`): CUDA-visible GPUs.

    ``names`` are ``gpu<i>`` with ``i`` the CUDA-visible index. Group-level
    control applies one value to every GPU; ``gpus`` holds the per-GPU objects
    and ``set_power_limits`` sets one limit per GPU (for allocators over mixed
    GPUs).
    """

    clock = staticmethod(time.monotonic)

    def __init__(self, options: NvmlOptions | None = None, nvml: Any = None) -> None:
        self.options = options = options or NvmlOptions()
        self._nvml = nvml = nvml or nvml_module()
        self._poller: PowerPoller | None = None
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as e:
            if nvml.__name__.endswith("fake_pynvml") and os.environ.get(FAKE_ENV):
                raise DeviceError(
                    f"the simulated NVIDIA driver ${FAKE_ENV}={os.environ[FAKE_ENV]} cannot start ({e}): create its "
                    f"state first with `python -m zeus_plugins_nvml.fake_pynvml {os.environ[FAKE_ENV]} --privileged`, "
                    f"or unset {FAKE_ENV} to use the real driver"
                ) from None
            absent = e.value in (nvml.NVML_ERROR_LIBRARY_NOT_FOUND, nvml.NVML_ERROR_DRIVER_NOT_LOADED)
            raise (DeviceAbsent if absent else DeviceError)(
                f"NVML cannot start ({e}): this machine has no usable NVIDIA driver. Install the driver, or measure "
                'the CPU instead with [device] plugin = "rapl" or "cpu-estimate"'
            ) from None
        try:
            self._setup(options)
        except BaseException:
            self.release()
            raise

    def _setup(self, options: NvmlOptions) -> None:
        nvml = self._nvml
        try:
            visible = visible_gpus(nvml, os.environ.get("CUDA_VISIBLE_DEVICES"))
        except VisibleDevicesError as e:
            raise DeviceError(str(e)) from None
        if options.gpus is not None:
            bad = [i for i in options.gpus if i >= len(visible)]
            if bad:
                raise DeviceError(
                    f"gpus {bad} are not CUDA-visible: CUDA sees {len(visible)} GPU(s), indices 0..{len(visible) - 1}"
                    + (f" (CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r})" if "CUDA_VISIBLE_DEVICES" in os.environ else "")
                )
            visible = [visible[i] for i in options.gpus]
        self._check_mig(visible, options.mig)
        self.settings = SettingsPath(OWNER, restore_setting, options.daemon_socket, CAP_SYS_ADMIN, driver_errors(nvml))
        self.gpus = [NvmlGpu(nvml, v, self.settings, self._source(v, options.energy)) for v in visible]
        self._check_counters(options)
        self._warn_device_order()
        self.names = [g.name for g in self.gpus]
        self.energy_sources = {g.name: g.source for g in self.gpus}
        self.sync_indices = [g.cuda_index for g in self.gpus]
        self.max_power_w = self._max_power(options.max_power_w)
        self._precisions = self._precision_table(options)
        self._counter = [(g.name, g.handle) for g in self.gpus if g.source == "counter" and g.name not in self._confirming]
        self._get_energy = nvml.nvmlDeviceGetTotalEnergyConsumption
        self._processes = ProcessSampler(nvml, self.gpus, options.idle_power_w)
        polled = [g for g in self.gpus if g.source == "polling"]
        self._polled = [(g.name, slot) for slot, g in enumerate(polled)]
        if polled:
            try:
                self._poller = PowerPoller(nvml.__name__, [g.uuid for g in polled], options.poll_interval_s)
            except PollerError as e:
                raise DeviceError(str(e)) from None

    def _check_mig(self, visible: list[VisibleGpu], mode: str) -> None:
        slices = [v for v in visible if v.mig_uuid is not None]
        if not slices:
            return
        if mode == "error":
            v = slices[0]
            raise DeviceError(
                f"CUDA device {v.cuda_index} is MIG slice {v.mig_uuid} of GPU {v.uuid}. NVML measures the power and "
                'energy of whole GPUs only, so a slice cannot be measured on its own. Set mig = "parent" in '
                "[device] to measure the whole GPU (which includes the other slices' load), or use a GPU without MIG"
            )
        parents = [v.uuid for v in visible]
        dup = sorted({u for u in parents if parents.count(u) > 1})
        if dup:
            raise DeviceError(
                f'several visible MIG slices live on GPU {dup[0]}; with mig = "parent" each would count the whole '
                "GPU's energy. Make one slice per GPU visible (CUDA_VISIBLE_DEVICES)"
            )

    def _source(self, v: VisibleGpu, mode: str) -> str:
        if mode == "polling":
            return "polling"
        nvml = self._nvml
        try:
            nvml.nvmlDeviceGetTotalEnergyConsumption(v.handle)
            return "counter"
        except nvml.NVMLError_NotSupported:
            if mode == "counter":
                raise DeviceError(
                    f"gpu{v.cuda_index} ({nvml.nvmlDeviceGetName(v.handle)}, {v.uuid}) has no energy counter "
                    '(NVML: Not Supported; counters exist from Volta on). Use energy = "auto" or "polling"'
                ) from None
            return "polling"

    def _check_counters(self, options: NvmlOptions) -> None:
        """Watch every counter against the power reading before trusting it (at most
        ``counter_check_s``, all GPUs at once): one that does not move under load, runs backwards,
        jumps beyond the board's maximum power or counts at the wrong rate is refused with a
        warning, and that GPU's energy is polled power instead (an error with ``energy = "counter"``).
        One that only stood still under load is watched further (:class:`ConfirmedCounter`), since a
        counter that updates less often than the check lasts looks the same."""
        self._confirming: dict[str, ConfirmedCounter] = {}
        checked = [g for g in self.gpus if g.source == "counter"]
        if not checked:
            return
        probes = {
            g.name: CounterProbe(
                g.counter_j,
                g.instant_power,
                self._board_max_w(g),
                period_s=NVML_COUNTER_PERIOD_S,
                resolution_j=0.001,
            )
            for g in checked
        }
        flat: set[str] | None = None if options.energy == "counter" else set()
        periods: dict[str, float] = {}
        bad = check_counters(probes, options.counter_check_s, kind="GPU", confirm=flat, periods=periods)
        for g in checked:  # the update period as the check saw it, kept per model (the longest seen)
            model_update_period(g.model, periods.get(g.name))
        for g in checked:
            if flat and g.name in flat:
                self._confirming[g.name] = ConfirmedCounter(g.label, probes[g.name], options.counter_confirm_s, options.poll_interval_s)
            if g.name not in bad:
                continue
            if options.energy == "counter":
                raise DeviceError(
                    f"{g.label} cannot be measured by its energy counter: it {bad[g.name]}. "
                    'Use energy = "auto" (polled power where the counter fails) or "polling"'
                )
            warnings.warn(f"{g.label}: its energy counter {bad[g.name]}; refused, its energy is polled power instead", stacklevel=4)
            g.source = "polling"

    def _precision_table(self, options: NvmlOptions) -> dict[str, dict[str, Precision]]:
        """Per GPU, its precision when counted and when polled (:mod:`zeus_plugins_nvml.sensors`)."""
        table = {}
        for g in self.gpus:
            try:
                arch: int | None = int(self._nvml.nvmlDeviceGetArchitecture(g.handle))
            except (self._nvml.NVMLError, AttributeError):
                arch = None
            max_w = self._board_max_w(g) or self.max_power_w / len(self.gpus)
            table[g.name] = {
                "counter": counter_precision(g.model, max_w, model_update_period(g.model)),
                "polling": polling_precision(g.model, arch, max_w, options.poll_interval_s),
            }
        return table

    @property
    def energy_precision(self) -> dict[str, Precision]:
        """How each GPU's energy is measured and how sure it is (:class:`zeus_core.device.EnergyPrecision`):
        its counter's, or its polled power's while the counter is refused or not yet confirmed."""
        out = {}
        for name, both in self._precisions.items():
            confirming = self._confirming.get(name)
            source = "polling" if confirming is not None and confirming.state != "kept" else self.energy_sources[name]
            out[name] = both.get(source, both["polling"])
        return out

    def _board_max_w(self, g: NvmlGpu) -> float:
        """The most GPU ``g`` may draw (its highest power limit; 0 where NVML says neither)."""
        try:
            return g.power_limit_range()[1]
        except DeviceError:
            try:
                return self._nvml.nvmlDeviceGetEnforcedPowerLimit(g.handle) / 1000.0
            except self._nvml.NVMLError:
                return 0.0

    def _warn_device_order(self) -> None:
        models = {g.model for g in self.gpus}
        env = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        by_uuid = env and all(e.strip().startswith(("GPU-", "MIG-")) for e in env.split(","))
        if len(models) > 1 and os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID" and not by_uuid:
            warnings.warn(
                f"this machine mixes GPU models ({', '.join(sorted(models))}) and CUDA_DEVICE_ORDER is not "
                "PCI_BUS_ID: CUDA may number the GPUs differently from NVML. Set CUDA_DEVICE_ORDER=PCI_BUS_ID",
                stacklevel=3,
            )

    def _max_power(self, per_gpu: float | None) -> float:
        if per_gpu is not None:
            return per_gpu * len(self.gpus)
        total = 0.0
        for g in self.gpus:
            try:
                total += g.power_limit_range()[1]
            except DeviceError:
                try:
                    total += self._nvml.nvmlDeviceGetEnforcedPowerLimit(g.handle) / 1000.0
                except self._nvml.NVMLError:
                    raise DeviceError(f"cannot read the maximum power limit of {g.label}; set max_power_w in [device]") from None
        return total

    # -- measurement --

    def read_energy(self) -> dict[str, float]:
        """Cumulative joules per GPU: the counter (mJ -> J) or the integrated polled power."""
        get = self._get_energy
        out = {}
        for name, h in self._counter:  # a loop, not a comprehension: called at every window edge
            out[name] = get(h) / 1000.0
        for name, confirming in self._confirming.items():
            out[name] = confirming.joules()
            self.energy_sources[name] = confirming.source
        if self._poller is not None:
            now = time.monotonic()
            energy = self._poller.energy(now)  # never less than before, though a sample revises the held power
            for name, slot in self._polled:
                out[name] = energy[slot]
        return out

    def read_process_activity(self, since: float) -> dict[str, DeviceActivity]:
        """Who ran on each GPU since ``since`` (Unix seconds), for energy attribution
        (:class:`~zeus_core.attribution.ProcessActivityReadings`; :mod:`zeus_plugins_nvml.processes`)."""
        return self._processes.activity(since)

    # -- control --

    @property
    def driver_versions(self) -> dict[str, str]:
        """The NVIDIA driver and the CUDA driver API it offers (:class:`zeus_core.device.DriverVersions`)."""
        nvml = self._nvml
        out = {}
        try:
            out["NVIDIA driver"] = _text(nvml.nvmlSystemGetDriverVersion())
            cuda = int(nvml.nvmlSystemGetCudaDriverVersion())
            out["CUDA driver API"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
        except (nvml.NVMLError, AttributeError, TypeError, ValueError):
            pass
        return out

    # -- lifetime --

    def release(self) -> None:
        """Stop the poller and release NVML (after the settings are back: :meth:`close`)."""
        for confirming in getattr(self, "_confirming", {}).values():
            confirming.stop()
        if self._poller is not None:
            self._poller.stop()
            self._poller = None
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass


def _text(value: str | bytes) -> str:
    """A string NVML returns (bytes from older pynvml releases)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def make_nvml(options: NvmlOptions, context: Any) -> NvmlGpus:
    """NVIDIA GPUs through NVML: counter or polled energy, power limits and SM clocks."""
    return NvmlGpus(options)

"""Upstream's ``PowerMonitor``, ``PowerDomain``, ``PowerSample`` and ``infer_counter_update_period``.

The sampling is the core's (:class:`zeus_core.inloop.timeline.PowerMonitor`: one thread,
bounded timelines, the GPUs opened through the device plugins); what this module adds is
upstream's face of it: power domains are :class:`PowerDomain` members
(``PowerDomain.DEVICE_INSTANT in pm.measurement_domains``), timelines are keyed by
``device_instant`` / ``device_average`` / ``memory_average``, ``get_power`` and
``get_energy`` take ``power_domain=`` and raise upstream's ``ValueError`` for a domain not
monitored, and ``update_period=None`` infers the polling period from the GPUs' counters.

A device that reads one power only (the core's domain ``power``) stands for
``DEVICE_INSTANT``, as upstream's ``get_instant_power_usage`` reads it.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from zeus.device import get_gpus
from zeus.device.gpu.common import (
    ZeusBaseGPUError,
    ZeusGPUHeterogeneousError,
    ZeusGPUInitError,
    ZeusGPUNotSupportedError,
    translate,
)
from zeus.utils.multiprocessing import warn_if_global_in_subprocess
from zeus_core.devicekit import update_period
from zeus_core.engine import DeviceOpenError
from zeus_core.errors import DeviceError
from zeus_core.inloop import timeline as _core

logger = logging.getLogger(__name__)

#: how many readings ``infer_counter_update_period`` takes of each GPU model (the first 10 are dropped)
COUNTER_PROBE_SAMPLES = 1000
#: the slowest polling period inferred: a counter is polled at least ten times a second
SLOWEST_INFERRED_PERIOD_S = 0.1


class PowerDomain(enum.Enum):
    """The power readings a GPU can give: instant and average board power, average memory power."""

    DEVICE_INSTANT = "device_instant"
    DEVICE_AVERAGE = "device_average"
    MEMORY_AVERAGE = "memory_average"


DomainName = PowerDomain | Literal["device_instant", "device_average", "memory_average"]

#: the core's domain names each upstream domain is read from, first found first
CORE_DOMAINS: dict[PowerDomain, tuple[str, ...]] = {
    PowerDomain.DEVICE_INSTANT: ("instant", "power"),
    PowerDomain.DEVICE_AVERAGE: ("average",),
    PowerDomain.MEMORY_AVERAGE: ("memory",),
}


@dataclass
class PowerSample:
    """One power reading: ``timestamp`` (``time.time()`` s), ``gpu_index``, ``power_mw`` (milliwatts)."""

    timestamp: float
    gpu_index: int
    power_mw: float


def _infer_counter_update_period_single(gpu_index: int) -> float:
    """The shortest interval (s) between changes of GPU ``gpu_index``'s power reading (instant power,
    else average power), over :data:`COUNTER_PROBE_SAMPLES` readings taken as fast as they come;
    0.1 s where the reading never changed twice, 0.2 s where the GPU reads neither power."""
    gpus = get_gpus()
    read: Callable[[int], int] | None = None
    for method in (gpus.get_instant_power_usage, gpus.get_average_power_usage):
        try:
            method(gpu_index)
        except ZeusGPUNotSupportedError:
            continue
        read = method
        break
    if read is None:
        logger.warning(
            "Neither instant nor average power available for GPU %d. Using conservative default update period of 0.1s", gpu_index
        )
        return 0.2  # halved by the caller
    samples = [(time.time(), read(gpu_index)) for _ in range(COUNTER_PROBE_SAMPLES)][10:]
    changes = []
    last = samples[0][1]
    for t, mw in samples:
        if mw != last:
            changes.append(t)
            last = mw
    period = update_period(changes, shortest=True)  # the core's inference, upstream's choice of interval
    return 0.1 if period is None else period


def infer_counter_update_period(gpu_indicies: list[int]) -> float:
    """Half the fastest power-counter update period among the models of ``gpu_indicies`` (upstream's
    spelling), so each update is polled at least twice; never more than 0.1 s (warned)."""
    gpus = get_gpus()
    period = float("inf")
    models: set[str] = set()
    for index in gpu_indicies:
        model = gpus.get_name(index)
        if model in models:
            continue
        models.add(model)
        logger.info("Detected %s, inferring GPU power counter update period.", model)
        detected = _infer_counter_update_period_single(index)
        logger.info("Counter update period for %s is %.2f s", model, detected)
        period = min(period, detected)
    period /= 2.0
    if period > SLOWEST_INFERRED_PERIOD_S:
        logger.warning("Inferred update period (%.2f s) is too long. Using 0.1 s instead.", period)
        period = SLOWEST_INFERRED_PERIOD_S
    return period


def check_homogeneous(engine: dict[str, Any]) -> None:
    """Upstream's monitors refuse GPUs of more than one model (``ZeusGPUHeterogeneousError``); a device
    given to the engine (``device=``) is not upstream's GPUs and is not checked. Where no GPU opens,
    the engine says why when the monitor opens its devices."""
    if engine.get("device") is not None:
        return
    try:
        models = {gpu.get_name() for gpu in get_gpus().gpus}
    except ZeusBaseGPUError:
        return
    if len(models) > 1:
        raise ZeusGPUHeterogeneousError(f"Heterogeneous GPUs found: {sorted(models)}")


def _as_domain(value: Any) -> PowerDomain:
    """A :class:`PowerDomain` from a member or its value (anything else: ``ValueError``, as ``PowerDomain(x)``)."""
    return value if isinstance(value, PowerDomain) else PowerDomain(value)


class PowerMonitor(_core.PowerMonitor):
    """Power of the GPUs, sampled in the background, as timelines per :class:`PowerDomain`.

    ``gpu_indices``: None (every GPU) or a non-empty list. ``update_period``: seconds between
    samples (None: :func:`infer_counter_update_period`). ``max_samples_per_gpu``: points kept
    per GPU and domain (None: the core's bound, 100,000, a run of equal readings being two of
    them). ``power_domains``: :class:`PowerDomain` members or their values (None: every domain
    the GPUs read). A GPU library that cannot be used is a ``ZeusGPUInitError``; GPUs of more
    than one model, a ``ZeusGPUHeterogeneousError``, as upstream.
    """

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        update_period: float | None = None,
        max_samples_per_gpu: int | None = None,
        power_domains: list[DomainName] | None = None,
        **engine: Any,
    ) -> None:
        warn_if_global_in_subprocess(self)
        if gpu_indices is not None and not gpu_indices:
            raise ValueError("`gpu_indices` must be either `None` or non-empty")
        if power_domains is not None and not power_domains:
            raise ValueError("`power_domains` must be either `None` or non-empty")
        wanted = None if power_domains is None else list(dict.fromkeys(_as_domain(d) for d in power_domains))
        check_homogeneous(engine)
        if update_period is None:
            try:
                indices = gpu_indices if gpu_indices is not None else list(range(len(get_gpus())))
                update_period = infer_counter_update_period(indices)
            except ZeusBaseGPUError:
                update_period = SLOWEST_INFERRED_PERIOD_S  # the engine says below why the GPUs do not open
        elif update_period < 0.05:
            logger.warning(
                "An update period of %g might be too fast, which may lead to unexpected errors (e.g., "
                "NotSupported) and/or zero values being returned. If you see these, consider increasing "
                "to >= 0.05.",
                update_period,
            )
        try:
            # the core keeps every domain read; the upstream domains asked for are checked below
            super().__init__(gpu_indices, update_period, max_samples_per_gpu, None, **engine)
        except DeviceOpenError as e:  # no GPU opens: upstream's get_gpus() fails so
            raise ZeusGPUInitError(str(e)) from e
        except DeviceError as e:
            raise translate(e) from e
        supported = self._supported()
        if wanted is not None:
            for domain in wanted:
                if domain not in supported:
                    self.stop()
                    raise ValueError(
                        f"Requested power domain {domain.value} is not supported by the current GPUs. "
                        f"Supported domains are: {[d.value for d in supported]}"
                    )
        self._upstream_domains = supported if wanted is None else wanted
        logger.info("Monitoring power usage of GPUs %s", self.gpu_indices)
        if PowerDomain.DEVICE_INSTANT not in self._upstream_domains:
            logger.warning(
                "PowerDomain.DEVICE_INSTANT is not being monitored. Pass a monitored domain to the `power_domain` parameter of `get_power`."
            )

    # -- upstream's domains over the core's --

    def _core_domain(self, name: str, domain: PowerDomain) -> str | None:
        """The core's domain of device ``name`` that ``domain`` is read from (None: it reads none)."""
        return next((d for d in CORE_DOMAINS[domain] if d in self.quantities.get(name, ())), None)

    def _supported(self) -> list[PowerDomain]:
        """The upstream domains some monitored GPU reads, in :class:`PowerDomain` order."""
        gpus = self._gpus(None)
        return [d for d in PowerDomain if any(self._core_domain(n, d) is not None for _, n in gpus)]

    @property
    def measurement_domains(self) -> list[PowerDomain]:  # type: ignore[override]
        """The monitored domains, as :class:`PowerDomain` members."""
        return list(getattr(self, "_upstream_domains", None) or self._supported())

    def _monitored(self, power_domain: Any, extra: str = "") -> PowerDomain:
        domain = _as_domain(power_domain)
        if domain not in self.measurement_domains:
            raise ValueError(
                f"Power domain {domain.value} is not being monitored. "
                f"Monitored domains: {[d.value for d in self.measurement_domains]}.{extra}"
            )
        return domain

    # -- upstream's queries, keyed by GPU index --

    def get_power_timeline(
        self,
        power_domain: DomainName,
        gpu_index: int | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
    ) -> dict[int, list[tuple[float, float]]]:
        """``{gpu index: [(time, W), ...]}`` of ``power_domain`` between the two ``time.time()`` stamps
        (None: open); a GPU not monitored is left out, a domain not monitored is a ``ValueError``."""
        domain = self._monitored(power_domain)
        out = {}
        with self._lock:
            for index, name in self._gpus(None):
                if gpu_index is not None and index != gpu_index:
                    continue
                core = self._core_domain(name, domain)
                if core is not None:
                    out[index] = self._timelines[(name, core)].points(start_time, end_time)
        return out

    def get_all_power_timelines(
        self,
        gpu_index: int | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
    ) -> dict[str, dict[int, list[tuple[float, float]]]]:
        """``{"device_instant" | "device_average" | "memory_average": {gpu index: [(time, W), ...]}}``."""
        return {d.value: self.get_power_timeline(d, gpu_index, start_time, end_time) for d in self.measurement_domains}

    def get_energy(
        self,
        start_time: float,
        end_time: float,
        power_domain: DomainName | None = None,
    ) -> dict[int, float] | None:
        """``{gpu index: J}`` from ``start_time`` to ``end_time``: ``power_domain``'s power (None:
        ``DEVICE_INSTANT`` where monitored, else ``DEVICE_AVERAGE``) integrated by the trapezoid
        rule, the last reading held until ``end_time`` while the monitor runs. None before any reading."""
        if power_domain is None:
            if PowerDomain.DEVICE_INSTANT in self.measurement_domains:
                domain = PowerDomain.DEVICE_INSTANT
            elif PowerDomain.DEVICE_AVERAGE in self.measurement_domains:
                domain = PowerDomain.DEVICE_AVERAGE
            else:
                raise ValueError(
                    "Neither PowerDomain.DEVICE_INSTANT nor PowerDomain.DEVICE_AVERAGE is being monitored. Cannot compute energy usage."
                )
        else:
            domain = self._monitored(power_domain)
        held = self._held_until()
        out = {}
        with self._lock:
            for index, name in self._gpus(None):
                core = self._core_domain(name, domain)
                if core is None:
                    continue
                joules = self._timelines[(name, core)].integral(start_time, end_time, held)
                if joules is not None:
                    out[index] = joules
        return out or None

    def get_power(
        self,
        time: float | None = None,
        power_domain: DomainName = PowerDomain.DEVICE_INSTANT,
    ) -> dict[int, float] | None:
        """``{gpu index: W}`` of ``power_domain`` at the reading nearest to ``time`` (None: the latest);
        None where a GPU has no reading yet."""
        domain = self._monitored(power_domain, " Pass one of the monitored domains to the `power_domain` parameter.")
        out = {}
        with self._lock:
            for index, name in self._gpus(None):
                core = self._core_domain(name, domain)
                watts = None if core is None else self._timelines[(name, core)].nearest(time)
                if watts is None:
                    return None
                out[index] = watts
        return out


__all__ = ["PowerDomain", "PowerMonitor", "PowerSample", "infer_counter_update_period"]

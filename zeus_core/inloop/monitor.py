"""``ZeusMonitor``: upstream Zeus's measurement API over zeus's device plugins.

Code written for upstream's ``ZeusMonitor`` runs after changing the import::

    from zeus_core import ZeusMonitor

    monitor = ZeusMonitor(gpu_indices=[0])
    monitor.begin_window("training")
    ...
    m = monitor.end_window("training")
    print(m.time, m.total_energy, m.gpu_energy[0])

The constructor and the windows mean what they mean upstream (see
:class:`~zeus_core.windows.Monitor` for the windows). Devices come from the
installed device plugins, found by what they declared they measure
(``register(..., measures={"gpu": "gpus"})``, see ``zeus_register_devices``):
GPUs from the plugin that measures GPUs (``nvml``, ``amdsmi``), CPUs from the
one that measures CPUs (``rapl``, or ``cpu-estimate`` where no counter can be
read). Any other plugin is opened by name with ``device=`` and ``options=``.

The GPU plugin is chosen the same way on every run (:func:`open_gpus`): every
installed plugin that measures GPUs is tried; one whose library or hardware
is not on the machine (:class:`~zeus_core.errors.DeviceAbsent`) is passed over
in silence; if more than one opens (NVIDIA and AMD GPUs in one machine), that
is an error naming them, until ``device=`` or ``$ZEUS_GPU_DEVICE`` names one.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
from rich.console import Console

from zeus_core import catalog
from zeus_core.device import NoDevices, PowerLimitControl
from zeus_core.engine.assembly import DeviceOpenError, OptionsError, build_device
from zeus_core.engine.ranks import launched_local_rank
from zeus_core.errors import DeviceAbsent
from zeus_core.inloop import GPU_DEVICE_ENV
from zeus_core.measurement import Measurement
from zeus_core.windows import DeviceSet, Monitor

if TYPE_CHECKING:  # annotations only
    from zeus_core.engine.registry import Registry
    from zeus_core.registrations import Registration

#: (plugin name, identity as a ``[device]`` section declares it, device group)
Opened = tuple[str, dict[str, Any], Any]


@attrs.define
class GpuChoice:
    """What :func:`open_gpus` found: the group it opened (None: none), and every other plugin that
    measures GPUs with why it did not open: ``absent`` (no such library or hardware here) or
    ``failed`` (any other reason), each ``(plugin, why)``."""

    opened: Opened | None
    candidates: list[str]
    absent: list[tuple[str, str]] = attrs.Factory(list)
    failed: list[tuple[str, str]] = attrs.Factory(list)

    def why(self) -> str:
        """Why no GPU opened, plugin by plugin."""
        return "; ".join(f"{name}: {why}" for name, why in (*self.failed, *self.absent))


def open_gpus(registry: Registry, indices: list[int] | None, console: Console, *, fallback_all: bool = False) -> GpuChoice:
    """Open the GPUs ``indices`` (None: all) of the one installed plugin that measures GPUs and can
    open them here. Every candidate is tried (``$ZEUS_GPU_DEVICE`` narrows them to the one it names);
    more than one that opens is a :class:`DeviceOpenError` naming them, with the fix.

    ``fallback_all``: ``indices`` is this rank's own GPU, chosen for a ``gpu_indices=None`` under a
    launcher; where it cannot be opened, every GPU is tried (the launcher gave each rank one GPU), and
    the identity records None, as ``zeus run``'s ``[device]`` with no GPUs named does.
    """
    candidates = registry.measuring("gpu")
    named = os.environ.get(GPU_DEVICE_ENV)
    if named:
        if named not in [r.name for r in candidates]:
            known = ", ".join(r.name for r in candidates) or "none"
            raise DeviceOpenError(f"{GPU_DEVICE_ENV}={named!r} names no installed device plugin that measures GPUs; installed: {known}")
        candidates = [r for r in candidates if r.name == named]
    choice = GpuChoice(None, [r.name for r in candidates])
    opened: list[Opened] = []
    for r in candidates:
        option = r.measures.get("gpu")
        tables = [{option: list(indices)} if indices is not None and option is not None else {}] + ([{}] if fallback_all else [])
        outcome: tuple[list[tuple[str, str]], str] | None = None
        for table in tables:
            try:
                group, identity = build_device(registry, r.name, table, console)
            except DeviceAbsent as e:
                outcome = (choice.absent, str(e))
                break
            except Exception as e:  # noqa: BLE001 - reported below, with every other candidate's reason
                outcome = (choice.failed, str(e) or type(e).__name__)
                continue
            if fallback_all and option is not None:
                identity[option] = None
            opened.append((r.name, identity, group))
            outcome = None
            break
        if outcome is not None:
            outcome[0].append((r.name, outcome[1]))
    if len(opened) > 1:
        for _, _, group in opened:
            group.close()
        found = "; ".join(f"{name} ({', '.join(group.names)})" for name, _, group in opened)
        first = opened[0][0]
        raise DeviceOpenError(
            f"GPUs of {len(opened)} device plugins open on this machine: {found}. zeus measures the GPUs of one plugin and "
            f'does not guess which: name it, with ZeusMonitor(device="{first}") or {GPU_DEVICE_ENV}={first}'
        )
    choice.opened = opened[0] if opened else None
    return choice


def open_named(
    registry: Registry, name: str, options: dict[str, Any], console: Console, gpu: list[int] | None = None, cpu: list[int] | None = None
) -> Opened:
    """Device plugin ``name`` opened with ``options`` (its ``[device]`` table), the GPU and CPU indices
    given to the options its registration says select them; :class:`DeviceOpenError` naming what is wrong."""
    known = registry.names("device")
    if name not in known:
        raise DeviceOpenError(f"no device plugin named {name!r}; installed: {', '.join(known) or 'none'}")
    r = registry.get("device", name)
    for hardware, indices in (("gpu", gpu), ("cpu", cpu)):
        option = r.measures.get(hardware)
        if indices is not None and option is not None:
            options.setdefault(option, indices)
    try:
        group, identity = build_device(registry, name, options, console)
    except OptionsError as e:
        raise DeviceOpenError("bad device options: " + "; ".join(f"{name}: {line}" for line in e.lines())) from None
    except Exception as e:
        raise DeviceOpenError(f"device {name!r} cannot be opened: {e}") from e
    return name, identity, group


def _iter(value: Any) -> list[Any]:
    try:
        return list(value)
    except TypeError:
        return [None]


def check_indices(value: Any, what: str) -> list[int] | None:
    """``value`` as a list of distinct indices (None stays None); a ``ValueError`` naming ``what`` otherwise."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not all(isinstance(i, int) and not isinstance(i, bool) for i in _iter(value)):
        raise ValueError(f"{what} must be a list of indices (0, 1, ...) or None, got {value!r}")
    out = list(value)
    if any(i < 0 for i in out) or len(set(out)) != len(out):
        raise ValueError(f"{what} must list distinct indices (0, 1, ...), got {value!r}")
    return out


def _warn_no_device(gpu: list[int] | None, cpu: list[int] | None, why: list[str]) -> None:
    """A monitor over no device measures time only: say so (a warning, not an error: upstream's
    monitor runs on a machine without GPUs), with why each plugin tried did not open."""
    reasons = "; ".join(why) if why else "no installed device plugin measures GPUs or CPUs"
    warnings.warn(
        f"ZeusMonitor(gpu_indices={gpu}, cpu_indices={cpu}) opened no device: its windows measure time only, "
        f"and 0 J ({reasons}); install a device plugin (zeus plugins lists them) or name one with device=",
        stacklevel=3,
    )


class ZeusMonitor(Monitor):
    """Upstream Zeus's ``ZeusMonitor``: named time and energy windows over GPUs and CPUs.

    ``gpu_indices``: CUDA-visible GPU indices to measure; None measures every GPU
    (under a launcher that started several ranks on this machine, this rank's
    ``LOCAL_RANK``-th GPU, so that summing the ranks counts each GPU once); ``[]``
    none. No GPU library on the machine is no error for None (upstream's
    behaviour); for an explicit list it is, naming why.
    ``cpu_indices``: CPU packages; None measures them when a counter can be read
    and silently skips them otherwise, ``[]`` never; an explicit list falls back
    to the CPU estimate (with a warning saying why the counter could not be read).
    ``approx_instant_energy``, ``log_file``, ``sync_execution_with`` (``torch``,
    ``jax``, ``cupy``, ``none`` or a callable): as upstream.
    ``device``: a device plugin by name instead of the automatic GPU and CPU
    choice, with ``options`` its options table (as in a ``[device]`` table).
    ``registry``: the plugins (default: the installed ones). ``target_error``: the bound asked
    of a window, as a fraction of its energy (default 1 %; None: never warn), as
    :class:`~zeus_core.windows.Monitor`'s; each window's ``errors`` hold its +/- bound per device.
    ``attribute_min_s``: windows at least this long (default 0.1 s) carry each device's energy
    split among its processes, as :class:`~zeus_core.windows.Monitor`'s.

    :meth:`close` (or ``with``) closes the devices it opened, which puts back any
    setting changed through them (a power limit); so does process exit.
    """

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        cpu_indices: list[int] | None = None,
        approx_instant_energy: bool = False,
        log_file: str | os.PathLike[str] | None = None,
        sync_execution_with: str | Callable[[], Any] = "torch",
        *,
        device: str | None = None,
        options: dict[str, Any] | None = None,
        registry: Registry | None = None,
        target_error: float | None = 0.01,
        attribute_min_s: float = 0.1,
    ) -> None:
        from zeus_core.engine.registry import get_registry
        from zeus_core.journal import restore_pending

        gpu = check_indices(gpu_indices, "gpu_indices")
        cpu = check_indices(cpu_indices, "cpu_indices")
        if options is not None and not isinstance(options, dict):
            raise ValueError(f"options must be a dict (a [device] table without plugin), got {type(options).__name__}")
        if options and device is None:
            raise ValueError('options= configures the plugin named by device=; pass device="<plugin>" too')
        self.registry = reg = registry if registry is not None else get_registry()
        restore_pending(reg.restorers)  # settings a killed zeus process left changed go back first
        self._console = Console(stderr=True)
        #: (plugin name, identity as a [device] section declares it, group) of every opened group
        self.groups: list[tuple[str, dict[str, Any], Any]] = []
        #: why each device plugin that was tried did not open (for the warning when none did)
        self._not_opened: list[str] = []
        try:
            if device is not None:
                self.groups.append(open_named(reg, device, dict(options or {}), self._console, gpu, cpu))
            else:
                if gpu is None:
                    local = launched_local_rank()
                    self._open_gpus([local] if local is not None else None, explicit=False, fallback_all=local is not None)
                elif gpu:
                    self._open_gpus(gpu, explicit=True)
                if cpu is None or cpu:
                    self._open_cpus(cpu)
            groups = [g for _, _, g in self.groups]
            if not groups:
                _warn_no_device(gpu, cpu, self._not_opened)
            devices = groups[0] if len(groups) == 1 else DeviceSet(groups) if groups else NoDevices()
            super().__init__(
                devices,
                sync=sync_execution_with,
                log_file=log_file,
                approx_instant_energy=approx_instant_energy,
                target_error=target_error,
                attribute_min_s=attribute_min_s,
            )
        except BaseException:
            self._close_groups()
            raise
        #: the measured CUDA-visible GPU indices and CPU packages, as upstream's attributes
        self.gpu_indices = sorted(m.gpu_energy) if (m := self._zero()).gpu_energy else []
        self.cpu_indices = sorted(m.cpu_energy or {})

    # -- opening --

    def _table(self, r: Registration, hardware: str, indices: list[int] | None) -> dict[str, Any]:
        option = r.measures.get(hardware)
        return {option: list(indices)} if indices is not None and option is not None else {}

    def _open_gpus(self, indices: list[int] | None, explicit: bool, fallback_all: bool = False) -> None:
        """The GPUs of the one plugin that opens them here (:func:`open_gpus`). Where none does, an
        explicit ``gpu_indices`` is an error naming why; ``None`` measures no GPU, in silence where no
        GPU library or hardware is here (upstream's behaviour), with a warning where one failed."""
        choice = open_gpus(self.registry, indices, self._console, fallback_all=fallback_all)
        if choice.opened is not None:
            self.groups.append(choice.opened)
            return
        self._not_opened += [f"{name}: {why}" for name, why in (*choice.failed, *choice.absent)]
        if explicit:
            if not choice.candidates:
                raise DeviceOpenError(
                    f"gpu_indices={indices}: no installed device plugin measures GPUs; {catalog.hint('device', 'nvml')} "
                    f"(NVIDIA) or {catalog.hint('device', 'amdsmi')} (AMD)"
                )
            raise DeviceOpenError(f"gpu_indices={indices}: no GPU could be opened ({choice.why()})")
        if choice.failed:
            warnings.warn(f"no GPU is measured: {'; '.join(f'{n}: {why}' for n, why in choice.failed)}", stacklevel=4)

    def _open_cpus(self, indices: list[int] | None) -> None:
        estimate = None
        why: list[str] = []
        for r in self.registry.measuring("cpu"):
            try:
                group, identity = build_device(self.registry, r.name, self._table(r, "cpu", indices), self._console)
            except Exception as e:  # noqa: BLE001 - the next candidate may open
                why.append(f"{r.name}: {e}")
                continue
            if all(s == "estimate" for s in group.energy_sources.values()):
                if estimate is None:
                    estimate = (r.name, identity, group)
                else:
                    group.close()
                continue
            if estimate is not None:
                estimate[2].close()
            self.groups.append((r.name, identity, group))
            return
        self._not_opened += why
        if indices is None:  # measured when it can be, silently not otherwise (upstream)
            if estimate is not None:
                estimate[2].close()
            return
        if estimate is None:
            raise DeviceOpenError(
                f"cpu_indices={indices}: no CPU could be measured ({'; '.join(why) or 'no installed device plugin measures CPUs'}); "
                "pass cpu_indices=[] to measure GPUs only"
            )
        warnings.warn(
            f"cpu_indices={indices}: no CPU energy counter could be read ({'; '.join(why)}), so CPU energy is "
            f"estimated by {estimate[0]!r}; see 'Running without root' in the README for the counters",
            stacklevel=3,
        )
        self.groups.append(estimate)

    def _zero(self) -> Measurement:
        return Measurement(0.0, dict.fromkeys(self.devices.names, 0.0))

    def _measures(self, name: str, hardware: str) -> bool:
        return hardware in self.registry.get("device", name).measures

    # -- what optimizers steer --

    def controllable(self) -> tuple[Any, dict[str, Any]] | None:
        """The group a power policy steers, with its identity: the GPUs where they can set power
        limits, else the first group that can; None when none can."""
        ranked = sorted(self.groups, key=lambda g: 0 if self._measures(g[0], "gpu") else 1)
        for _, identity, group in ranked:
            if isinstance(group, PowerLimitControl):
                return group, identity
        return None

    def primary(self) -> tuple[Any, dict[str, Any]] | None:
        """The group whose maximum power the cost metric uses, with its identity: the GPUs where
        there are any (as upstream Zeus's cost), else the only group; None otherwise."""
        for name, identity, group in self.groups:
            if self._measures(name, "gpu"):
                return group, identity
        if len(self.groups) == 1:
            return self.groups[0][2], self.groups[0][1]
        return None

    # -- lifetime --

    def _close_groups(self) -> None:
        errors = []
        for _, _, group in reversed(self.groups):
            try:
                group.close()
            except Exception as e:  # noqa: BLE001 - close the others, then report
                errors.append(str(e))
        self.groups = []
        if errors:
            raise RuntimeError("closing devices failed: " + "; ".join(errors))

    def close(self) -> None:
        """Close the log and the devices (their settings, such as a power limit, are put back)."""
        super().close()
        self._close_groups()

    def __enter__(self) -> ZeusMonitor:
        return self


__all__ = ["NoDevices", "ZeusMonitor", "open_gpus"]

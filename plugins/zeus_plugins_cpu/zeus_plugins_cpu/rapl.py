"""The ``rapl`` device: CPU package and DRAM energy from ``/sys/class/powercap``.

RAPL counters (``energy_uj``) wrap around at ``max_energy_range_uj``, which at
a few hundred watts can be minutes. Each counter is a core
:class:`~zeus_core.devicekit.WrappingCounter`: every read that finds the value
lower than the last one adds one range. A background thread
(:class:`~zeus_core.devicekit.Sampler`) reads all counters often enough (a
quarter of the time the fastest counter needs to wrap at 1000 W,
:func:`~zeus_core.devicekit.watch_period`) that no wrap is missed between two
window edges however long the window. A thread, not a process: a sysfs read is
a few microseconds and never holds the GIL long.

Zones: top-level ``intel-rapl:N`` zones named ``package-K`` are packages
(``cpuK-package``); their subzone named ``dram`` is ``cpuK-dram``. Other zones
(``psys``, ``core``, ``uncore``) are not measured: ``core`` and ``uncore`` are
inside the package's figure, and ``psys`` covers the platform.

Since Linux 5.10 ``energy_uj`` is readable by root only. A process that may
not read it, with a daemon socket configured (``daemon_socket`` or
``$ZEUS_DAEMON_SOCKET``), reads it through ``zeus daemon``'s ``rapl`` service
(:mod:`zeus_plugins_cpu.service`); the wraparound accounting stays here.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from zeus_core import DeviceError
from zeus_core.daemon import DaemonClient, socket_path
from zeus_core.device import Precision
from zeus_core.devicekit import Sampler, WrappingCounter, watch_period
from zeus_core.errors import DeviceAbsent
from zeus_plugins_cpu.options import RaplOptions

DEFAULT_ROOTS = ("/sys/class/powercap", "/zeus_sys/class/powercap")
ASSUMED_MAX_W = 1000.0  # no CPU package draws more; bounds how fast a counter can wrap

PERMISSION_FIX = (
    "Since Linux 5.10 the RAPL energy files are readable by root only (CVE-2020-8694). "
    "Fix: let `zeus daemon` (started as root, with a [serve.rapl] table) read them for you: set ZEUS_DAEMON_SOCKET "
    "(or daemon_socket in [device]) to its socket (README: Running without root); or run zeus as root, or let your user read them "
    "(sudo chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj /sys/class/powercap/intel-rapl:*/intel-rapl:*/energy_uj, "
    "undone at reboot), or mount /sys/class/powercap into the container; "
    'or estimate instead with [device] plugin = "cpu-estimate"'
)


class RaplCounter(WrappingCounter):
    """One ``energy_uj`` file with wraparound accounting; thread-safe.

    ``daemon``: read through ``zeus daemon`` when this process may not read
    the file (``control_path`` says which); the zone is named to the daemon by
    its path under the powercap folder (``intel-rapl:0``), never by a path the
    root process would open blindly.
    """

    def __init__(self, name: str, zone: Path, root: Path | None = None, daemon: Callable[[], DaemonClient] | None = None) -> None:
        self.name = name
        self.zone = zone
        self.path = zone / "energy_uj"
        self.control_path = "local"
        self._daemon: DaemonClient | None = None
        self._fd = -1
        try:
            self.range_uj = int((zone / "max_energy_range_uj").read_text())
            self._fd = os.open(self.path, os.O_RDONLY)
        except PermissionError:
            if daemon is None:
                raise DeviceError(f"cannot read {self.path}: permission denied. {PERMISSION_FIX}") from None
            self._daemon = daemon()
            self._zone_id = zone.relative_to(root).as_posix() if root is not None else zone.name
            self.control_path = "daemon"
            self.range_uj = int(self._daemon_read()["max_energy_range_uj"])
        except (OSError, ValueError) as e:
            raise DeviceError(f"cannot use RAPL zone {zone}: {e}") from None
        if self.range_uj <= 0:
            raise DeviceError(f"{zone}/max_energy_range_uj is {self.range_uj}; this RAPL zone cannot be used")
        super().__init__(name, self._raw, self.range_uj, 1e-6, ASSUMED_MAX_W)

    def _daemon_read(self) -> dict:
        assert self._daemon is not None
        return self._daemon.call("rapl.read", zone=self._zone_id)

    def _raw(self) -> int:
        if self._daemon is not None:
            return int(self._daemon_read()["energy_uj"])
        try:
            text = os.pread(self._fd, 32, 0)
        except PermissionError:
            raise DeviceError(f"cannot read {self.path}: permission denied. {PERMISSION_FIX}") from None
        return int(text)

    def read_uj(self) -> int:
        """Energy in µJ since the counter's zero, wraps included."""
        return self.read()

    def close(self) -> None:
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass


def cpu_model(cpuinfo: str | os.PathLike[str] = "/proc/cpuinfo") -> str | None:
    """The CPU's model name (``/proc/cpuinfo``'s first ``model name``), where Linux says it."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return None


def find_root(explicit: str | None) -> Path:
    """The powercap folder: the option, else the first default that has an intel-rapl zone."""
    if explicit is not None:
        root = Path(explicit)
        if not root.is_dir():
            raise DeviceError(f"powercap_root {explicit!r} is not a folder")
        return root
    for cand in DEFAULT_ROOTS:
        root = Path(cand)
        if any(root.glob("intel-rapl:*")):
            return root
    raise DeviceAbsent(
        "no RAPL zones under /sys/class/powercap (or /zeus_sys/class/powercap): this CPU or kernel does not expose "
        "RAPL (a VM, a non-x86 CPU, or the intel_rapl_msr module not loaded: try `sudo modprobe intel_rapl_msr`). "
        'Estimate instead with [device] plugin = "cpu-estimate"'
    )


def discover(root: Path) -> dict[int, dict[str, Path]]:
    """Package index -> {"package": zone, "dram": zone?} under ``root``."""
    out: dict[int, dict[str, Path]] = {}
    for zone in sorted(root.glob("intel-rapl:*")):
        if not re.fullmatch(r"intel-rapl:\d+", zone.name):
            continue
        try:
            label = (zone / "name").read_text().strip()
        except OSError:
            continue
        m = re.fullmatch(r"package-(\d+)", label)
        if not m:
            continue  # psys and other platform zones
        entry = out.setdefault(int(m.group(1)), {"package": zone})
        for sub in sorted(zone.glob(f"{zone.name}:*")):
            try:
                if (sub / "name").read_text().strip() == "dram":
                    entry["dram"] = sub
            except OSError:
                continue
    return out


def _package_limit_w(zone: Path) -> float | None:
    for fname in ("constraint_0_max_power_uw", "constraint_0_power_limit_uw"):
        try:
            v = int((zone / fname).read_text())
        except (OSError, ValueError):
            continue
        if v > 0:
            return v / 1e6
    return None


#: RAPL's energy counters update about every millisecond (Intel SDM, vol. 3B, 15.10.3)
RAPL_UPDATE_PERIOD_S = 0.001


class RaplCpus:
    """The ``rapl`` device group: ``cpu<K>-package`` and ``cpu<K>-dram`` energy counters."""

    clock = staticmethod(time.monotonic)

    def __init__(self, options: RaplOptions | None = None) -> None:
        self.options = options = options or RaplOptions()
        root = find_root(options.powercap_root)
        zones = discover(root)
        if not zones:
            raise DeviceError(f"{root} has intel-rapl zones but none is a CPU package (named package-N)")
        wanted = sorted(zones) if options.packages is None else options.packages
        missing = [p for p in wanted if p not in zones]
        if missing:
            raise DeviceError(f"RAPL packages {missing} do not exist; this machine has packages {sorted(zones)}")
        self.counters: list[RaplCounter] = []
        self._client: DaemonClient | None = None
        sock = socket_path(options.daemon_socket)
        daemon = self._daemon_client if sock else None
        try:
            for p in wanted:
                self.counters.append(RaplCounter(f"cpu{p}-package", zones[p]["package"], root, daemon))
                if options.dram and "dram" in zones[p]:
                    self.counters.append(RaplCounter(f"cpu{p}-dram", zones[p]["dram"], root, daemon))
        except DeviceError:
            self._close_counters()
            raise
        self.control_paths = {c.name: c.control_path for c in self.counters}
        self.names = [c.name for c in self.counters]
        self.energy_sources = {n: "counter" for n in self.names}
        self.max_power_w = self._max_power(options.max_power_w, [zones[p]["package"] for p in wanted])
        # How sure a window is (issue 37; zeus_core.device.Precision): a counter that updates about every
        # millisecond (Intel SDM, MSR_PKG_ENERGY_STATUS) in microjoules; a package draws at most its limit, and
        # its DRAM no more than that
        per_package = self.max_power_w / len(wanted)
        self.energy_precision = {
            c.name: Precision(
                "counter",
                "dram" if c.name.endswith("-dram") else "cpu_package",
                per_package,
                period_s=RAPL_UPDATE_PERIOD_S,
                resolution_j=c.joules_per_count,
            )
            for c in self.counters
        }
        self.device_models = dict.fromkeys(self.names, model) if (model := cpu_model()) else {}
        self.wrap_check_s = options.wrap_check_s or watch_period(self.counters)
        self._sampler = Sampler(self.wrap_check_s, self.poll, "zeus-rapl-wrap-watch")

    @staticmethod
    def _max_power(option: float | None, packages: list[Path]) -> float:
        if option is not None:
            return option
        limits = [_package_limit_w(z) for z in packages]
        if any(v is None for v in limits):
            raise DeviceError("cannot read the RAPL power limit of every package; set max_power_w in [device]")
        return float(sum(limits))  # type: ignore[arg-type]

    def poll(self) -> None:
        """Read every counter once (what the wrap-watch thread does each period)."""
        for c in self.counters:
            try:
                c.read_uj()
            except (DeviceError, OSError, ValueError):
                pass  # the next window edge reports it

    def read_energy(self) -> dict[str, float]:
        return {c.name: c.read_uj() / 1e6 for c in self.counters}

    def _daemon_client(self) -> DaemonClient:
        """The one connection to ``zeus daemon`` the counters share, opened for the first that needs it."""
        if self._client is None:
            self._client = DaemonClient(str(socket_path(self.options.daemon_socket)))
        return self._client

    def _close_counters(self) -> None:
        for c in self.counters:
            c.close()
        if self._client is not None:
            self._client.close()

    def close(self) -> None:
        self._sampler.stop()
        self._close_counters()


def make_rapl(options: RaplOptions, context: Any) -> RaplCpus:
    """CPU packages and DRAM through RAPL (/sys/class/powercap), wraparound handled."""
    resolve = getattr(context, "resolve_path", None)
    if options.powercap_root is not None and resolve is not None:
        options = attrs.evolve(options, powercap_root=str(resolve(options.powercap_root)))
    return RaplCpus(options)

"""The ``rapl`` service of ``zeus daemon``: RAPL energy counters for processes that may not read them.

Since Linux 5.10 (CVE-2020-8694) ``energy_uj`` is readable by root only, because
a fine-grained energy counter leaks information about what other processes
compute. Serving it is therefore opt-in (a ``[serve.rapl]`` table) and limited
to the counters zeus measures: the package zones and their DRAM subzones found
under the daemon's own powercap folder at start. A client names a zone by its
path under that folder (``intel-rapl:0``, ``intel-rapl:0/intel-rapl:0:1``);
any other name is refused, so no client can make the root process open a file
of its choosing.
"""

from __future__ import annotations

from typing import Any

import attrs

from zeus_core import DeviceError
from zeus_core.daemon import Refused, ServiceConfigError, operation


@attrs.define
class RaplServeOptions:
    """``[serve.rapl]``. ``powercap_root``: the powercap folder (default ``/sys/class/powercap``,
    or ``/zeus_sys/class/powercap`` where a container mounts it there)."""

    powercap_root: str | None = None


@attrs.define
class Zone:
    """A RAPL zone, named by its path under the powercap folder."""

    zone: str


class RaplService:
    """Read the energy counters of the CPU package and DRAM zones."""

    def __init__(self, options: RaplServeOptions, ctx: Any) -> None:
        from zeus_plugins_cpu.rapl import discover, find_root  # the daemon's start, not every zeus command

        try:
            root = find_root(options.powercap_root)
        except DeviceError as e:
            raise ServiceConfigError(str(e), ("powercap_root",)) from None
        self.zones: dict[str, Any] = {}
        for entry in discover(root).values():
            for zone in entry.values():
                self.zones[zone.relative_to(root).as_posix()] = zone
        if not self.zones:
            raise ServiceConfigError(f"{root} has no RAPL package zone (named package-N) to serve", ("powercap_root",))
        ctx.log.info("rapl: serving %s under %s", ", ".join(sorted(self.zones)), root)

    @operation(Zone, changes=False)
    def read(self, args: Zone, client: Any) -> dict[str, int]:
        """A zone's energy counter and its wraparound range, in µJ."""
        zone = self.zones.get(args.zone)
        if zone is None:
            raise Refused(
                f"{args.zone!r} is not a RAPL package or DRAM zone served by this daemon (it serves {', '.join(sorted(self.zones))})"
            )
        return {
            "energy_uj": int((zone / "energy_uj").read_text()),
            "max_energy_range_uj": int((zone / "max_energy_range_uj").read_text()),
        }

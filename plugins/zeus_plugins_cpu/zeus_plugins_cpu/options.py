"""Options of the ``rapl`` and ``cpu-estimate`` devices (their ``[device]`` tables)."""

from __future__ import annotations

import attrs

from zeus_core import NOT_IDENTITY
from zeus_core.validators import absolute_path_or_none, distinct_numbers, nonnegative, one_of, positive_or_none


def _tdp(_inst, _attr, value):
    if not 0 < value <= 1000:
        raise ValueError(f"tdp_w must be between 0 and 1000 W per CPU package, got {value}")


@attrs.define
class RaplOptions:
    """``packages``: RAPL package indices to measure (all when left out).
    ``dram``: also measure each package's DRAM zone where there is one.
    ``powercap_root``: the powercap folder (default ``/sys/class/powercap``, or
    ``/zeus_sys/class/powercap`` where a container mounts it there).
    ``wrap_check_s``: how often a background thread reads the counters so that
    no wraparound goes unseen (default from the counter's range).
    ``max_power_w``: MAXPOWER of the cost metric (default: the packages' RAPL limits).
    ``daemon_socket``: the socket of ``zeus daemon``, through which counters this
    process may not read are read (default ``$ZEUS_DAEMON_SOCKET``).
    """

    packages: list[int] | None = attrs.field(
        default=None, validator=distinct_numbers(0, what="CPU package indices (0, 1, ...); leave packages out for all")
    )
    dram: bool = True
    powercap_root: str | None = None
    wrap_check_s: float | None = attrs.field(default=None, validator=positive_or_none)
    max_power_w: float | None = attrs.field(default=None, validator=positive_or_none)
    daemon_socket: str | None = attrs.field(default=None, validator=absolute_path_or_none, metadata=NOT_IDENTITY)


@attrs.define
class EstimateOptions:
    """``tdp_w``: thermal design power of one CPU package (from its spec sheet;
    85 W is a typical package when unknown). Power is ``idle_w + (tdp_w -
    idle_w) x utilisation`` per package; with ``idle_w = 0`` (default) this is
    CodeCarbon's TDP x load. ``scope``: ``system`` (utilisation of every
    process on the package's CPUs, like RAPL sees) or ``process`` (this
    process's CPU time only). ``max_power_w``: MAXPOWER of the cost metric
    (default ``tdp_w`` x packages).
    """

    tdp_w: float = attrs.field(default=85.0, validator=_tdp)
    idle_w: float = attrs.field(default=0.0, validator=nonnegative)
    scope: str = attrs.field(default="system", validator=one_of("system", "process"))
    max_power_w: float | None = attrs.field(default=None, validator=positive_or_none)

    def __attrs_post_init__(self) -> None:
        if self.idle_w >= self.tdp_w:
            raise ValueError(f"idle_w ({self.idle_w} W) must be below tdp_w ({self.tdp_w} W)")

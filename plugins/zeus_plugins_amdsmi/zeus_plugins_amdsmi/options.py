"""Options of the ``amdsmi`` device (its ``[device]`` table in ``job.toml``)."""

from __future__ import annotations

import attrs

from zeus_core import NOT_IDENTITY
from zeus_core.validators import absolute_path_or_none, between, distinct_numbers, one_of, positive_or_none


@attrs.define
class AmdsmiOptions:
    """``gpus``: HIP-visible indices to measure, as torch numbers them (all when left out).

    ``energy``: ``auto`` (the GPU's energy accumulator where the check at start,
    :func:`zeus_core.devicekit.check_counters`, finds it moving under load, never
    going back or jumping, and agreeing with the reported power; polled power
    otherwise), ``counter`` (fail where the accumulator fails the check) or
    ``polling`` (always poll). ``counter_check_s``: how long that check watches
    the accumulator. ``poll_interval_s``: the power poller's period.
    ``max_power_w``: MAXPOWER of the cost metric, per GPU; default each GPU's
    maximum power cap. ``daemon_socket``: the socket of ``zeus daemon``, through
    which a process that may not write the caps sets them (default
    ``$ZEUS_DAEMON_SOCKET``; reads always stay local). ``idle_power_w``: each GPU's
    power with no process on it, the idle part of energy attribution
    (:mod:`zeus_core.attribution`); default learned: the lowest power read while no
    process held the GPU.
    """

    gpus: list[int] | None = attrs.field(
        default=None, validator=distinct_numbers(0, what="HIP-visible GPU indices (0, 1, ...); leave gpus out for all GPUs")
    )
    energy: str = attrs.field(default="auto", validator=one_of("auto", "counter", "polling"), metadata=NOT_IDENTITY)
    counter_check_s: float = attrs.field(default=0.5, validator=between(0.02, 10.0), metadata=NOT_IDENTITY)
    poll_interval_s: float = attrs.field(default=0.1, validator=between(0.005, 5.0), metadata=NOT_IDENTITY)
    max_power_w: float | None = attrs.field(default=None, validator=positive_or_none)
    daemon_socket: str | None = attrs.field(default=None, validator=absolute_path_or_none, metadata=NOT_IDENTITY)
    idle_power_w: float | None = attrs.field(default=None, validator=positive_or_none, metadata=NOT_IDENTITY)

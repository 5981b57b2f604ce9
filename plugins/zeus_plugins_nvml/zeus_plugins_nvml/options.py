"""Options of the ``nvml`` device (its ``[device]`` table in ``job.toml``)."""

from __future__ import annotations

import attrs

from zeus_core import NOT_IDENTITY
from zeus_core.validators import absolute_path_or_none, between, distinct_numbers, one_of, positive_or_none


@attrs.define
class NvmlOptions:
    """``gpus``: CUDA-visible indices to measure (as torch numbers them; all when left out).

    ``energy``: ``auto`` (the GPU's energy counter where it has one, Volta and
    newer; polled power otherwise), ``counter`` (fail on GPUs without one) or
    ``polling`` (always poll, e.g. to compare with the counter). ``counter_check_s``:
    how long, at most, the check at open watches each counter against the power
    reading before it is trusted (:func:`zeus_core.devicekit.check_counters`; it
    ends sooner once decided). ``counter_confirm_s``: how long a counter that
    stood still under load during that check is watched further (its GPU's energy
    is polled power meanwhile) before it is refused; a counter that updates less
    often than the check lasts moves within it and is kept.
    ``poll_interval_s``: the power poller's period. ``mig``: ``error`` (a MIG
    slice cannot be measured on its own) or ``parent`` (measure the whole GPU
    the slice lives on). ``max_power_w``: MAXPOWER of the cost metric, per GPU;
    default each GPU's maximum power limit. ``daemon_socket``: the socket of
    ``zeus daemon``, through which a process without CAP_SYS_ADMIN changes power
    limits and clocks (default ``$ZEUS_DAEMON_SOCKET``; reads always stay local).
    ``idle_power_w``: each GPU's power with no process on it, the idle part of energy
    attribution (:mod:`zeus_core.attribution`); default learned: the lowest power
    read while no compute process held the GPU.
    """

    gpus: list[int] | None = attrs.field(
        default=None, validator=distinct_numbers(0, what="CUDA-visible GPU indices (0, 1, ...); leave gpus out for all GPUs")
    )
    energy: str = attrs.field(default="auto", validator=one_of("auto", "counter", "polling"), metadata=NOT_IDENTITY)
    counter_check_s: float = attrs.field(default=0.3, validator=between(0.02, 10.0), metadata=NOT_IDENTITY)
    counter_confirm_s: float = attrs.field(default=3.0, validator=between(0.1, 60.0), metadata=NOT_IDENTITY)
    poll_interval_s: float = attrs.field(default=0.1, validator=between(0.005, 5.0), metadata=NOT_IDENTITY)
    mig: str = attrs.field(default="error", validator=one_of("error", "parent"))
    max_power_w: float | None = attrs.field(default=None, validator=positive_or_none)
    daemon_socket: str | None = attrs.field(default=None, validator=absolute_path_or_none, metadata=NOT_IDENTITY)
    idle_power_w: float | None = attrs.field(default=None, validator=positive_or_none, metadata=NOT_IDENTITY)

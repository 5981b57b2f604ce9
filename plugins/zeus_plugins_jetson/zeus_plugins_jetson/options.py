"""Options of the ``jetson`` device (its ``[device]`` table in ``job.toml``)."""

from __future__ import annotations

import attrs

from zeus_core import NOT_IDENTITY
from zeus_core.validators import between, nonempty, positive_or_none


def _rails(_inst, attribute, value):
    if value is None:
        return
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f'{attribute.name} must be a non-empty list of rail names (e.g. ["VDD_IN", "VDD_GPU_SOC"]), got {value!r}')


@attrs.define
class JetsonOptions:
    """``sysfs_root``: the sysfs folder holding ``bus/i2c/drivers/ina3221*`` (default ``/sys``;
    a container may mount it elsewhere; a relative path is read from the job file's folder).
    ``rails``: the rails to measure, by label (``VDD_IN``) or name (``vdd_in``); all when left out.
    ``poll_interval_s``: how often every rail is read. ``max_power_w``: MAXPOWER of the cost
    metric (the module's power budget); the INA3221 knows none, so a job whose cost weighs time
    (``eta_knob < 1``) must set it.
    """

    sysfs_root: str = attrs.field(default="/sys", validator=nonempty)
    rails: list[str] | None = attrs.field(default=None, validator=_rails)
    poll_interval_s: float = attrs.field(default=0.05, validator=between(0.005, 5.0), metadata=NOT_IDENTITY)
    max_power_w: float | None = attrs.field(default=None, validator=positive_or_none)

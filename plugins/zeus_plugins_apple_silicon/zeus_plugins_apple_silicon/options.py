"""Options of the ``apple-silicon`` device (its ``[device]`` table in ``job.toml``)."""

from __future__ import annotations

import attrs

from zeus_core.validators import positive_or_none


@attrs.define
class AppleSiliconOptions:
    """``max_power_w``: MAXPOWER of the cost metric (the chip's power budget). Apple Silicon has
    no power limit to read, so a job whose cost weighs time (``eta_knob < 1``) must set it."""

    max_power_w: float | None = attrs.field(default=None, validator=positive_or_none)

"""Entry point of zeus-plugins-apple-silicon: the ``apple-silicon`` device."""

from __future__ import annotations

from zeus_core import hookimpl
from zeus_plugins_apple_silicon.options import AppleSiliconOptions


def make_apple_silicon(options: AppleSiliconOptions, context):
    """Apple Silicon energy (the device module loads when a job or tool opens one)."""
    from zeus_plugins_apple_silicon.device import make_apple_silicon as make

    return make(options, context)


@hookimpl
def zeus_register_devices(register):
    register("apple-silicon", make_apple_silicon, options=AppleSiliconOptions)

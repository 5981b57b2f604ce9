"""Entry point of zeus-plugins-jetson: the ``jetson`` device."""

from __future__ import annotations

from zeus_core import hookimpl
from zeus_plugins_jetson.options import JetsonOptions


def make_jetson(options: JetsonOptions, context):
    """NVIDIA Jetson power rails (the device module loads when a job or tool opens one)."""
    from zeus_plugins_jetson.device import make_jetson as make

    return make(options, context)


@hookimpl
def zeus_register_devices(register):
    register("jetson", make_jetson, options=JetsonOptions)

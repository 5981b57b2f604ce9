"""Entry point of zeus-plugins-jetson: the ``jetson`` device."""

from __future__ import annotations

from zeus_core import hookimpl
from zeus_core.hookspecs import RegisterPart
from zeus_core.loading import deferred_factory

#: NVIDIA Jetson power rails (the device module loads when a job or tool opens one)
make_jetson = deferred_factory("zeus_plugins_jetson.device:make_jetson", "NVIDIA Jetson power rails (INA3221 under sysfs)")


@hookimpl
def zeus_register_devices(register: RegisterPart) -> None:
    register("jetson", make_jetson, options="zeus_plugins_jetson.options:JetsonOptions")

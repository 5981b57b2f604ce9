"""Entry point of zeus-plugins-nvml: the ``nvml`` device and its settings restorer."""

from __future__ import annotations

from zeus_core import hookimpl

from zeus_plugins_nvml.control import OWNER, restore_setting
from zeus_plugins_nvml.device import make_nvml
from zeus_plugins_nvml.options import NvmlOptions


@hookimpl
def zeus_register_devices(register):
    register("nvml", make_nvml, options=NvmlOptions)


@hookimpl
def zeus_register_restorers(register):
    register(OWNER, restore_setting)

"""Entry point of zeus-plugins-amdsmi: the ``amdsmi`` device, its power-cap restorer, and its ``zeus daemon`` service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core import hookimpl
from zeus_core.hookspecs import RegisterPart, RegisterRestorer
from zeus_core.loading import deferred_factory
from zeus_plugins_amdsmi.control import OWNER, restore_setting

if TYPE_CHECKING:  # annotations: the options classes load with the job that uses them
    pass

#: AMD GPUs through amdsmi (the device module loads when a job or tool opens one)
make_amdsmi = deferred_factory("zeus_plugins_amdsmi.device:make_amdsmi", "AMD GPUs through amdsmi")


@hookimpl
def zeus_register_devices(register: RegisterPart) -> None:
    register("amdsmi", make_amdsmi, options="zeus_plugins_amdsmi.options:AmdsmiOptions", measures={"gpu": "gpus"})


@hookimpl
def zeus_register_restorers(register: RegisterRestorer) -> None:
    register(OWNER, restore_setting)


@hookimpl
def zeus_register_privileged_operations(register: RegisterPart) -> None:
    from zeus_plugins_amdsmi.service import AmdsmiServeOptions, AmdsmiService  # for zeus daemon (and zeus plugins) only

    register("amdsmi", AmdsmiService, options=AmdsmiServeOptions)

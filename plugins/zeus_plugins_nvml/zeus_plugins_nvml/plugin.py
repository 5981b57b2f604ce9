"""Entry point of zeus-plugins-nvml: the ``nvml`` device, its settings restorer, and its ``zeus daemon`` service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core import hookimpl
from zeus_core.hookspecs import RegisterPart, RegisterRestorer
from zeus_core.loading import deferred_factory
from zeus_plugins_nvml.control import OWNER, restore_setting

if TYPE_CHECKING:  # annotations: the options classes load with the job that uses them
    pass

#: NVIDIA GPUs through NVML (the device module loads when a job or tool opens one)
make_nvml = deferred_factory("zeus_plugins_nvml.device:make_nvml", "NVIDIA GPUs through NVML")


@hookimpl
def zeus_register_devices(register: RegisterPart) -> None:
    register("nvml", make_nvml, options="zeus_plugins_nvml.options:NvmlOptions", measures={"gpu": "gpus"})


@hookimpl
def zeus_register_restorers(register: RegisterRestorer) -> None:
    register(OWNER, restore_setting)


@hookimpl
def zeus_register_privileged_operations(register: RegisterPart) -> None:
    from zeus_plugins_nvml.service import NvmlServeOptions, NvmlService  # for zeus daemon (and zeus plugins) only

    register("nvml", NvmlService, options=NvmlServeOptions)

"""Entry point of zeus-plugins-apple-silicon: the ``apple-silicon`` device."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core import hookimpl
from zeus_core.hookspecs import RegisterPart
from zeus_core.loading import deferred_factory

if TYPE_CHECKING:  # annotations: the options classes load with the job that uses them
    pass

#: Apple Silicon energy (the device module loads when a job or tool opens one)
make_apple_silicon = deferred_factory(
    "zeus_plugins_apple_silicon.device:make_apple_silicon", "Apple Silicon CPU, GPU, ANE and DRAM energy through zeus_apple_silicon"
)


@hookimpl
def zeus_register_devices(register: RegisterPart) -> None:
    register("apple-silicon", make_apple_silicon, options="zeus_plugins_apple_silicon.options:AppleSiliconOptions")

"""Entry point of zeus-plugins-cpu: the ``rapl`` and ``cpu-estimate`` devices, and ``zeus daemon``'s ``rapl`` service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core import hookimpl
from zeus_core.hookspecs import RegisterPart
from zeus_core.loading import deferred_factory

if TYPE_CHECKING:  # annotations: the options classes load with the job that uses them
    pass

# The device modules load when a job or a tool opens the device.
make_rapl = deferred_factory(
    "zeus_plugins_cpu.rapl:make_rapl", "CPU packages and DRAM through RAPL (/sys/class/powercap), wraparound handled."
)
make_estimate = deferred_factory(
    "zeus_plugins_cpu.estimate:make_estimate", "CPU energy estimated as TDP x utilisation where RAPL cannot be read (marked ``estimate``)."
)


@hookimpl
def zeus_register_devices(register: RegisterPart) -> None:
    register("rapl", make_rapl, options="zeus_plugins_cpu.options:RaplOptions", measures={"cpu": "packages"})
    register("cpu-estimate", make_estimate, options="zeus_plugins_cpu.options:EstimateOptions", measures={"cpu": None})


@hookimpl
def zeus_register_privileged_operations(register: RegisterPart) -> None:
    from zeus_plugins_cpu.service import RaplServeOptions, RaplService  # for zeus daemon (and zeus plugins) only

    register("rapl", RaplService, options=RaplServeOptions)

"""Entry point of zeus-plugins-cpu: the ``rapl`` and ``cpu-estimate`` devices, and ``zeus daemon``'s ``rapl`` service."""

from __future__ import annotations

from zeus_core import hookimpl
from zeus_plugins_cpu.estimate import make_estimate
from zeus_plugins_cpu.options import EstimateOptions, RaplOptions
from zeus_plugins_cpu.rapl import make_rapl
from zeus_plugins_cpu.service import RaplServeOptions, RaplService


@hookimpl
def zeus_register_devices(register):
    register("rapl", make_rapl, options=RaplOptions, measures={"cpu": "packages"})
    register("cpu-estimate", make_estimate, options=EstimateOptions, measures={"cpu": None})


@hookimpl
def zeus_register_privileged_operations(register):
    register("rapl", RaplService, options=RaplServeOptions)

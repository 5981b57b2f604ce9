"""Entry point of zeus-plugins-hetero: the ``hetero`` and ``even`` allocators and the ``power-sweep`` profiler."""

from __future__ import annotations

from zeus_core import hookimpl

from zeus_plugins_hetero.allocator import AllocatorPart, EvenAllocatorPart
from zeus_plugins_hetero.options import HeteroOptions
from zeus_plugins_hetero.profiler import PowerSweep, PowerSweepOptions


@hookimpl
def zeus_register_allocators(register):
    register("hetero", AllocatorPart, options=HeteroOptions,
             help="Exact per-type local batch and power limit over heterogeneous GPUs (Zeus^2 step model).")
    register("even", EvenAllocatorPart, options=HeteroOptions,
             help="Even split of the global batch, best profiled power limits (the prototype's baseline).")


@hookimpl
def zeus_register_profilers(register):
    register("power-sweep", PowerSweep, options=PowerSweepOptions,
             help="Time and energy per (local batch, power limit) on the job's device, in the Zeus^2 profile format.")

"""Entry point of zeus-plugins-hetero: the ``hetero`` and ``even`` allocators and the ``power-sweep`` profiler."""

from __future__ import annotations

from zeus_core import hookimpl

from zeus_plugins_hetero.allocator import AllocatorPart, EvenAllocatorPart
from zeus_plugins_hetero.options import HeteroOptions


@hookimpl
def zeus_register_allocators(register):
    register("hetero", AllocatorPart, options=HeteroOptions,
             help="Exact per-type local batch and power limit over heterogeneous GPUs (Zeus^2 step model).")
    register("even", EvenAllocatorPart, options=HeteroOptions,
             help="Even split of the global batch, best profiled power limits (the prototype's baseline).")

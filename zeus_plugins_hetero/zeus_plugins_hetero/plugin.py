"""Entry point of zeus-plugins-hetero: the ``hetero`` and ``even`` allocators and the ``power-sweep`` profiler.

Nothing else loads here: the options classes load when a job first uses a part, the solver (numpy) when a job builds one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core import BuildContext, hookimpl
from zeus_core.hookspecs import RegisterPart

if TYPE_CHECKING:  # annotations: the options classes load with the job that uses them
    from zeus_plugins_hetero.options import HeteroOptions, PowerSweepOptions


def make_hetero(options: HeteroOptions, context: BuildContext):
    """The exact allocation (Zeus^2 step model)."""
    from zeus_plugins_hetero.allocator import AllocatorPart

    return AllocatorPart(options, context)


def make_even(options: HeteroOptions, context: BuildContext):
    """The even split with the best profiled limits (the prototype's baseline)."""
    from zeus_plugins_hetero.allocator import EvenAllocatorPart

    return EvenAllocatorPart(options, context)


def make_power_sweep(options: PowerSweepOptions, context: BuildContext):
    """Time and energy per (local batch, power limit) on the job's device."""
    from zeus_plugins_hetero.profiler import PowerSweep

    return PowerSweep(options, context)


@hookimpl
def zeus_register_allocators(register: RegisterPart) -> None:
    register(
        "hetero",
        make_hetero,
        options="zeus_plugins_hetero.options:HeteroOptions",
        help="Exact per-type local batch and power limit over heterogeneous GPUs (Zeus^2 step model).",
    )
    register(
        "even",
        make_even,
        options="zeus_plugins_hetero.options:HeteroOptions",
        help="Even split of the global batch, best profiled power limits (the prototype's baseline).",
    )


@hookimpl
def zeus_register_profilers(register: RegisterPart) -> None:
    register(
        "power-sweep",
        make_power_sweep,
        options="zeus_plugins_hetero.options:PowerSweepOptions",
        help="Time and energy per (local batch, power limit) on the job's device, in the Zeus^2 profile format.",
    )

"""Registers the ``torch`` workload and process group through the ``zeus`` entry point, like any third party."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from zeus_core import hookimpl
from zeus_core.hookspecs import RegisterPart, RegisterProcessGroup

if TYPE_CHECKING:  # annotations only
    from zeus_core import BuildContext
    from zeus_plugins_torch.options import TorchWorkloadOptions
    from zeus_plugins_torch.workload import TorchWorkload


def make_torch_workload(options: TorchWorkloadOptions, context: BuildContext) -> TorchWorkload:
    """Build the ``torch`` workload; torch is imported only here, so every other
    ``zeus`` command starts without paying for it (this module and the options
    import neither torch nor numpy)."""
    from zeus_plugins_torch.workload import TorchWorkload

    return TorchWorkload(options, context)


@hookimpl
def zeus_register_workloads(register: RegisterPart) -> None:
    register(
        "torch",
        make_torch_workload,
        options="zeus_plugins_torch.options:TorchWorkloadOptions",
        help='Real PyTorch training: entry = "module:function" called as function(batch_size, zeus) each try.',
    )


def join_torch_group() -> Any:
    """The ``torch.distributed`` ranks this process is one of, or None. Cheap when there are
    none: torch is imported only when a launcher's ``WORLD_SIZE`` says there are several ranks
    or the program itself already initialised ``torch.distributed``."""
    dist = sys.modules.get("torch.distributed")
    initialised = dist is not None and dist.is_available() and dist.is_initialized()
    try:
        several = int(os.environ.get("WORLD_SIZE", "1")) > 1
    except ValueError:
        several = False
    if not initialised and not several:
        return None
    from zeus_plugins_torch.group import join

    return join()


@hookimpl
def zeus_register_process_groups(register: RegisterProcessGroup) -> None:
    register("torch", join_torch_group, help="torch.distributed ranks (torchrun, srun, torch.multiprocessing): rank 0 decides.")

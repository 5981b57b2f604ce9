"""Registers the ``torch`` workload through the ``zeus`` entry point, like any third party."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core import hookimpl

from zeus_plugins_torch.options import TorchWorkloadOptions

if TYPE_CHECKING:  # annotations only
    from zeus_core import BuildContext

    from zeus_plugins_torch.workload import TorchWorkload


def make_torch_workload(options: TorchWorkloadOptions, context: BuildContext) -> TorchWorkload:
    """Build the ``torch`` workload; torch is imported only here, so every other
    ``zeus`` command starts without paying for it (this module and the options
    import neither torch nor numpy)."""
    from zeus_plugins_torch.workload import TorchWorkload

    return TorchWorkload(options, context)


@hookimpl
def zeus_register_workloads(register):
    register(
        "torch",
        make_torch_workload,
        options=TorchWorkloadOptions,
        help="Real PyTorch training: entry = \"module:function\" called as function(batch_size, zeus) each try.",
    )

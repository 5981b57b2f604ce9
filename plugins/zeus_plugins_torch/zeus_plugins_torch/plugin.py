"""Registers the ``torch`` workload through the ``zeus`` entry point, like any third party."""

from __future__ import annotations

from zeus_core import hookimpl

from zeus_plugins_torch.options import TorchWorkloadOptions
from zeus_plugins_torch.workload import TorchWorkload


@hookimpl
def zeus_register_workloads(register):
    register(
        "torch",
        TorchWorkload,
        options=TorchWorkloadOptions,
        help="Real PyTorch training: entry = \"module:function\" called as function(batch_size, zeus) each try.",
    )

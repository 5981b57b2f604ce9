"""A stand-in for CUDA device placement, for running upstream's examples unchanged on a CPU-only machine.

``benchmarks/upstream_examples.py`` puts this folder on the examples' ``PYTHONPATH``, so
Python loads it at start-up. It does for CUDA what the simulated NVML driver does for the
GPU's driver: the examples' CUDA calls succeed and the work runs on the CPU. Nothing is
changed until the example imports torch (or torchvision):

* ``torch.cuda.set_device`` and ``torch.cuda.synchronize`` do nothing;
  ``Module.cuda()`` and ``Tensor.cuda()`` return the module or tensor on the CPU
  (``torch.cuda.is_available()`` stays False, so code that asks places on the CPU itself);
* a CUDA device given to ``Tensor.to``, ``Module.to`` or ``torch.tensor`` (``"cuda"``,
  ``"cuda:1"``, a device index) is the CPU; ``torch.cuda.Event`` times with the host clock;
* ``torch.distributed.init_process_group(backend="nccl")`` uses ``gloo`` (NCCL needs GPUs);
* ``DistributedDataParallel(model, device_ids=[i], output_device=i)`` of a CPU model drops
  the device ids (DDP refuses them for CPU modules), and ``FullyShardedDataParallel`` of a CPU
  model without a ``device_id`` is given the CPU (FSDP otherwise looks for an accelerator);
* before torchvision loads, the two operators whose fake kernels torchvision registers
  unconditionally (``torchvision::nms``, ``torchvision::qnms``) are declared: the only
  torchvision wheel for this torch is a CUDA build whose C++ operators cannot load next to
  the CPU build of torch; the examples use torchvision's datasets, transforms and models,
  none of its C++ operators.

Set ``ZEUS_CUDA_STANDIN=0`` to turn it off.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys


def _patch_torch(torch) -> None:
    torch.cuda.set_device = lambda device: None
    torch.cuda.synchronize = lambda device=None: None
    torch.nn.Module.cuda = lambda self, device=None: self
    torch.Tensor.cuda = lambda self, device=None, non_blocking=False, **kwargs: self

    import time

    def cpu(device):
        if isinstance(device, int) and not isinstance(device, bool):
            return "cpu"
        if isinstance(device, str) and device.startswith("cuda") or isinstance(device, torch.device) and device.type == "cuda":
            return "cpu"
        return device

    def placing(method):
        def to(self, *args, **kwargs):
            if args and isinstance(args[0], (int, str, torch.device)):
                args = (cpu(args[0]), *args[1:])
            if "device" in kwargs:
                kwargs["device"] = cpu(kwargs["device"])
            return method(self, *args, **kwargs)

        return to

    torch.Tensor.to = placing(torch.Tensor.to)
    torch.nn.Module.to = placing(torch.nn.Module.to)
    tensor = torch.tensor

    def make_tensor(data, *args, **kwargs):
        if "device" in kwargs:
            kwargs["device"] = cpu(kwargs["device"])
        return tensor(data, *args, **kwargs)

    torch.tensor = make_tensor

    class Event:
        def __init__(self, enable_timing=False, blocking=False, interprocess=False):
            self.at = None

        def record(self, stream=None):
            self.at = time.perf_counter()

        def synchronize(self):
            pass

        def query(self):
            return True

        def elapsed_time(self, end):
            return (end.at - self.at) * 1000.0

    torch.cuda.Event = Event

    import torch.distributed as dist
    import torch.nn.parallel as parallel

    init = dist.init_process_group

    def init_process_group(backend=None, *args, **kwargs):
        if str(backend).lower() == "nccl":
            backend = "gloo"
        return init(backend, *args, **kwargs)

    dist.init_process_group = init_process_group

    ddp_init = parallel.DistributedDataParallel.__init__

    def ddp(self, module, device_ids=None, output_device=None, *args, **kwargs):
        if all(p.device.type == "cpu" for p in module.parameters()):
            device_ids = output_device = None
        ddp_init(self, module, device_ids, output_device, *args, **kwargs)

    parallel.DistributedDataParallel.__init__ = ddp

    from torch.distributed.fsdp import FullyShardedDataParallel as fsdp_class

    fsdp_init = fsdp_class.__init__

    def fsdp(self, module, *args, **kwargs):
        if kwargs.get("device_id") is None and all(p.device.type == "cpu" for p in module.parameters()):
            kwargs["device_id"] = torch.device("cpu")
        fsdp_init(self, module, *args, **kwargs)

    fsdp_class.__init__ = fsdp


def _declare_torchvision_ops() -> None:
    import torch

    lib = torch.library.Library("torchvision", "FRAGMENT")
    for op in ("nms", "qnms"):
        try:
            lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        except RuntimeError:  # declared already (a torchvision build whose operators load)
            pass
    _KEEP.append(lib)


_KEEP: list = []


class _Hooks(importlib.abc.MetaPathFinder):
    """Runs a hook before or after a top-level module executes, once."""

    def __init__(self) -> None:
        self.before = {"torchvision": _declare_torchvision_ops}
        self.after = {"torch": _patch_torch}

    def find_spec(self, name, path, target=None):
        if name not in self.before and name not in self.after:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)  # (also asked by importlib.util.find_spec)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            before, after = self.before.pop(name, None), self.after.pop(name, None)
            if before is not None:
                before()
            execute(module)
            if after is not None:
                after(module)

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("ZEUS_CUDA_STANDIN", "1") != "0":
    sys.meta_path.insert(0, _Hooks())

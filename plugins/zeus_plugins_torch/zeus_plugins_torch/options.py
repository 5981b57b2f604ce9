"""``[workload] plugin = "torch"``: the options table of the PyTorch workload."""

from __future__ import annotations

import re
from typing import Any

import attrs
from zeus_core.validators import one_of, positive, positive_or_none

from zeus_plugins_torch.lr import RULES

_ENTRY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
ACCELERATORS = ("auto", "cpu", "cuda")


def _entry(_inst, attribute, value):
    if not _ENTRY.match(value):
        raise ValueError(
            f"{attribute.name} must be \"package.module:function\" (a function taking (batch_size, zeus)), got {value!r}"
        )


def _batch_sizes(_inst, attribute, value):
    if any(b <= 0 for b in value):
        raise ValueError(f"{attribute.name} must list positive batch sizes, got {value!r}")
    if len(set(value)) != len(value):
        raise ValueError(f"{attribute.name} lists a batch size twice: {value!r}")


def _non_negative(_inst, attribute, value):
    if value < 0:
        raise ValueError(f"{attribute.name} must be 0 (automatic) or more, got {value!r}")


def _path_or_none(_inst, attribute, value):
    if value is not None and not value.strip():
        raise ValueError(f"{attribute.name} must be the path of an allocation.json, or left out; got an empty string")


@attrs.define
class TorchWorkloadOptions:
    """What to train and how.

    ``entry``: ``"package.module:function"``; the function is called once per
    try as ``function(batch_size, zeus)`` with this rank's share of the chosen
    batch size and a :class:`~zeus_plugins_torch.loop.ZeusLoop`. The job's
    folder and ``python_path`` (relative to it) are searched first.
    ``args``: a table handed to the function as ``zeus.args``.
    ``batch_sizes`` / ``default_batch_size``: what batch-size policies choose
    among and start from (the global batch, over all ranks).
    ``lr_scaling``: how ``zeus.scale_lr`` / ``zeus.scale_optimizer`` adapt a
    learning rate tuned at ``default_batch_size``: ``auto`` (by optimiser:
    square root for Adam-type, linear for SGD), ``sqrt``, ``linear``, ``none``.
    ``accelerator``: ``auto`` (CUDA when available), ``cpu`` or ``cuda``.
    ``threads``: torch CPU threads per process (0: the cores split evenly over
    ``job.processes`` when there are several, torch's default otherwise).
    ``seed_each_try``: seed torch on every rank with one seed per try.
    ``timeout_s``: how long a rank waits for the others (start-up, collectives).
    ``allocation``: an ``allocation.json`` (relative to the job's folder), as
    the ``hetero`` allocator writes it: rank r trains with its allocated local
    batch at its allocated power limit, gradients weighted by batch share
    (see :mod:`zeus_plugins_torch.allocated`). It fixes the global batch and
    the power limits, so ``batch_sizes`` and a ``[power]`` table must be left
    out, and its rank count must equal ``job.processes``.
    """

    entry: str = attrs.field(validator=_entry)
    args: dict[str, Any] = attrs.field(factory=dict)
    batch_sizes: list[int] = attrs.field(factory=list, validator=_batch_sizes)
    default_batch_size: int | None = attrs.field(default=None, validator=positive_or_none)
    lr_scaling: str = attrs.field(default="auto", validator=one_of(*RULES))
    python_path: list[str] = attrs.field(factory=lambda: ["."])
    accelerator: str = attrs.field(default="auto", validator=one_of(*ACCELERATORS))
    threads: int = attrs.field(default=0, validator=_non_negative)
    seed_each_try: bool = True
    timeout_s: float = attrs.field(default=300.0, validator=positive)
    allocation: str | None = attrs.field(default=None, validator=_path_or_none)

    def __attrs_post_init__(self) -> None:
        if self.batch_sizes and self.default_batch_size is not None and self.default_batch_size not in self.batch_sizes:
            raise ValueError(
                f"default_batch_size {self.default_batch_size} is not one of batch_sizes {self.batch_sizes}; add it to the list"
            )

"""``[workload] plugin = "torch"``: the options table of the PyTorch workload."""

from __future__ import annotations

from typing import Any

import attrs
from attrs.validators import optional

from zeus_core import NOT_IDENTITY
from zeus_core.validators import callable_spec, distinct_numbers, finite, nonempty, nonnegative, one_of, positive
from zeus_plugins_torch.lr import RULES

ACCELERATORS = ("auto", "cpu", "cuda")


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
    ``python_path``, ``seed_each_try`` and ``timeout_s`` change how the job
    runs, not what it optimises, so a store that learned the job keeps
    serving it when they change (``zeus_core.NOT_IDENTITY``).
    ``marks_reached``: the function itself says when the target is reached
    (``zeus.mark_reached()``); otherwise ``job.target_metric`` is required, since
    no try could ever succeed (the job is refused before it trains).
    ``allocation``: an ``allocation.json`` (relative to the job's folder), as
    the ``hetero`` allocator writes it: rank r trains with its allocated local
    batch at its allocated power limit, gradients weighted by batch share
    (see :mod:`zeus_plugins_torch.allocated`). It fixes the global batch and
    the power limits, so ``batch_sizes`` and a ``[power]`` table must be left
    out, and its rank count must equal ``job.processes``.
    """

    entry: str = attrs.field(validator=callable_spec(files=False))
    args: dict[str, Any] = attrs.field(factory=dict)
    batch_sizes: list[int] = attrs.field(factory=list, validator=distinct_numbers(1, what="batch sizes", allow_empty=True))
    default_batch_size: int | None = attrs.field(default=None, validator=optional(positive))
    lr_scaling: str = attrs.field(default="auto", validator=one_of(*RULES))
    python_path: list[str] = attrs.field(factory=lambda: ["."], metadata=NOT_IDENTITY)
    accelerator: str = attrs.field(default="auto", validator=one_of(*ACCELERATORS))
    threads: int = attrs.field(default=0, validator=nonnegative)
    seed_each_try: bool = attrs.field(default=True, metadata=NOT_IDENTITY)
    timeout_s: float = attrs.field(default=300.0, validator=[positive, finite], metadata=NOT_IDENTITY)
    allocation: str | None = attrs.field(default=None, validator=optional(nonempty))
    marks_reached: bool = False

    def __attrs_post_init__(self) -> None:
        if self.batch_sizes and self.default_batch_size is not None and self.default_batch_size not in self.batch_sizes:
            raise ValueError(
                f"default_batch_size {self.default_batch_size} is not one of batch_sizes {self.batch_sizes}; add it to the list"
            )

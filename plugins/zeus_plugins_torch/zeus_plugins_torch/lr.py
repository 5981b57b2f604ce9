"""Learning-rate scaling with the batch size.

A batch-size policy compares batch sizes by what a run costs to reach the
target; a run at a new batch size with the old learning rate is not a fair
trial (too small a step for large batches, too large for small ones). The
usual rules: linear scaling for SGD-type optimisers, square-root scaling for
adaptive ones (Adam and its relatives), both relative to the batch size the
learning rate was tuned for.
"""

from __future__ import annotations

import math
from typing import Any

RULES = ("auto", "sqrt", "linear", "none")

#: Optimisers whose learning rate scales with the square root of the batch size.
SQRT_OPTIMIZERS = frozenset({"adam", "adamw", "adamax", "nadam", "radam", "adadelta", "adagrad", "rmsprop", "sparseadam"})
#: Optimisers whose learning rate scales linearly with the batch size.
LINEAR_OPTIMIZERS = frozenset({"sgd", "asgd"})


def rule_for(optimizer: Any) -> str:
    """The scaling rule of an optimiser (an instance, a class, or a name such as ``"adamw"``)."""
    if isinstance(optimizer, str):
        name = optimizer
    elif isinstance(optimizer, type):
        name = optimizer.__name__
    else:
        name = type(optimizer).__name__
    key = name.lower()
    if key in SQRT_OPTIMIZERS:
        return "sqrt"
    if key in LINEAR_OPTIMIZERS:
        return "linear"
    raise ValueError(
        f"no learning-rate scaling rule is known for optimizer {name!r}; "
        'set workload.lr_scaling to "sqrt" (adaptive optimisers) or "linear" (SGD-type), or "none"'
    )


def lr_factor(batch_size: int, base_batch_size: int, rule: str) -> float:
    """How much to multiply a learning rate tuned at ``base_batch_size`` by at ``batch_size``."""
    if rule not in ("sqrt", "linear", "none"):
        raise ValueError(f'lr scaling rule must be "sqrt", "linear" or "none", got {rule!r}')
    if not (batch_size > 0 and base_batch_size > 0):
        raise ValueError(f"batch sizes must be positive, got {batch_size!r} and base {base_batch_size!r}")
    ratio = batch_size / base_batch_size
    if rule == "linear":
        return ratio
    if rule == "sqrt":
        return math.sqrt(ratio)
    return 1.0


def scale_lr(lr: float, batch_size: int, base_batch_size: int, rule: str) -> float:
    """``lr`` tuned at ``base_batch_size``, scaled to ``batch_size`` by ``rule``."""
    return float(lr) * lr_factor(batch_size, base_batch_size, rule)


def scale_optimizer(optimizer: Any, batch_size: int, base_batch_size: int, rule: str = "auto") -> float:
    """Scale every parameter group's ``lr`` of ``optimizer`` in place; returns the factor.

    ``rule="auto"`` picks the rule from the optimiser's class. Scaling one
    optimiser twice is refused: the factors would compound.
    """
    if getattr(optimizer, "zeus_lr_factor", None) is not None:
        raise ValueError("this optimizer's learning rate was already scaled for the batch size")
    if rule == "auto":
        rule = rule_for(optimizer)
    f = lr_factor(batch_size, base_batch_size, rule)
    for group in optimizer.param_groups:
        group["lr"] = group["lr"] * f
        if "initial_lr" in group:  # a scheduler already attached keeps its base in sync
            group["initial_lr"] = group["initial_lr"] * f
    optimizer.zeus_lr_factor = f
    return f

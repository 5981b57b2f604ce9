"""Learning-rate scaling rules for a batch size other than the one a learning rate was tuned at."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class SquareRootScaler:
    """``lr`` tuned at batch size ``bs``, scaled by the square root of the batch-size ratio."""

    bs: int
    lr: float

    def compute_lr(self, new_bs: int) -> float:
        return self.lr * math.sqrt(new_bs / self.bs)


@dataclass
class LinearScaler:
    """``lr`` tuned at batch size ``bs``, scaled in proportion to the batch size."""

    bs: int
    lr: float

    def compute_lr(self, new_bs: int) -> float:
        return self.lr * new_bs / self.bs

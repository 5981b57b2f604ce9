"""What both Thompson samplers keep: the arms, each arm's rewards, a window, the random generator.

The samplers differ only in how a posterior is formed from the rewards; the
bookkeeping and the part of their saved state that goes with it live here, so
that a sampler restored in another process has the same history and draws the
same samples.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


class ArmRewards:
    """Rewards per arm (sorted batch sizes), the last ``window`` of them counting (0: all)."""

    def __init__(self, arms: list[int], window: int = 0, seed: int = 0) -> None:
        self.arms = sorted(int(a) for a in arms)
        if not self.arms:
            raise ValueError("Thompson sampling needs at least one arm")
        self.window = int(window)
        self.rng = np.random.default_rng(seed)
        self.rewards: dict[int, list[float]] = {a: [] for a in self.arms}

    def _index(self, arm: int) -> int:
        try:
            return self.arms.index(int(arm))
        except ValueError:
            raise ValueError(f"batch size {arm} is not an arm of the bandit (arms: {self.arms})") from None

    def _window(self, arm: int) -> list[float]:
        r = self.rewards[arm]
        return r[-self.window :] if self.window > 0 else r

    def _among(self, among: list[int] | None) -> tuple[list[int], list[int]]:
        """(arms, their indices) that compete in a draw: ``among``, or every arm when None."""
        if among is None:
            return self.arms, list(range(len(self.arms)))
        keep = [self._index(a) for a in among]
        if not keep:
            raise ValueError("Thompson sampling needs at least one arm to choose among")
        return [self.arms[k] for k in keep], keep

    def _pooled_cv(self, ss: float, dof: float) -> float | None:
        """The relative noise of one reward pooled over every arm's repeats (within the
        window), on top of ``ss`` squared relative deviations worth ``dof`` degrees of
        freedom; None when there are none at all."""
        for a in self.arms:
            r = self._window(a)
            if len(r) > 1:
                m = math.fsum(r) / len(r)
                if m != 0:
                    ss += math.fsum((x - m) ** 2 for x in r) / (m * m)
                    dof += len(r) - 1
        return math.sqrt(ss / dof) if dof > 0 else None

    def _add(self, arm: int, reward: float) -> None:
        self._index(arm)
        self.rewards[int(arm)].append(float(reward))

    def _history_json(self) -> dict[str, Any]:
        return {
            "arms": self.arms,
            "window": self.window,
            "rewards": {str(a): r for a, r in self.rewards.items()},
            "rng": self.rng.bit_generator.state,
        }

    def _load_history(self, d: dict[str, Any]) -> None:
        self.rng.bit_generator.state = d["rng"]
        self.rewards = {a: [float(x) for x in d["rewards"][str(a)]] for a in self.arms}

"""Gaussian Thompson sampling over batch sizes (the MAB stage of Zeus).

Each arm's reward (the negative cost of a try) is modelled as normal with a
known precision that is re-estimated from the arm's own observations
(1 / population variance); the posterior of the arm's mean is the conjugate
normal, recomputed from the prior at every update. With the flat prior
(precision 0) the posterior is N(mean, var / n). An arm whose observations
are all equal gets infinite precision: its mean is then taken as known.

The random generator's state is part of :meth:`GaussianTS.to_json`, so a
policy restored in another process draws the same samples it would have. It is
the ``paper`` variant's sampler (:class:`~zeus_plugins_mab.strategies.Sampler`).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from zeus_plugins_mab.arms import ArmRewards
from zeus_plugins_mab.strategies import Env


def posterior(rewards: list[float], prior_mean: float, prior_precision: float) -> tuple[float, float]:
    """(mean, precision) of an arm's mean reward after ``rewards``."""
    if not rewards:
        return prior_mean, prior_precision
    r = np.asarray(rewards, dtype=float)
    var = float(r.var())
    if var == 0.0:
        return float(r.mean()), math.inf
    lam = 1.0 / var
    tau = prior_precision + len(r) * lam
    return (prior_precision * prior_mean + lam * float(r.sum())) / tau, tau


class GaussianTS(ArmRewards):
    """Thompson sampling over ``arms`` (sorted batch sizes)."""

    name: ClassVar[str] = "gaussian-ts"

    def __init__(
        self,
        arms: list[int],
        *,
        prior_mean: float = 0.0,
        prior_precision: float = 0.0,
        num_exploration: int = 2,
        window: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__(arms, window, seed)
        self.prior_mean = float(prior_mean)
        self.prior_precision = float(prior_precision)
        self.num_exploration = int(num_exploration)
        self.mean = np.full(len(self.arms), self.prior_mean)
        self.precision = np.full(len(self.arms), self.prior_precision)

    @classmethod
    def create(cls, arms: list[int], env: Env) -> GaussianTS:
        o = env.options
        return cls(
            arms,
            prior_mean=o.prior_mean,
            prior_precision=o.prior_precision,
            num_exploration=o.num_exploration,
            window=o.window,
            seed=env.seed,
        )

    def fit(self, arm: int) -> None:
        i = self._index(arm)
        self.mean[i], self.precision[i] = posterior(self._window(arm), self.prior_mean, self.prior_precision)

    def observe(self, arm: int, reward: float) -> None:
        self._add(arm, reward)
        self.fit(arm)

    def posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, sd) of every arm's mean reward; sd 0 for an arm whose rewards are all equal,
        inf for one with no information at all (flat prior, no data)."""
        with np.errstate(divide="ignore"):
            sd = np.where(np.isinf(self.precision), 0.0, 1.0 / np.sqrt(self.precision))
        return self.mean.copy(), sd

    def cv(self) -> float:
        """The relative noise of one try's cost pooled over the arms' repeats (0 before any
        arm has two: the paper's sampler has no prior on the noise)."""
        cv = self._pooled_cv(0.0, 0.0)
        return 0.0 if cv is None else cv

    def predict(self, among: list[int] | None = None) -> int:
        """The arm to pull (among ``among``, all by default): one still under ``num_exploration``
        pulls, in a random order drawn every time (also when unused, as the paper's sampler
        does), else the best posterior sample."""
        arms, keep = self._among(among)
        order = self.rng.choice(arms, len(arms), replace=False)
        for arm in order:
            if len(self.rewards[int(arm)]) < self.num_exploration:
                return int(arm)
        mean, sd = self.posterior()
        if among is not None:
            mean, sd = mean[keep], sd[keep]
        # An arm with no information at all (flat prior, no data) would have an
        # infinite spread; sample it as if it were the best, which it may be.
        theta = self.rng.normal(mean, np.where(np.isfinite(sd), sd, 0.0))
        theta = np.where(np.isfinite(sd), theta, math.inf)
        return arms[int(np.argmax(theta))]

    # -- state --

    def to_json(self) -> dict[str, Any]:
        return {
            "prior_mean": self.prior_mean,
            "prior_precision": self.prior_precision,
            "num_exploration": self.num_exploration,
            **self._history_json(),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> GaussianTS:
        ts = cls(
            d["arms"],
            prior_mean=d["prior_mean"],
            prior_precision=d["prior_precision"],
            num_exploration=d["num_exploration"],
            window=d["window"],
        )
        ts._load_history(d)
        for a in ts.arms:
            ts.fit(a)
        return ts

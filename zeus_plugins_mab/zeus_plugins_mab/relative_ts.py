"""Thompson sampling with a noise level shared by all arms (the improved variant).

The paper's Gaussian TS estimates each arm's noise from that arm alone, so it
needs two observations per arm before it can sample: that is why its pruning
re-runs every survivor. In the traces, the spread of a run's cost comes from
the epochs to target, whose relative spread is similar at every batch size
(a few to ~15 %). This sampler therefore models a try's cost at arm ``b`` as
``mu_b x (1 + e)`` with one relative noise ``e ~ N(0, cv^2)`` for all arms:
``cv^2`` is pooled over every arm's repeated observations, starting from a
prior ``cv0`` worth ``nu0`` pseudo-observations. One observation then gives
an arm a proper posterior ``N(mean_b, (cv x mean_b)^2 / n_b)``; a normal prior
on the mean reward (``prior_mean``, ``prior_precision``) combines with it
conjugately, as in the paper's sampler. It is the ``improved`` variant's sampler
(:class:`~zeus_plugins_mab.strategies.Sampler`).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from zeus_plugins_mab.arms import ArmRewards
from zeus_plugins_mab.strategies import Env


class RelativeTS(ArmRewards):
    """Thompson sampling over ``arms`` with a pooled relative noise."""

    name: ClassVar[str] = "relative-ts"

    def __init__(
        self,
        arms: list[int],
        *,
        cv0: float = 0.1,
        nu0: float = 2.0,
        prior_mean: float = 0.0,
        prior_precision: float = 0.0,
        window: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__(arms, window, seed)
        self.cv0, self.nu0 = float(cv0), float(nu0)
        self.prior_mean, self.prior_precision = float(prior_mean), float(prior_precision)

    @classmethod
    def create(cls, arms: list[int], env: Env) -> RelativeTS:
        o = env.options
        return cls(arms, cv0=o.cv0, prior_mean=o.prior_mean, prior_precision=o.prior_precision, window=o.window, seed=env.seed)

    def cv(self) -> float:
        """The pooled relative noise of one try's cost (the prior ``cv0`` worth ``nu0`` repeats)."""
        cv = self._pooled_cv(self.nu0 * self.cv0**2, self.nu0)
        return self.cv0 if cv is None else cv

    def posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, sd) of every arm's mean reward."""
        cv = self.cv()
        mean = np.empty(len(self.arms))
        sd = np.empty(len(self.arms))
        for k, a in enumerate(self.arms):
            r = self._window(a)
            if not r:
                mean[k] = self.prior_mean
                sd[k] = math.inf if self.prior_precision == 0 else 1.0 / math.sqrt(self.prior_precision)
                continue
            total = math.fsum(r)
            m = total / len(r)
            noise = (cv * abs(m)) ** 2
            if noise == 0.0:
                mean[k], sd[k] = m, 0.0
                continue
            tau = self.prior_precision + len(r) / noise
            mean[k] = (self.prior_precision * self.prior_mean + total / noise) / tau
            sd[k] = 1.0 / math.sqrt(tau)
        return mean, sd

    def observe(self, arm: int, reward: float) -> None:
        self._add(arm, reward)

    @property
    def mean(self) -> np.ndarray:
        return self.posterior()[0]

    def predict(self, among: list[int] | None = None, posterior: tuple[np.ndarray, np.ndarray] | None = None) -> int:
        """The arm whose sampled mean reward is highest (an arm never pulled goes first);
        ``among``: only these arms compete (all by default); ``posterior``: this
        :meth:`posterior`, already computed."""
        mean, sd = self.posterior() if posterior is None else posterior
        arms, keep = self._among(among)
        if among is not None:
            mean, sd = mean[keep], sd[keep]
        unknown = np.isinf(sd)
        if unknown.any():
            return arms[int(np.flatnonzero(unknown)[0])]
        theta = self.rng.normal(mean, sd)
        return arms[int(np.argmax(theta))]

    def to_json(self) -> dict[str, Any]:
        return {
            "cv0": self.cv0,
            "nu0": self.nu0,
            "prior_mean": self.prior_mean,
            "prior_precision": self.prior_precision,
            **self._history_json(),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RelativeTS:
        ts = cls(
            d["arms"],
            cv0=d["cv0"],
            nu0=d["nu0"],
            prior_mean=d["prior_mean"],
            prior_precision=d["prior_precision"],
            window=d["window"],
        )
        ts._load_history(d)
        return ts

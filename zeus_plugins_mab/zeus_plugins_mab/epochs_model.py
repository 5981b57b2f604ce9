"""What a batch size it has never run would cost: known epoch cost x modelled epochs to target.

When the device can predict the time and energy of one epoch at every (batch
size, power limit) before running it (the ``trace`` device can; see
:func:`zeus_plugins_mab.guided.epoch_costs`), the cost of a recurrence at a
batch size ``b`` is ``cpe(b) x E(b)``: a known cost per epoch at the limit
the JIT will hold, times the epochs to reach the target, which is the one
unknown. This module models ``E(b)`` from the epochs observed at the batch
sizes already run, with the empirical model of large-batch training
(McCandlish et al., 2018): steps to target fall as ``1 + B_noise / b``, so
epochs to target grow as

    E(b) = E_min x (1 + b / B_noise) x exp(w_b),

flat below the critical batch size ``B_noise``, proportional to ``b`` above
it. ``E_min`` (flat prior on its log) and ``B_noise`` (uniform on a log2 grid
spanning the batch sizes, plus "infinite": epochs flat everywhere) are
learned; ``w_b ~ N(0, sigma_w^2)`` is each batch size's own departure from
the curve (a learning rate that suits some sizes less, say), and a run's
log epochs vary around ``E(b)`` with the pooled noise ``sigma_e``. Runs that
stopped before the target (early stop, max epochs) count as censored
observations: ``E(b)`` is above the epochs they ran.

Everything is in closed form per grid point (``log E_min`` integrates out),
so a query costs a few vectorised numpy operations over the grid.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr


class EpochsModel:
    """Posterior over the epochs-to-target curve of one job, given per-batch-size observations."""

    #: Grid step over log2 B_noise, and how far the grid reaches beyond the batch sizes.
    STEP, BELOW, ABOVE = 0.25, 2.0, 4.0

    def __init__(self, batch_sizes: list[int], sigma_w: float = 0.3, sigma_slope: float = 0.2) -> None:
        self.batch_sizes = np.asarray(sorted(batch_sizes), dtype=float)
        x = np.log2(self.batch_sizes)
        lo, hi = x[0] - self.BELOW, x[-1] + self.ABOVE
        b_noise = 2.0 ** np.arange(lo, hi + 1e-9, self.STEP)
        # h[g, k]: log(1 + b_k / B_noise_g); the last row is B_noise = infinity.
        self.h = np.vstack([np.log1p(self.batch_sizes[None, :] / b_noise[:, None]), np.zeros((1, len(self.batch_sizes)))])
        # Basis of the linear part: log E_min and a slope per octave (centred).
        self.basis = np.stack([np.ones_like(x), x - x.mean()], axis=1)
        self.prior_precision = np.diag([0.0, 1.0 / float(sigma_slope) ** 2]) if sigma_slope > 0 else np.diag([0.0, 1e12])
        self.sigma_w2 = float(sigma_w) ** 2

    def fit(
        self,
        log_epochs: dict[int, list[float]],
        censored: dict[int, list[float] | float],
        sigma_e: float,
    ) -> Posterior:
        """Posterior given the log epochs of runs that reached the target, per batch-size index,
        and, per index with no such run, the log epochs of every run that stopped before the
        target (a float: one such run)."""
        idx = sorted(k for k, v in log_epochs.items() if v)
        if not idx:
            raise ValueError("the epochs model needs at least one run that reached the target")
        y = np.array([math.fsum(log_epochs[k]) / len(log_epochs[k]) for k in idx])
        n = np.array([len(log_epochs[k]) for k in idx], dtype=float)
        w = 1.0 / (self.sigma_w2 + sigma_e**2 / n)
        X = self.basis[idx]
        # Bayesian linear regression of y - h_g on the basis, the same precision for every g.
        A = X.T @ (X * w[:, None]) + self.prior_precision
        A_inv = np.linalg.inv(A)
        r = y[None, :] - self.h[:, idx]  # (grid, observed)
        beta = (r * w[None, :]) @ X @ A_inv  # (grid, 2), A symmetric
        ll = -0.5 * ((r * r * w[None, :]).sum(axis=1) - np.einsum("gi,ij,gj->g", beta, A, beta))
        mu = beta @ self.basis.T + self.h  # (grid, batch sizes)
        sd = np.sqrt(self.sigma_w2 + np.einsum("ki,ij,kj->k", self.basis, A_inv, self.basis))
        post = Posterior(ll, mu, sd, sigma_e)
        for k, c in censored.items():
            cs = [float(c)] if isinstance(c, (int, float)) else [float(v) for v in c]
            if cs and not log_epochs.get(k):
                post.add_censored(k, cs)
        return post


#: Quadrature nodes (in sds of a batch size's log epochs) and their normal weights.
Z = np.linspace(-5.0, 5.0, 201)
PHI_Z = np.exp(-0.5 * Z * Z)
PHI_Z /= PHI_Z.sum()


class Posterior:
    """The model's belief about log E(b) at every batch size: a mixture over the B_noise grid
    of normals with means ``mu[g, k]`` and standard deviations ``sd[k]``, each batch size
    with stopped runs (and none that reached the target) conditioned on them.

    A stopped run at index ``k`` that ran ``c`` (log) epochs says ``log E(b_k) + e > c``
    with the run's noise ``e ~ N(0, sigma_e^2)``. Several such runs share ``log E(b_k)``, so
    their likelihood is integrated numerically over it (``Z``: a fine grid, because
    ``sigma_e`` is often a tenth of ``sd``), per grid point: ``lik[k][g, z]``. The grid's
    weights include each such batch size's marginal likelihood, so that a stopped run also
    tells about the curve, hence about its neighbours.
    """

    def __init__(self, log_lik: np.ndarray, mu: np.ndarray, sd: np.ndarray, sigma_e: float) -> None:
        self.log_lik, self.mu, self.sd, self.sigma_e = log_lik, mu, sd, float(sigma_e)
        #: Per censored index: likelihood of its stopped runs at every (grid point, node).
        self.lik: dict[int, np.ndarray] = {}
        #: Per censored index: the log of its stopped runs' likelihood per grid point.
        self.log_lik_cens: dict[int, np.ndarray] = {}

    @property
    def weights(self) -> np.ndarray:
        p = np.exp(self.log_lik - self.log_lik.max())
        return p / p.sum()

    def _nodes(self, k: int) -> np.ndarray:
        """log E(b_k) at every (grid point, quadrature node)."""
        return self.mu[:, k][:, None] + self.sd[k] * Z[None, :]

    def _stopped(self, k: int, cs: list[float]) -> np.ndarray:
        x = self._nodes(k)
        lik = ndtr((x - cs[0]) / self.sigma_e)
        for c in cs[1:]:
            lik *= ndtr((x - c) / self.sigma_e)
        return lik

    def add_censored(self, k: int, cs: list[float]) -> None:
        lik = self._stopped(k, cs)
        self.lik[k] = lik
        self.log_lik_cens[k] = np.log(np.maximum(lik @ PHI_Z, 1e-300))
        self.log_lik = self.log_lik + self.log_lik_cens[k]

    def _censored_improvement(self, k: int, lik: np.ndarray, log_lik_other: np.ndarray, cpe: float, best: float) -> tuple[float, float]:
        """(probability, expected saving) at a batch size whose stopped runs have likelihood ``lik``."""
        x = self._nodes(k)
        joint = lik * PHI_Z[None, :] * np.exp(log_lik_other - log_lik_other.max())[:, None]
        total = joint.sum()
        if not total > 0:
            return 0.0, 0.0
        cost = cpe * np.exp(x)
        prob = float(joint[cost < best].sum() / total)
        return prob, float((joint * np.maximum(best - cost, 0.0)).sum() / total)

    def improvement(self, k: list[int], cost_per_epoch: list[float], best: float) -> tuple[np.ndarray, np.ndarray]:
        """Per index in ``k`` (cost of one epoch there: ``cost_per_epoch``): the probability that
        a recurrence there costs less than ``best``, and the expected amount by which it does."""
        weights = self.weights
        mu = self.mu[:, k] + np.log(cost_per_epoch)[None, :]  # log cost, (grid, len(k))
        s = self.sd[k][None, :]
        d = (math.log(best) - mu) / s
        phi = ndtr(d)
        prob = weights @ phi
        # E[max(0, best - X)] for X lognormal(mu, s): best Phi(d) - exp(mu + s^2/2) Phi(d - s).
        ei = np.maximum(best * phi - np.exp(mu + 0.5 * s * s) * ndtr(d - s), 0.0)
        gain = weights @ ei
        for i, kk in enumerate(k):
            if kk in self.lik:
                prob[i], gain[i] = self._censored_improvement(kk, self.lik[kk], self._log_lik_without(kk), cost_per_epoch[i], best)
        return prob, gain

    def _log_lik_without(self, k: int) -> np.ndarray:
        """The grid's log likelihood without index ``k``'s stopped runs."""
        return self.log_lik - self.log_lik_cens[k] if k in self.log_lik_cens else self.log_lik

    def reach_survival(self, k: int, epochs: np.ndarray) -> np.ndarray:
        """Per count in ``epochs``: the chance that a run at index ``k`` has not reached the
        target by then, if it ever does (``log E(b_k)`` from the model and ``k``'s stopped
        runs, plus the run's noise; a run reaching at epoch ``t`` rounds ``log t``)."""
        x = self._nodes(k)
        joint = PHI_Z[None, :] * np.exp(self._log_lik_without(k) - self.log_lik.max())[:, None]
        if k in self.lik:
            joint = joint * self.lik[k]
        # The (grid, node) mixture binned on log E: a few hundred points, whatever the grid.
        hist, edges = np.histogram(x.ravel(), bins=256, weights=joint.ravel())
        centres = 0.5 * (edges[1:] + edges[:-1])
        hist = hist / hist.sum()
        z = (centres[None, :] - np.log(np.asarray(epochs, dtype=float) + 0.5)[:, None]) / self.sigma_e
        return ndtr(z) @ hist

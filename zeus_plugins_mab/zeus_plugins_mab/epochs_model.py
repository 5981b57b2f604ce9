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
from scipy.special import log_ndtr, ndtr


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
        censored: dict[int, float],
        sigma_e: float,
    ) -> Posterior:
        """Posterior given the log epochs of runs that reached the target, per batch-size index,
        and, per index with no such run, the log of the most epochs a stopped run ran."""
        idx = sorted(k for k, v in log_epochs.items() if v)
        if not idx:
            raise ValueError("the epochs model needs at least one run that reached the target")
        y = np.array([float(np.mean(log_epochs[k])) for k in idx])
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
        var = self.sigma_w2 + np.einsum("ki,ij,kj->k", self.basis, A_inv, self.basis)
        cens = [k for k in censored if k not in log_epochs or not log_epochs[k]]
        if cens:
            s = np.sqrt(var[cens] + sigma_e**2)
            ll = ll + log_ndtr((mu[:, cens] - np.array([censored[k] for k in cens])[None, :]) / s[None, :]).sum(axis=1)
        p = np.exp(ll - ll.max())
        p /= p.sum()
        return Posterior(p, mu, np.sqrt(var))


class Posterior:
    """The model's belief about log E(b) at every batch size: a mixture over the B_noise grid
    of normals with means ``mu[g, k]`` and standard deviations ``sd[k]``."""

    def __init__(self, weights: np.ndarray, mu: np.ndarray, sd: np.ndarray) -> None:
        self.weights, self.mu, self.sd = weights, mu, sd

    def improvement(self, k: list[int], cost_per_epoch: list[float], best: float) -> tuple[np.ndarray, np.ndarray]:
        """Per index in ``k`` (cost of one epoch there: ``cost_per_epoch``): the probability that
        a recurrence there costs less than ``best``, and the expected amount by which it does."""
        mu = self.mu[:, k] + np.log(cost_per_epoch)[None, :]  # log cost, (grid, len(k))
        s = self.sd[k][None, :]
        d = (math.log(best) - mu) / s
        phi = ndtr(d)
        prob = self.weights @ phi
        # E[max(0, best - X)] for X lognormal(mu, s): best Phi(d) - exp(mu + s^2/2) Phi(d - s).
        ei = np.maximum(best * phi - np.exp(mu + 0.5 * s * s) * ndtr(d - s), 0.0)
        return prob, self.weights @ ei

"""Per (stage, instruction) energy models over quantised durations.

Both models work in *effective* energy: what an instruction burns above the
blocking power the GPU would draw anyway while waiting, so that a plan's
energy is ``sum(effective) + stages * T * blocking_power``.

``measured`` (default): the profiled options themselves. Times are rounded
*up* to the unit so that a plan's planned iteration time bounds the real one;
options are filtered for Pareto optimality on (time, effective energy) -- a
clock that burns a little more raw energy but less than the blocking power it
saves is still worth running -- and the solver sees the lower convex hull,
whose vertices are measured points.

``exponential``: the published method's fitted model, kept for comparison with
the paper's frontiers. Times are rounded down; options are filtered on raw
energy (with the published noise-factor retry), blocking energy is subtracted
afterwards, and ``a * exp(b * t) + c`` is fitted by least squares from the
published grid of initial guesses, keeping the best fit.
"""

from __future__ import annotations

import itertools
import math
import warnings

import attrs
import numpy as np

from zeus_core import lower_convex_hull, pareto_frontier
from zeus_plugins_perseus.options import MODELS
from zeus_plugins_perseus.profile import InstructionOptions, ProfileError


@attrs.frozen
class OpSpec:
    """The solver's view of one (stage, instruction): cost per integer duration, and how to pick a clock."""

    stage: int
    instruction: str
    lo: int
    hi: int
    costs: np.ndarray  # effective energy (J) at durations lo..hi
    option_units: np.ndarray  # quantised times of selectable clocks, ascending
    option_freqs: np.ndarray  # the matching clocks (MHz)
    points_units: np.ndarray  # data the model was built from (for plots)
    points_energy: np.ndarray
    coefficients: tuple[float, float, float] | None = None

    def frequency_for(self, duration: int) -> int:
        """The slowest clock whose quantised time fits ``duration`` (the fastest if none does)."""
        i = int(np.searchsorted(self.option_units, duration, side="right"))
        return int(self.option_freqs[max(i, 1) - 1])

    def frequencies_for(self, durations: np.ndarray) -> np.ndarray:
        i = np.searchsorted(self.option_units, durations, side="right")
        return self.option_freqs[np.maximum(i, 1) - 1]


def quantise_up(times: np.ndarray, unit: float) -> np.ndarray:
    return np.array([math.ceil(round(float(t) / unit, 6)) for t in times], dtype=np.int64)


def quantise_down(times: np.ndarray, unit: float) -> np.ndarray:
    # Python float floor division, exactly as the published code quantises.
    return np.array([int(float(t) // unit) for t in times], dtype=np.int64)


def quantise_nearest(times: np.ndarray, unit: float) -> np.ndarray:
    return np.maximum(np.rint(np.asarray(times, float) / unit).astype(np.int64), 1)


QUANTISERS = {"up": quantise_up, "down": quantise_down, "nearest": quantise_nearest}


def measured_spec(o: InstructionOptions, unit: float, blocking_w: float, rounding: str = "up") -> OpSpec:
    q = QUANTISERS[rounding](o.time, unit)
    eff = o.energy - blocking_w * q * unit
    front = pareto_frontier(q, eff)
    hull = lower_convex_hull(q, eff)
    lo, hi = int(q[hull[0]]), int(q[hull[-1]])
    grid = np.arange(lo, hi + 1)
    costs = np.interp(grid, q[hull].astype(float), eff[hull]) if hi > lo else eff[hull[:1]].copy()
    return OpSpec(
        stage=o.stage,
        instruction=o.instruction,
        lo=lo,
        hi=hi,
        costs=costs,
        option_units=q[front],
        option_freqs=o.frequency[front],
        points_units=q[front],
        points_energy=eff[front],
    )


def published_candidates(times: np.ndarray, energies: np.ndarray, q: np.ndarray, noise: float) -> list[int]:
    """Indices kept by the published candidate filter, slowest quantum first.

    An option is dropped when another is strictly faster and strictly cheaper
    by more than the noise factor; of options sharing a quantum, the most
    expensive (fastest within the quantum) is kept.
    """
    order = sorted(range(len(times)), key=lambda i: -times[i])
    kept = [i for i in order if not any(times[j] < times[i] * noise and energies[j] < energies[i] * noise for j in order)]
    kept.sort(key=lambda i: -energies[i])
    seen: set[int] = set()
    unique = []
    for i in kept:
        if int(q[i]) not in seen:
            seen.add(int(q[i]))
            unique.append(i)
    unique.sort(key=lambda i: -q[i])
    return unique


def _exp(t, a, b, c):
    return a * np.exp(b * t) + c


def fit_exponential(x: np.ndarray, y: np.ndarray, unit: float) -> tuple[float, float, float]:
    """Least-squares ``a*exp(b*x)+c`` from the published grid of initial guesses; the lowest-MSE convex fit."""
    # here, not at the top: scipy.optimize costs a third of a second to import, and only this model needs it
    from scipy.optimize import OptimizeWarning, curve_fit

    if len(x) < 3:
        raise ValueError(f"{len(x)} Pareto-optimal option(s) are too few to fit a 3-parameter model")
    best, best_err = None, math.inf
    grid = itertools.product([1e1, 1e2, 1e3], [-k * unit / 0.001 for k in (0.01, 0.02, 0.03, 0.04, 0.05, 0.1)], [1e1, 1e2, 1e3])
    for p0 in grid:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", OptimizeWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                coef, pcov = curve_fit(_exp, x, y, p0=list(p0), maxfev=50000)
            except RuntimeError:  # no convergence from this guess; the published code crashes here
                continue
            if np.inf in pcov:
                continue
            err = float(np.mean(np.square(y - np.array([_exp(t, *coef) for t in x]))))
        if err == math.inf or coef[0] < 0.0:
            continue
        if err < best_err:
            best, best_err = (float(coef[0]), float(coef[1]), float(coef[2])), err
    if best is None:
        raise ValueError("no initial guess of the exponential model converged to a convex fit")
    return best


def exponential_spec(o: InstructionOptions, unit: float, blocking_w: float) -> OpSpec:
    q = quantise_down(o.time, unit)
    if q.min() < 1:
        raise ProfileError(f"stage {o.stage} {o.instruction}: times shorter than unit_time_s={unit} quantise to 0; use a smaller unit")
    cand = published_candidates(o.time, o.energy, q, 1.0)
    if len(cand) <= 3:
        cand = published_candidates(o.time, o.energy, q, 0.95)
    cq = q[cand]
    eff = o.energy[cand] - blocking_w * cq * unit
    try:
        coef = fit_exponential(cq, eff, unit)
    except ValueError as err:
        raise ProfileError(f'stage {o.stage} {o.instruction}: {err}; use model = "measured"') from None
    lo, hi = int(cq.min()), int(cq.max())
    grid = np.arange(lo, hi + 1)
    costs = np.array([_exp(t, *coef) for t in grid], dtype=float)
    # The solver needs cost non-increasing in duration; a fit rising at the slow end is cut there.
    keep = int(np.argmin(costs)) + 1
    if keep < len(costs):
        hi, costs = lo + keep - 1, costs[:keep]
    order = np.argsort(cq)
    return OpSpec(
        stage=o.stage,
        instruction=o.instruction,
        lo=lo,
        hi=hi,
        costs=costs,
        option_units=cq[order],
        option_freqs=o.frequency[cand][order],
        points_units=cq[order],
        points_energy=eff[order],
        coefficients=coef,
    )


def build_spec(o: InstructionOptions, model: str, unit: float, blocking_w: float) -> OpSpec:
    if model == "measured":
        return measured_spec(o, unit, blocking_w)
    if model == "exponential":
        return exponential_spec(o, unit, blocking_w)
    raise ValueError(f"model must be one of {MODELS}, got {model!r}")

"""The forecast of the next period: an autoregressive model of the series' changes, refit every day.

The value of step ``i`` is predicted at its start from what is known then (the values of
the steps before it)::

    v[i] = v[i-1] + a1 d[i-1] + a2 d[i-2] + a3 d[i-3] + a4 d[i-4] + b (v(t[i] - 1 day) - v(t[i-1] - 1 day))

where ``d[k] = v[k] - v[k-1]`` (the recent trend) and the last term is how the series
moved over the same step a day earlier (the daily cycle of solar and demand). The
coefficients are fit by least squares on the trailing ``FIT_DAYS`` days, once per day
(at 00:00 UTC, on rows whose values were known by then); with less than ``MIN_DAYS`` of
history the forecast is the same as now (``v[i-1]``). ``benchmarks/grid_forecast.py``
measures its error against "the same as now" on the shared 2020 series.
"""

from __future__ import annotations

import numpy as np

#: Days of history each day's fit uses, and the fewest before the model is used at all.
FIT_DAYS, MIN_DAYS = 14, 2
DAY = 86400.0
LAGS = 4


class Forecaster:
    """One-step forecasts of every row of a series (``starts``, ``values``), computed on first use."""

    def __init__(self, starts: np.ndarray, values: np.ndarray) -> None:
        self.starts = np.asarray(starts, dtype=float)
        self.values = np.asarray(values, dtype=float)
        self._pred: np.ndarray | None = None

    def at(self, i: int) -> float:
        """The forecast of row ``i``'s value (``i >= 1``; row 0 has no past and is its own value)."""
        if self._pred is None:
            self._pred = predict_all(self.starts, self.values)
        return float(self._pred[i])


def _value_at(starts: np.ndarray, values: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The series' value at times ``t`` (NaN before its first row)."""
    idx = np.searchsorted(starts, t, side="right") - 1
    out = values[np.clip(idx, 0, len(values) - 1)].astype(float)
    out[idx < 0] = np.nan
    return out


def features(starts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Row ``i``'s regressors for ``v[i] - v[i-1]`` (NaN where the past is too short)."""
    n = len(values)
    d = np.full(n, np.nan)
    d[1:] = np.diff(values)
    out = np.full((n, LAGS + 1), np.nan)
    for lag in range(1, LAGS + 1):
        out[lag:, lag - 1] = d[:-lag]
    prev = np.r_[np.nan, starts[:-1]]
    out[:, LAGS] = _value_at(starts, values, starts - DAY) - _value_at(starts, values, prev - DAY)
    return out


def predict_all(starts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Every row's one-step forecast, each from the rows before it only."""
    n = len(values)
    pred = np.empty(n)
    pred[0] = values[0]
    pred[1:] = values[:-1]  # the same as now, where the model has no fit
    if n < 3:
        return pred
    x = features(starts, values)
    y = np.r_[np.nan, np.diff(values)]
    ok = ~np.isnan(x).any(axis=1)
    known_at = np.r_[starts[1:], np.inf]  # a row's value is known once its step has ended
    day_of = np.floor(starts / DAY)
    first_day = day_of[0] + MIN_DAYS
    for day in np.unique(day_of):
        if day < first_day:
            continue
        rows = np.flatnonzero(day_of == day)
        fit = ok & (known_at <= day * DAY) & (starts >= (day - FIT_DAYS) * DAY)
        if fit.sum() < 4 * (LAGS + 1):
            continue
        coef, *_ = np.linalg.lstsq(x[fit], y[fit], rcond=None)
        use = rows[ok[rows]]
        use = use[use >= 1]
        pred[use] = values[use - 1] + x[use] @ coef
    return pred


def persistence(values: np.ndarray) -> np.ndarray:
    """ "The same as now": row ``i``'s forecast is row ``i-1``'s value."""
    out = np.asarray(values, dtype=float).copy()
    out[1:] = values[:-1]
    return out

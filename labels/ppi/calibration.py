"""A judge's confidence or score, calibrated against the clinicians' labels.

Where a machine gives more than its verdict (a confidence 1-5 on its label, a
verifier's score 0..1 behind its pass or fail), the score says which of its
readings to trust: a reply it was sure of is right more often. A prediction-
powered estimate gains from that when its prediction of each item is the
chance, given the machine's score, that the clinicians' value is 1 (or the
expected value, for a rate): the calibration of the score. It is learnt from
the labelled items:

- ``isotonic``: the best non-decreasing map of the score to the clinicians'
  value (pool-adjacent-violators, weighted), read between the scores seen by
  straight lines; it assumes only that a higher score never means a lower
  value;
- ``logistic``: value = 1 / (1 + exp(-(a + b x score))), two numbers, smoother
  where few labels are seen.

``auto`` takes the one whose predictions of held-out labels are closer
(squared error). The map is *cross-fitted* (Zrnic & Candes, cross-prediction-
powered inference, PNAS 2024): the labels in K folds, each labelled item's
prediction from a map fitted without its fold, every item's prediction the
mean of the K maps; an item's own label never shapes its own prediction, so
the correction measures the calibration's real errors and the interval stays
honest (fitting and correcting on the same labels would make it too narrow).
Nothing here reads the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import isotonic_regression

METHODS = ("auto", "isotonic", "logistic")
FOLDS = 5
MIN_LABELS = 20
"""Fewer labelled items than this and no calibration is fitted: the verdict is used."""


@dataclass(frozen=True)
class Calibration:
    """A fitted map from a machine's score to the clinicians' expected value."""

    method: str
    knots: np.ndarray | None = None
    """isotonic: the distinct scores seen, in order."""
    values: np.ndarray | None = None
    """isotonic: the fitted value at each knot."""
    coef: tuple[float, float] | None = None
    """logistic: (a, b)."""

    def predict(self, scores: Sequence[float]) -> np.ndarray:
        s = np.asarray(scores, dtype=float)
        if self.method == "isotonic":
            return np.interp(s, self.knots, self.values)
        a, b = self.coef
        return 1 / (1 + np.exp(-np.clip(a + b * s, -30, 30)))


def _isotonic(scores: np.ndarray, values: np.ndarray, weights: np.ndarray) -> Calibration:
    knots, inverse = np.unique(scores, return_inverse=True)
    total = np.bincount(inverse, weights=weights)
    mean = np.bincount(inverse, weights=weights * values) / total
    fitted = isotonic_regression(mean, weights=total, increasing=True).x
    return Calibration("isotonic", knots=knots, values=np.asarray(fitted, dtype=float))


def _logistic(scores: np.ndarray, values: np.ndarray, weights: np.ndarray) -> Calibration:
    """Weighted logistic regression of a value in [0, 1] on the score (Newton's method,
    a touch of ridge so that separable labels stay finite)."""
    x = np.column_stack([np.ones(len(scores)), scores])
    beta = np.zeros(2)
    w = weights / weights.mean()
    ridge = np.diag([1e-6, 1e-3])
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(x @ beta, -30, 30)))
        grad = x.T @ (w * (values - p)) - ridge @ beta
        hess = (x * (w * p * (1 - p))[:, None]).T @ x + ridge
        step = np.linalg.solve(hess, grad)
        beta += step
        if np.abs(step).max() < 1e-10:
            break
    return Calibration("logistic", coef=(float(beta[0]), float(beta[1])))


def fit_calibration(scores: Sequence[float], values: Sequence[float],
                    weights: Sequence[float] | None = None,
                    method: str = "isotonic") -> Calibration:
    """The map from score to value, fitted on labelled items (``method``: isotonic or
    logistic; ``weights``: e.g. 1 / inclusion probability, so the map is the
    population's)."""
    s, y = np.asarray(scores, dtype=float), np.asarray(values, dtype=float)
    w = np.ones(len(s)) if weights is None else np.asarray(weights, dtype=float)
    if method == "logistic":
        return _logistic(s, y, w)
    if method == "isotonic":
        return _isotonic(s, y, w)
    raise ValueError(f"a calibration is isotonic or logistic, not {method!r}")


def fold_of(n: int, k: int = FOLDS) -> np.ndarray:
    """Each labelled item's fold: by its place in the given order, round robin (the same
    labels give the same folds, so the same figures)."""
    return np.arange(n) % k


@dataclass(frozen=True)
class CrossFitted:
    """Cross-fitted predictions: what a prediction-powered estimate takes."""

    method: str
    """isotonic | logistic, the one chosen."""
    population: np.ndarray
    """Every item's prediction: the mean of the fold maps."""
    labelled: np.ndarray
    """Each labelled item's prediction from the map fitted without its fold."""
    error: float
    """The chosen map's weighted mean squared error on held-out labels."""


def cross_fitted(scores: Sequence[float], positions: Sequence[int], values: Sequence[float],
                 weights: Sequence[float] | None = None, method: str = "auto",
                 k: int = FOLDS) -> CrossFitted:
    """Calibrated predictions of every item (``scores``: the machine's score of every
    item of the population; ``positions``, ``values``: the labelled items and the
    clinicians' values; ``weights``: the labels' design weights). ValueError when there
    are too few labels to fit on (fewer than :data:`MIN_LABELS`)."""
    if method not in METHODS:
        raise ValueError(f"a calibration is one of {', '.join(METHODS)}, not {method!r}")
    s = np.asarray(scores, dtype=float)
    positions = np.asarray(positions, dtype=int)
    y = np.asarray(values, dtype=float)
    n = len(positions)
    if n < MIN_LABELS:
        raise ValueError(f"{n} labels are too few to calibrate a score on (at least "
                         f"{MIN_LABELS})")
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    fold = fold_of(n, k)
    s_lab = s[positions]
    best = None
    for name in (("isotonic", "logistic") if method == "auto" else (method,)):
        held_out = np.empty(n)
        population = np.zeros(len(s))
        for j in range(k):
            inside = fold != j
            fitted = fit_calibration(s_lab[inside], y[inside], w[inside], name)
            held_out[~inside] = fitted.predict(s_lab[~inside])
            population += fitted.predict(s) / k
        error = float((w * (held_out - y) ** 2).sum() / w.sum())
        if best is None or error < best.error - 1e-12:
            best = CrossFitted(name, population, held_out, error)
    return best

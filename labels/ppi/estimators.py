"""Prediction-powered estimates of a mean: many machine labels, corrected by a few clinicians'.

A per-response metric that is a mean (accuracy, missed care, a criterion's met
rate) can be read by a machine on every item and by clinicians on a few. The
machine's mean is precise but carries the machine's errors; the clinicians'
mean is unbiased but wide. Prediction-powered inference (Angelopoulos et al.,
Science 2023; PPI++, Angelopoulos, Duchi & Zrnic 2023) uses the machine on
every item and the clinicians' labels to correct its bias: unbiased, and
tighter than the clinicians alone whenever the machine predicts them at all.

Three estimators, each with a 95% normal (CLT) interval:

- :func:`ppi_mean` — PPI++ with the power-tuning weight lambda, for labels that
  are a uniform random sample of the items. It is ``ppi_py.ppi_mean_ci`` of
  ``ppi-python`` 0.2.3 (``lam=None``, unweighted) and ``ppi_mean_pointestimate``,
  reimplemented in numpy (the package pulls in 31 others, silences every
  warning of the process and installs a top-level ``tests`` package):
  ``tests/test_ppi.py`` holds the two equal to 1e-6. With ``Y``, ``Yhat`` the
  clinicians' and the machine's readings of the n labelled items and ``Yhat_u``
  the machine's of the N others:

      lambda = clip( cov_n(Y, Yhat) / ((1 + n/N) var_{n+N}(Yhat)), 0, 1 )
      theta  = mean(lambda Yhat_u) + mean(Y - lambda Yhat)
      se^2   = var(lambda Yhat_u) / N + var(Y - lambda Yhat) / n

  cov_n divides by n, var_{n+N} is the pooled variance of every machine label
  with ddof=1, the two variances of se have ddof=0: exactly ``ppi_py``'s
  choices. lambda = 0 gives the clinicians-only interval, 1 plain PPI.
- :func:`classical_mean` — the clinicians' labels alone: ``ppi_py``'s
  ``classical_mean_ci`` (mean, ddof=0 standard error, z interval).
- :func:`design_ppi_mean` — for labels drawn with *unequal* known inclusion
  probabilities (a review round weighted toward where the machine is likely
  wrong, or stratified with unequal shares). The machine's mean over every
  item of the population, corrected by the inverse-probability-weighted
  (Hajek) mean of the clinicians' corrections on the labelled items, power
  tuned (the active-inference estimator of Zrnic & Candes 2024 with a
  normalised weight):

      theta = lambda mean_all(Yhat) + sum_lab w (Y - lambda Yhat) / sum_lab w,   w = 1/pi

  Its variance is that of the linearised per-item contributions (the Hajek
  mean's influence, plus the machine term) divided by the population size,
  times n / (n - 1), and the interval takes Student's t with Kish's effective
  sample size less one as degrees of freedom (unequal weights leave fewer
  labels' worth of information; a normal quantile undercovers there);
  lambda minimises it, clipped to [0, 1], and is cross-fitted (each half of
  the labels weighted by a lambda tuned on the other half), which removes the
  small bias a lambda tuned on the same labels brings. With lambda = 0 it is
  the weighted clinicians-only estimate (:func:`design_classical_mean`),
  whose point estimate for equal probabilities is :func:`classical_mean`'s
  (its interval a little wider: t, and n / (n - 1)).

Intervals are normal (or t) approximations: with few labels (under
:data:`FEW_LABELS`) or labels that all agree they are too narrow, and the
estimate says so in ``note``. Every function takes 0/1 or real values as
sequences and returns a :class:`MeanEstimate`; nothing here reads the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from scipy.special import stdtrit

ALPHA = 0.05
"""One minus the intervals' coverage: 95% intervals."""
FEW_LABELS = 30
"""Below this many labelled items the normal interval is flagged as approximate."""


@dataclass(frozen=True)
class MeanEstimate:
    """A mean with its 95% interval, or why there is none."""

    value: float | None
    """The estimate; None when it cannot be computed (see ``undefined_reason``)."""
    ci_low: float | None
    ci_high: float | None
    n_labeled: int
    """Items with a clinician's label that the estimate used."""
    n_unlabeled: int
    """Items with the machine's label only."""
    lam: float | None = None
    """The power-tuning weight of the machine labels (PPI only): 0 = ignore them,
    1 = plain PPI."""
    undefined_reason: str | None = None
    note: str | None = None
    """What the reader should know about the interval (few labels, zero width)."""
    population: int | None = None
    """The finite population's size N the estimate is about (``labels.ppi.finite``);
    None for a superpopulation mean (ppi-python's estimand)."""
    design: str | None = None
    """How the labels were drawn, as the variance took it: without replacement, Poisson,
    with replacement (finite population); None for the superpopulation estimators."""
    se: float | None = None
    """The standard error behind the interval."""

    @property
    def half_width(self) -> float | None:
        if self.ci_low is None or self.ci_high is None:
            return None
        return (self.ci_high - self.ci_low) / 2


def z_value(alpha: float = ALPHA) -> float:
    """The standard normal quantile of a two-sided 1 - alpha interval."""
    return NormalDist().inv_cdf(1 - alpha / 2)


def _array(values: Sequence[float]) -> np.ndarray:
    return np.asarray(values, dtype=float).reshape(-1)


def undefined_estimate(n: int, n_unlabeled: int, reason: str) -> MeanEstimate:
    """An estimate that cannot be computed, and why."""
    return MeanEstimate(None, None, None, n, n_unlabeled, undefined_reason=reason)


def _note(n: int, se: float) -> str | None:
    notes = []
    if se < 1e-12:
        notes.append("every label agrees, so the normal interval has zero width: it "
                     "understates the uncertainty")
    if n < FEW_LABELS:
        notes.append(f"only {n} labelled items: the normal (CLT) interval is approximate and "
                     "may be too narrow")
    return "; ".join(notes) or None


def _interval(theta: float, se: float, n: int, n_unlabeled: int, alpha: float,
              lam: float | None = None, quantile: float | None = None) -> MeanEstimate:
    half = (z_value(alpha) if quantile is None else quantile) * se
    return MeanEstimate(float(theta), float(theta - half), float(theta + half), n, n_unlabeled,
                        lam, note=_note(n, se), se=float(se))


def too_few_labels(n: int) -> str | None:
    """Why no interval can be drawn from n labels, or None."""
    if n == 0:
        return "no item has a clinician's label"
    if n == 1:
        return "only one item has a clinician's label: no interval can be drawn from one"
    return None


def power_tuning(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray) -> float:
    """PPI++'s lambda for a mean, as ``ppi_py``'s ``_calc_lam_glm`` (clipped to [0, 1])
    computes it from the lambda=1 estimate: cov_n(Y, Yhat) / ((1 + n/N) var_{n+N}(Yhat)).
    0 when the machine labels do not vary (nothing to learn from them)."""
    n, big_n = len(y), len(yhat_unlabeled)
    theta1 = yhat_unlabeled.mean() + (y - yhat).mean()
    grads, grads_hat = y - theta1, yhat - theta1
    cov = ((grads - grads.mean()) * (grads_hat - grads_hat.mean())).mean()
    var = np.var(np.concatenate([grads_hat, yhat_unlabeled - theta1]), ddof=1)
    if var <= 1e-15:
        return 0.0
    return float(np.clip(cov / ((1 + n / big_n) * var), 0.0, 1.0))


def ppi_mean(
    labeled: Sequence[float],
    predicted_labeled: Sequence[float],
    predicted_unlabeled: Sequence[float],
    *,
    alpha: float = ALPHA,
    lam: float | None = None,
) -> MeanEstimate:
    """PPI++ estimate of the mean and its 1 - alpha interval (``ppi_py.ppi_mean_ci`` with
    ``lam=None``): ``labeled`` the clinicians' values on the labelled items,
    ``predicted_labeled`` the machine's on the same items, ``predicted_unlabeled`` the
    machine's on the other items. ``lam`` fixes the weight instead of tuning it. With no
    unlabelled item there is nothing to add to the clinicians' labels: the estimate is
    :func:`classical_mean` (lambda 0)."""
    y, yhat, yhat_u = _array(labeled), _array(predicted_labeled), _array(predicted_unlabeled)
    if len(y) != len(yhat):
        raise ValueError(f"{len(y)} clinician labels but {len(yhat)} machine labels on them")
    n, big_n = len(y), len(yhat_u)
    if reason := too_few_labels(n):
        return undefined_estimate(n, big_n, reason)
    if big_n == 0:
        own = classical_mean(y, alpha=alpha, n_unlabeled=0)
        every = "every item has a clinician's label: the estimate is the clinicians' own"
        return MeanEstimate(own.value, own.ci_low, own.ci_high, n, 0, 0.0,
                            note="; ".join(x for x in (every, own.note) if x))
    if lam is None:
        lam = power_tuning(y, yhat, yhat_u)
    theta = (lam * yhat_u).mean() + (y - lam * yhat).mean()
    se = float(np.sqrt(np.var(lam * yhat_u) / big_n + np.var(y - lam * yhat) / n))
    return _interval(theta, se, n, big_n, alpha, float(lam))


def classical_mean(labeled: Sequence[float], *, alpha: float = ALPHA,
                   n_unlabeled: int = 0) -> MeanEstimate:
    """The clinicians' mean alone with its normal interval (``ppi_py.classical_mean_ci``:
    standard error with ddof=0). ``n_unlabeled`` is only reported."""
    y = _array(labeled)
    if reason := too_few_labels(len(y)):
        return undefined_estimate(len(y), n_unlabeled, reason)
    return _interval(y.mean(), float(y.std() / np.sqrt(len(y))), len(y), n_unlabeled, alpha)


def machine_mean(predicted: Sequence[float], *, alpha: float = ALPHA) -> MeanEstimate:
    """The machine's mean over every item, with the normal interval of its item sampling
    only: it does not cover the machine's own errors (which PPI corrects)."""
    f = _array(predicted)
    if len(f) == 0:
        return undefined_estimate(0, 0, "the machine labelled no item")
    if len(f) == 1:
        return undefined_estimate(0, 1, "the machine labelled one item: no interval from one")
    half = z_value(alpha) * float(f.std() / np.sqrt(len(f)))
    value = float(f.mean())
    return MeanEstimate(value, value - half, value + half, 0, len(f))


def _design_parts(y, yhat, weights, yhat_u):
    """The linearised per-item contributions of the design estimator, split as
    A + lambda B (both centred), over the N = labelled + unlabelled items."""
    n, m = len(y), len(yhat_u)
    big_n = n + m
    a = np.concatenate([weights * big_n / weights.sum(), np.zeros(m)])  # normalised 1/pi
    f = np.concatenate([yhat, yhat_u])
    y_all = np.concatenate([y, np.zeros(m)])
    y_w = (weights * y).sum() / weights.sum()
    f_w = (weights * yhat).sum() / weights.sum()
    part_a = a * (y_all - y_w)
    part_b = (f - f.mean()) - a * (f - f_w)
    return part_a, part_b, y_w, f_w, f.mean()


def design_ppi_mean(
    labeled: Sequence[float],
    predicted_labeled: Sequence[float],
    probabilities: Sequence[float],
    predicted_unlabeled: Sequence[float],
    *,
    alpha: float = ALPHA,
    lam: float | None = None,
) -> MeanEstimate:
    """PPI for labels drawn with known, possibly unequal, inclusion probabilities
    (``probabilities``: each labelled item's chance of having been labelled). The
    population is the labelled and the unlabelled items together; each labelled item
    stands for 1/pi of them. ``lam`` fixes the weight instead of tuning it (0: the
    weighted clinicians-only estimate)."""
    y, yhat = _array(labeled), _array(predicted_labeled)
    pi, yhat_u = _array(probabilities), _array(predicted_unlabeled)
    if not len(y) == len(yhat) == len(pi):
        raise ValueError("each labelled item needs a clinician label, a machine label and "
                         "an inclusion probability")
    n, m = len(y), len(yhat_u)
    if reason := too_few_labels(n):
        return undefined_estimate(n, m, reason)
    if np.any(~(pi > 0)) or np.any(pi > 1):
        raise ValueError("inclusion probabilities must lie in (0, 1]")
    weights = 1 / pi
    part_a, part_b, y_w, f_w, f_mean = _design_parts(y, yhat, weights, yhat_u)
    if lam is not None or n < 4:
        lam = _tuned(part_a, part_b) if lam is None else lam
        theta = y_w + lam * (f_mean - f_w)
        contributions = part_a + lam * part_b
    else:
        theta, contributions, lam = _cross_fitted(y, yhat, weights, yhat_u, part_a)
    return _interval(theta, _design_se(contributions, n, m), n, m, alpha, float(lam),
                     _design_quantile(weights, alpha))


def _design_se(contributions: np.ndarray, n: int, m: int) -> float:
    """The linearised standard error, with the with-replacement factor n / (n - 1)."""
    return float(np.sqrt((contributions ** 2).sum() * n / (n - 1)) / (n + m))


def _design_quantile(weights: np.ndarray, alpha: float) -> float:
    """Student's t quantile with (Kish's effective sample size - 1) degrees of freedom:
    unequal weights leave fewer labels' worth of information, and a normal quantile on
    so few undercovers (bench/bench_ppi_simulation.py)."""
    effective = weights.sum() ** 2 / (weights ** 2).sum()
    return float(stdtrit(max(effective - 1, 1.0), 1 - alpha / 2))


def _tuned(part_a: np.ndarray, part_b: np.ndarray) -> float:
    """The lambda that minimises the variance of the contributions A + lambda B, in [0, 1]."""
    bb = float((part_b * part_b).sum())
    return 0.0 if bb <= 1e-15 else float(np.clip(-(part_a * part_b).sum() / bb, 0.0, 1.0))


def _cross_fitted(y, yhat, weights, yhat_u, part_a):
    """The design estimate with lambda cross-fitted: the labelled items in two folds
    (alternate items, so the same data give the same figure), each fold's correction
    weighted by a lambda tuned on the other fold. A lambda tuned on the very labels it
    weights is correlated with them, which biases the estimate by O(1/n) (visible in
    bench/bench_ppi_simulation.py); across folds it is not. Returns (estimate, the
    linearised contributions, the mean lambda)."""
    n, m = len(y), len(yhat_u)
    big_n = n + m
    folds = [np.arange(n) % 2 == k for k in (0, 1)]
    lams = []
    for k in (0, 1):
        other = folds[1 - k]
        a, b, *_ = _design_parts(y[other], yhat[other], weights[other],
                                 np.concatenate([yhat[folds[k]], yhat_u]))
        lams.append(_tuned(a, b))
    total = weights.sum()
    f = np.concatenate([yhat, yhat_u])
    f_mean = f.mean()
    a_norm = np.concatenate([weights * big_n / total, np.zeros(m)])
    theta = (weights * y).sum() / total
    lam_bar = 0.0
    correction = np.zeros(big_n)
    for fold, lam in zip(folds, lams, strict=True):
        share = weights[fold].sum() / total
        f_w = (weights[fold] * yhat[fold]).sum() / weights[fold].sum()
        theta += share * lam * (f_mean - f_w)
        lam_bar += share * lam
        inside = np.concatenate([fold, np.zeros(m, dtype=bool)])
        correction[inside] = lam * a_norm[inside] * (f[inside] - f_w)
    contributions = part_a + lam_bar * (f - f_mean) - correction
    return float(theta), contributions, lam_bar


def design_classical_mean(labeled: Sequence[float], probabilities: Sequence[float], *,
                          n_unlabeled: int = 0, alpha: float = ALPHA) -> MeanEstimate:
    """The clinicians' labels alone, weighted by 1/pi (the Hajek mean) with its
    linearised standard error (see the module); equal probabilities give
    :func:`classical_mean`'s estimate."""
    y = _array(labeled)
    estimate = design_ppi_mean(y, np.zeros(len(y)), probabilities, np.zeros(n_unlabeled),
                               alpha=alpha, lam=0.0)
    if estimate.value is None:
        return estimate
    return MeanEstimate(estimate.value, estimate.ci_low, estimate.ci_high, len(y), n_unlabeled,
                        note=estimate.note)

"""Items drawn one at a time, and an interval the lead may look at after every answer.

An *active* review round (``review.team.designs``) offers its items as a
sequence: each next item is drawn, among those not drawn yet, with
probability proportional to its size (how much its clinician label is
expected to tell: where the judge is unsure, the machines disagree, or the
model errs). A uniform round offered in a random order is the same with
equal sizes. Items the clinicians had labelled before the round are known
exactly and are not drawn again.

Such a sequence makes a martingale (Des Raj 1956; Zrnic & Candes, *Active
statistical inference*, ICML 2024): with e = y - lambda g the clinicians'
correction of the machine's prediction g, the t-th draw I_t, drawn with
probability q_t among the R_t items left,

    z_t = lambda mean_P(g) + ( sum_{known, I_1..I_{t-1}} e + e_{I_t} / q_t ) / N

has mean exactly theta = mean_P(y) given everything before it, whatever
lambda and g are, as long as they were fixed before the t-th answer was seen
(they are refitted from the labels so far at 10, 20, 40, ... answers). So:

- the **estimate** after T answers is the weighted mean of z_1..z_T, each
  weighted by the inverse of its variance as foreseen when it was drawn (for a
  uniform draw, (N - t + 1)^-2, which recovers the finite-population
  correction), its variance
  sum w^2 (z - estimate)^2 / (sum w)^2 x T / (T - 1), and a Student t interval
  with Satterthwaite's degrees of freedom (``labels.ppi.finite``);
- the **anytime interval** (a confidence sequence) is valid at every number of
  answers at once, so the lead may look after each answer and stop as soon as
  it is narrow enough: the asymptotic confidence sequence of Waudby-Smith,
  Arnold, Wu, Howard & Ramdas (*Time-uniform central limit theory and
  asymptotic confidence sequences*, Ann. Statist. 2024), the normal-mixture
  boundary on the martingale's own standard error,

      estimate -+ se x sqrt( 2 (t rho^2 + 1) / (t rho^2) x log( sqrt(t rho^2 + 1) / alpha ) )

  t the effective number of answers, rho^2 = (-2 log alpha + log(-2 log alpha + 1)) / t*
  tuned to be narrowest at the planned number of answers t*. It is about 1.5
  times the fixed-look interval at t*: the price of looking as often as one
  likes. It is drawn from :data:`ANYTIME_FROM` answers on.

Nothing here reads the store.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.special import stdtrit

from labels.ppi.calibration import MIN_LABELS, fit_calibration
from labels.ppi.estimators import ALPHA, MeanEstimate, too_few_labels, undefined_estimate

ANYTIME_FROM = 60
"""Answers before the anytime interval is drawn: its guarantee is asymptotic, and with
fewer its variance is too uncertain. In simulated active rounds with a good judge, 5-7%
of studies were missed at some look from 40 answers on, where 5% are allowed; from 60
on, about 2% (bench/bench_few_clinicians.py's settings, 400 studies each)."""
CALIBRATE_FROM = 40
"""Answers before the score is calibrated along the way (a map fitted on fewer is too
rough to help)."""
REFIT_AT = 10
"""lambda and the calibration are refitted at 10, 20, 40, ... answers."""


@dataclass(frozen=True)
class Draws:
    """A sequential design's draws, in order."""

    positions: np.ndarray
    """The t-th draw's position in the population, -1 for an item outside it (another
    model's response in a round over several)."""
    probabilities: np.ndarray
    """q_t: the t-th draw's chance among the items not drawn before it."""
    variances: np.ndarray
    """Each draw's foreseen contribution to the error, as the draw foresaw it
    (``review.team.designs.Succession``): it is weighted by the inverse."""


@dataclass(frozen=True)
class Anytime:
    """The confidence sequence at the latest answer, and along the way."""

    low: float
    high: float
    answers: int
    """Answers it rests on (the answered start of the sequence)."""
    planned: int
    """t*: the number of answers it is narrowest at."""
    estimates: np.ndarray = field(repr=False)
    """The estimate after each draw."""
    half_widths: np.ndarray = field(repr=False)
    """Its half-width after each draw from :data:`ANYTIME_FROM` on (NaN before): the
    interval after draw t is estimates[t] -+ half_widths[t], and with probability 95%
    every one of them holds the truth."""

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


@dataclass(frozen=True)
class SequentialEstimate:
    fixed: MeanEstimate
    """The estimate with its interval for a look decided in advance."""
    anytime: Anytime | None
    """The interval valid at every look; None before :data:`ANYTIME_FROM` answers."""
    answered: int
    """Draws with a clinician's value, from the first on (a gap ends the sequence)."""
    waiting: int
    """Draws answered after the first gap: they count once the gap is filled."""
    calibration: str | None = None
    """The calibration refitted along the way (isotonic | logistic), or None."""


class _Running:
    """The weighted mean of the increments after each draw, its standard error, its
    Satterthwaite degrees of freedom and the effective number of draws (Kish)."""

    def __init__(self, z: np.ndarray, w: np.ndarray):
        shift = float(z[-1])  # centred, so that the running sums do not cancel
        x = z - shift
        steps = np.arange(1, len(z) + 1)
        cw, w2, w4 = np.cumsum(w), w * w, w ** 4
        mean = np.cumsum(w * x) / cw
        sums2 = [np.cumsum(w2 * x ** k) for k in range(3)]
        sums4 = [np.cumsum(w4 * x ** k) for k in range(5)]
        # a_s = w_s^2 (x_s - mean_t)^2: their sum, and the sum of their squares
        total = np.maximum(sums2[2] - 2 * mean * sums2[1] + mean ** 2 * sums2[0], 0.0)
        squares = (sums4[4] - 4 * mean * sums4[3] + 6 * mean ** 2 * sums4[2]
                   - 4 * mean ** 3 * sums4[1] + mean ** 4 * sums4[0])
        spread = np.maximum(squares - total ** 2 / steps, 0.0) * steps / np.maximum(steps - 1, 1)
        cap = np.maximum(steps - 1, 1).astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            df = np.where(spread > 1e-300, 2 * total ** 2 / spread, cap)
        self.df = np.clip(np.nan_to_num(df, nan=1.0), 1.0, cap)
        self.estimate = mean + shift
        self.se = np.sqrt(total * steps / np.maximum(steps - 1, 1)) / cw
        self.effective = cw ** 2 / sums2[0]


def boundary(t: np.ndarray, planned: float, alpha: float = ALPHA) -> np.ndarray:
    """The normal-mixture confidence sequence's multiplier of the standard error after t
    answers (see the module), narrowest near ``planned``."""
    c = -2 * math.log(alpha) + math.log(-2 * math.log(alpha) + 1)
    x = np.asarray(t, dtype=float) * c / max(planned, 1.0)
    return np.sqrt(2 * (x + 1) / x * np.log(np.sqrt(x + 1) / alpha))


def _predictor(scores, known_pos, known_y, drawn_pos, drawn_y, fallback, method):
    """The prediction of every item from the labels so far: the calibrated score where
    there are scores and labels enough, else the machine's own value."""
    if scores is None:
        return fallback, None
    lab_pos = np.concatenate([known_pos, drawn_pos])
    if len(lab_pos) < max(MIN_LABELS, CALIBRATE_FROM):
        return fallback, None
    fitted = fit_calibration(scores[lab_pos], np.concatenate([known_y, drawn_y]),
                             method=method)
    return fitted.predict(scores), fitted.method


def _lambda(y: np.ndarray, g: np.ndarray) -> float:
    """PPI++'s weight from the labels so far: cov(y, g) / var(g), clipped to [0, 1];
    1 (plain PPI) before there are labels to tune it on."""
    if len(y) < REFIT_AT:
        return 1.0
    var = float(np.var(g))
    if var <= 1e-15:
        return 0.0
    return float(np.clip(np.mean((y - y.mean()) * (g - g.mean())) / var, 0.0, 1.0))


def sequential_ppi_mean(
    predicted: Sequence[float],
    known_positions: Sequence[int],
    known_values: Sequence[float],
    draws: Draws,
    draw_values: Sequence[float],
    *,
    scores: Sequence[float] | None = None,
    calibration: str = "isotonic",
    planned: int | None = None,
    lam: float | None = None,
    alpha: float = ALPHA,
) -> SequentialEstimate:
    """The population's mean from a sequential design (see the module): ``predicted``,
    the machine's value of every item of the population; ``known_*``, the items
    labelled before the first draw; ``draws`` and ``draw_values`` (NaN: not answered
    yet) in the order drawn; ``scores``: the machine's score of every item, calibrated
    along the way (``calibration``: isotonic or logistic); ``planned``: the number of
    answers the anytime interval is narrowest at (default: the draws so far); ``lam``
    fixes the machine's weight (0: the clinicians alone) instead of tuning it."""
    g0 = np.asarray(predicted, dtype=float).reshape(-1)
    big_n = len(g0)
    score = None if scores is None else np.asarray(scores, dtype=float)
    known_pos = np.asarray(known_positions, dtype=int)
    known_y = np.asarray(known_values, dtype=float)
    pos = np.asarray(draws.positions, dtype=int)
    q = np.asarray(draws.probabilities, dtype=float)
    foreseen = np.asarray(draws.variances, dtype=float)
    values = np.asarray(draw_values, dtype=float)
    inside = pos >= 0
    missing = inside & np.isnan(values)
    stop = int(np.argmax(missing)) if missing.any() else len(pos)
    waiting = int((inside[stop:] & ~np.isnan(values[stop:])).sum())
    pos, q, foreseen = pos[:stop], q[:stop], foreseen[:stop]
    values, inside = values[:stop], inside[:stop]
    answered = int(inside.sum())
    if reason := too_few_labels(answered):
        return SequentialEstimate(undefined_estimate(answered, big_n - answered, reason),
                                  None, answered, waiting)
    steps = len(pos)
    fixed_lam = lam
    z = np.empty(steps)
    g, lam, method = g0, 1.0, None
    done_pos: list[int] = []
    done_y: list[float] = []
    past = float(known_y.sum())  # sum of e over known and drawn items, with the current fit
    refit = REFIT_AT
    for t in range(steps):
        if len(done_pos) >= refit or t == 0:
            if t:
                refit *= 2
            lab_pos = np.asarray(done_pos, dtype=int)
            lab_y = np.asarray(done_y)
            g, method = _predictor(score, known_pos, known_y, lab_pos, lab_y, g0, calibration)
            all_pos = np.concatenate([known_pos, lab_pos])
            all_y = np.concatenate([known_y, lab_y])
            lam = _lambda(all_y, g[all_pos]) if fixed_lam is None else fixed_lam
            past = float((all_y - lam * g[all_pos]).sum())
            g_mean = float(g.mean())
        i = pos[t]
        if i >= 0:
            e = values[t] - lam * g[i]
            z[t] = lam * g_mean + (past + e / q[t]) / big_n
            past += e
            done_pos.append(int(i))
            done_y.append(float(values[t]))
        else:
            z[t] = lam * g_mean + past / big_n
    w = foreseen.min() / foreseen
    if q[-1] >= 1 - 1e-12 and (len(known_pos) + answered) == big_n:
        # the last item left was drawn: every item is known, the mean is exact
        exact = float(z[-1])
        return SequentialEstimate(MeanEstimate(
            exact, exact, exact, answered, big_n - answered, lam,
            note="every item has a clinician's label: the mean is exact", population=big_n,
            design="sequential", se=0.0), None, answered, waiting, method)
    run = _Running(z, w)
    theta, se_last, df = float(run.estimate[-1]), float(run.se[-1]), float(run.df[-1])
    half = float(stdtrit(df, 1 - alpha / 2)) * se_last
    notes = []
    if se_last < 1e-12:
        notes.append("every answer so far agrees with its correction, so the interval has zero "
                     "width: it understates the uncertainty")
    if answered < 30:
        notes.append(f"only {answered} answers: the interval is approximate")
    note = "; ".join(notes) or None
    fixed = MeanEstimate(theta, theta - half, theta + half, answered, big_n - answered, lam,
                         note=note, population=big_n, design="sequential", se=se_last)
    anytime = None
    so_far = np.cumsum(inside)
    if answered >= ANYTIME_FROM and se_last > 1e-12:
        target = planned or answered
        # the normal-mixture multiplier, widened as Student's t widens the normal where the
        # variance rests on few labels' worth of information (early, or where the machine
        # and the clinicians rarely disagree)
        widen = stdtrit(run.df, 1 - alpha / 2) / stdtrit(np.inf, 1 - alpha / 2)
        widths = np.where(so_far >= ANYTIME_FROM,
                          run.se * boundary(run.effective, target, alpha) * widen, np.nan)
        anytime = Anytime(theta - float(widths[-1]), theta + float(widths[-1]), answered,
                          int(target), run.estimate, widths)
    return SequentialEstimate(fixed, anytime, answered, waiting, method)

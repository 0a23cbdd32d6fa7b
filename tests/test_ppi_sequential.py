"""Items drawn one at a time (active rounds), the martingale estimate and the interval
that may be looked at after every answer; the calibration of a judge's score.

Statistical tests use fixed seeds and assert coverage within Monte Carlo bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labels.ppi.calibration import cross_fitted, fit_calibration
from labels.ppi.sequential import ANYTIME_FROM, Draws, boundary, sequential_ppi_mean
from review.team.active import successive_draw, successive_inclusion


def bound(replicates: int) -> float:
    return 4 * math.sqrt(0.05 * 0.95 / replicates)


def judged(rng, big_n: int, prevalence: float, error: float, sharp: bool = False):
    """Clinicians' values, a judge's verdict, its stated confidence in it and how likely it
    is wrong: it errs mostly where it is unsure (``sharp``: it is mostly sure, and right
    when sure, as a good judge is)."""
    y = (rng.random(big_n) < prevalence).astype(float)
    sure = rng.beta(2, 0.7, big_n) if sharp else rng.beta(2, 2, big_n)
    wrong = 0.02 + 0.6 * (1 - sure) ** 2 if sharp else 2 * error * (1 - sure)
    verdict = np.where(rng.random(big_n) < wrong, 1 - y, y)
    stated = np.where(verdict == 1, 0.5 + sure / 2, 0.5 - sure / 2)
    return y, verdict, stated, wrong


def draws(succession) -> Draws:
    return Draws(succession.order, succession.probabilities, succession.variances)


def test_a_successive_draw_takes_items_in_proportion_to_their_size():
    rng = np.random.default_rng(1)
    sizes = np.array([1.0, 2.0, 3.0, 4.0])
    first = [successive_draw(sizes, rng, 1).order[0] for _ in range(20000)]
    shares = np.bincount(first, minlength=4) / 20000
    assert shares == pytest.approx(sizes / sizes.sum(), abs=0.015)
    s = successive_draw(sizes, rng)
    assert sorted(s.order) == [0, 1, 2, 3]
    assert s.probabilities[-1] == pytest.approx(1.0)
    # Rosen's approximation of the chance of being among the first two
    counts = np.zeros(4)
    for _ in range(20000):
        counts[successive_draw(sizes, rng, 2).order] += 1
    assert successive_inclusion(sizes, 2) == pytest.approx(counts / 20000, abs=0.04)


@pytest.mark.parametrize("big_n,n", [(300, 120), (2000, 200)])
def test_the_uniform_sequence_covers_and_recovers_the_finite_population_correction(big_n, n):
    rng = np.random.default_rng(big_n)
    replicates, covered, errors, widths = 1200, 0, [], []
    for _ in range(replicates):
        y, verdict, _, _ = judged(rng, big_n, 0.3, 0.15)
        d = draws(successive_draw(np.ones(big_n), rng, n))
        e = sequential_ppi_mean(verdict, [], [], d, y[d.positions]).fixed
        covered += e.ci_low <= y.mean() <= e.ci_high
        errors.append(e.value - y.mean())
        widths.append(e.se)
    assert abs(covered / replicates - 0.95) <= bound(replicates)
    assert abs(np.mean(errors)) < 4 * np.std(errors) / math.sqrt(replicates)
    assert np.mean(widths) == pytest.approx(np.std(errors), rel=0.1)
    # with labels on a large share of the items, their errors shrink by the correction
    if n / big_n > 0.3:
        residual = np.std(errors) * math.sqrt(n)
        assert residual < 0.9 * 0.4  # sd of y - lambda g is about 0.4 without it


def test_drawing_where_the_judge_is_unsure_is_unbiased_and_narrower():
    rng = np.random.default_rng(7)
    big_n, n, replicates = 3000, 200, 800
    found = {"uniform": [], "active": []}
    covered = {"uniform": 0, "active": 0}
    for _ in range(replicates):
        y, verdict, stated, wrong = judged(rng, big_n, 0.3, 0.25, sharp=True)
        spread = np.sqrt(wrong * (1 - wrong))
        for name, sizes in (("uniform", np.ones(big_n)), ("active", 0.05 + spread)):
            d = draws(successive_draw(sizes, rng, n))
            e = sequential_ppi_mean(verdict, [], [], d, y[d.positions], scores=stated).fixed
            covered[name] += e.ci_low <= y.mean() <= e.ci_high
            found[name].append((e.value - y.mean(), e.half_width))
    for name, rows in found.items():
        errors = np.array([r[0] for r in rows])
        assert abs(covered[name] / replicates - 0.95) <= bound(replicates), name
        assert abs(errors.mean()) < 4 * errors.std() / math.sqrt(replicates), name
    width = {k: np.mean([r[1] for r in v]) for k, v in found.items()}
    assert width["active"] < 0.92 * width["uniform"]


def test_labels_known_before_the_round_count_exactly():
    """Every item known but one: its draw completes the census, and the estimate is the
    population's mean exactly; known labels shrink the error of the draws that follow."""
    rng = np.random.default_rng(8)
    y, verdict, _, _ = judged(rng, 200, 0.4, 0.2)
    known = np.arange(198)
    d = Draws(np.array([199, 198]), np.array([0.5, 1.0]), np.array([2.0, 1.0]))
    values = y[d.positions]
    e = sequential_ppi_mean(verdict, known, y[known], d, values).fixed
    assert e.value == pytest.approx(y.mean(), abs=1e-12)
    errors = {0: [], 150: []}
    for _ in range(400):
        y, verdict, _, _ = judged(rng, 200, 0.4, 0.2)
        for count in errors:
            known = np.arange(count)
            s = successive_draw(np.ones(200 - count), rng, 30)
            d = Draws(count + s.order, s.probabilities, s.variances)
            est = sequential_ppi_mean(verdict, known, y[known], d, y[d.positions]).fixed
            errors[count].append(est.value - y.mean())
    assert np.std(errors[150]) < 0.6 * np.std(errors[0])


def test_the_sequence_stops_at_the_first_unanswered_draw_and_counts_the_waiting():
    rng = np.random.default_rng(9)
    y, verdict, _, _ = judged(rng, 100, 0.4, 0.2)
    d = draws(successive_draw(np.ones(100), rng, 60))
    values = y[d.positions].copy()
    values[30] = np.nan
    e = sequential_ppi_mean(verdict, [], [], d, values)
    assert e.answered == 30 and e.waiting == 29
    assert e.anytime is None  # fewer than ANYTIME_FROM answers in the start


def test_the_anytime_interval_holds_at_every_look_at_once():
    """Looked at after every answer from the 60th to the 400th, the intervals miss the
    truth in at most 5% of studies, for about 1.5 times the fixed look's width."""
    rng = np.random.default_rng(10)
    big_n, n, replicates = 4000, 400, 500
    missed = 0
    ratio = []
    for _ in range(replicates):
        y, verdict, stated, wrong = judged(rng, big_n, 0.3, 0.2)
        d = draws(successive_draw(0.05 + np.sqrt(wrong * (1 - wrong)), rng, n))
        e = sequential_ppi_mean(verdict, [], [], d, y[d.positions], scores=stated,
                                planned=200)
        a = e.anytime
        looked = ~np.isnan(a.half_widths)
        off = np.abs(a.estimates[looked] - y.mean())
        missed += bool(np.any(off > a.half_widths[looked]))
        ratio.append(a.half_width / e.fixed.half_width)
    assert missed / replicates <= 0.05 + bound(replicates) / 2
    assert 1.3 < np.mean(ratio) < 1.8
    assert ANYTIME_FROM == 60


def test_the_boundary_is_narrowest_near_the_planned_answers():
    t = np.array([50.0, 100.0, 200.0, 400.0, 800.0])
    widths = boundary(t, 200) / np.sqrt(t)
    assert np.all(np.diff(widths) < 0)  # it shrinks with every answer
    # relative to the fixed 1.96 it is best near the plan
    factor = boundary(t, 200)
    assert factor.argmin() in (1, 2)


def test_isotonic_and_logistic_calibration_equal_scikit_learns():
    from sklearn.isotonic import IsotonicRegression
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(11)
    score = rng.random(300)
    y = (rng.random(300) < score ** 2).astype(float)
    ours = fit_calibration(score, y, method="isotonic").predict(score)
    theirs = IsotonicRegression(out_of_bounds="clip").fit(score, y).predict(score)
    assert ours == pytest.approx(theirs, abs=1e-9)
    ours = fit_calibration(score, y, method="logistic").predict(score)
    model = LogisticRegression(C=1e6, tol=1e-10, max_iter=1000).fit(score[:, None], y)
    assert ours == pytest.approx(model.predict_proba(score[:, None])[:, 1], abs=1e-3)


def test_a_labelled_items_own_label_never_shapes_its_own_prediction():
    rng = np.random.default_rng(12)
    score = rng.random(200)
    positions = np.arange(0, 200, 2)
    y = (rng.random(100) < score[positions]).astype(float)
    before = cross_fitted(score, positions, y, method="isotonic")
    flipped = y.copy()
    flipped[7] = 1 - flipped[7]
    after = cross_fitted(score, positions, flipped, method="isotonic")
    assert after.labelled[7] == before.labelled[7]
    with pytest.raises(ValueError, match="too few"):
        cross_fitted(score, positions[:10], y[:10])

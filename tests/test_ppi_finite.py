"""The benchmark's own mean: finite-population PPI, its design variances and coverage.

Statistical tests use fixed seeds and assert coverage within Monte Carlo bounds
(four standard errors of a 95% coverage over the replicates run)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from labels.ppi.estimators import ppi_mean
from labels.ppi.finite import (
    POISSON,
    WITH_REPLACEMENT,
    Labelled,
    finite_ppi_mean,
    uniform_labels,
)
from review.team.designs import systematic_draw, weighted_probabilities


def bound(replicates: int) -> float:
    """Four Monte Carlo standard errors of a 95% coverage."""
    return 4 * math.sqrt(0.05 * 0.95 / replicates)


def study(rng, big_n: int, prevalence: float, flip: float):
    y = (rng.random(big_n) < prevalence).astype(float)
    machine = np.where(rng.random(big_n) < flip, 1 - y, y)
    return y, machine


def test_the_clinicians_alone_get_the_textbook_finite_population_interval():
    rng = np.random.default_rng(1)
    y, machine = study(rng, 300, 0.3, 0.2)
    drawn = rng.choice(300, 100, replace=False)
    e = finite_ppi_mean(machine, uniform_labels(drawn, y[drawn], 300), lam=0.0)
    sample = y[drawn]
    assert e.value == pytest.approx(sample.mean())
    # (1 - n/N) s^2 / n: the finite-population correction, exactly
    assert e.se == pytest.approx(math.sqrt((1 - 100 / 300) * sample.var(ddof=1) / 100))
    assert e.population == 300 and e.design == "without replacement"


def test_a_stratified_draw_gets_the_stratified_estimate_and_variance():
    rng = np.random.default_rng(2)
    big_n = 400
    strata = np.where(np.arange(big_n) < 100, "rare", "common")
    y = np.where(strata == "rare", rng.random(big_n) < 0.6, rng.random(big_n) < 0.1).astype(float)
    take = {"rare": 30, "common": 30}
    drawn = np.concatenate([rng.choice(np.flatnonzero(strata == h), k, replace=False)
                            for h, k in take.items()])
    pi = np.array([take[strata[i]] / (strata == strata[i]).sum() for i in drawn])
    e = finite_ppi_mean(np.zeros(big_n), Labelled(drawn, y[drawn], pi, strata), lam=0.0)
    expected, variance = 0.0, 0.0
    for h, k in take.items():
        members = drawn[strata[drawn] == h]
        size = (strata == h).sum()
        expected += size / big_n * y[members].mean()
        variance += (size / big_n) ** 2 * (1 - k / size) * y[members].var(ddof=1) / k
    assert e.value == pytest.approx(expected)
    assert e.se == pytest.approx(math.sqrt(variance))


def test_labelling_every_item_leaves_no_sampling_error():
    y, machine = study(np.random.default_rng(3), 50, 0.4, 0.2)
    e = finite_ppi_mean(machine, uniform_labels(np.arange(50), y, 50))
    assert e.value == pytest.approx(y.mean())
    assert e.half_width == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("big_n,n,prevalence,flip", [(300, 100, 0.3, 0.15),
                                                     (300, 100, 0.1, 0.15),
                                                     (3000, 150, 0.5, 0.2)])
def test_the_interval_covers_at_the_nominal_level_and_is_narrower_than_ppi_pythons(
        big_n, n, prevalence, flip):
    rng = np.random.default_rng(big_n + n)
    replicates = 1500
    covered = 0
    ours, theirs = [], []
    for _ in range(replicates):
        y, machine = study(rng, big_n, prevalence, flip)
        drawn = rng.choice(big_n, n, replace=False)
        e = finite_ppi_mean(machine, uniform_labels(drawn, y[drawn], big_n))
        covered += e.ci_low <= y.mean() <= e.ci_high
        rest = np.setdiff1d(np.arange(big_n), drawn)
        ours.append(e.half_width)
        theirs.append(ppi_mean(y[drawn], machine[drawn], machine[rest]).half_width)
    assert abs(covered / replicates - 0.95) <= bound(replicates)
    # the finite-population correction: sqrt(1 - n / N) narrower, less a little for t
    expected = math.sqrt(1 - n / big_n)
    assert np.mean(ours) / np.mean(theirs) < expected + 0.04


def test_a_weighted_draw_covers_and_its_estimate_is_unbiased():
    """Systematic PPS, as a weighted round draws: the machine errs where the score is high."""
    rng = np.random.default_rng(4)
    py_rng = random.Random(4)
    big_n, n, replicates = 400, 80, 1200
    covered, errors = 0, []
    for _ in range(replicates):
        score = rng.random(big_n)
        y = (rng.random(big_n) < 0.4).astype(float)
        machine = np.where(rng.random(big_n) < 0.05 + 0.4 * score, 1 - y, y)
        chance = weighted_probabilities(dict(enumerate(score)), n)
        drawn = np.array(sorted(systematic_draw(chance, py_rng)))
        pi = np.array([chance[i] for i in drawn])
        e = finite_ppi_mean(machine, Labelled(drawn, y[drawn], pi))
        covered += e.ci_low <= y.mean() <= e.ci_high
        errors.append(e.value - y.mean())
    assert abs(covered / replicates - 0.95) <= bound(replicates)
    assert abs(np.mean(errors)) < 4 * np.std(errors) / math.sqrt(replicates)


def test_independent_draws_and_draws_with_replacement_have_their_own_variances():
    rng = np.random.default_rng(5)
    big_n, replicates = 500, 1200
    poisson_covered = wr_covered = 0
    for _ in range(replicates):
        y, machine = study(rng, big_n, 0.3, 0.2)
        pi = np.full(big_n, 0.2)
        drawn = np.flatnonzero(rng.random(big_n) < pi)
        e = finite_ppi_mean(machine, Labelled(drawn, y[drawn], pi[drawn], kind=POISSON))
        poisson_covered += e.ci_low <= y.mean() <= e.ci_high
        with_replacement = rng.choice(big_n, 100, replace=True)
        e = finite_ppi_mean(machine, Labelled(with_replacement, y[with_replacement],
                                              np.full(100, 100 / big_n), kind=WITH_REPLACEMENT))
        wr_covered += e.ci_low <= y.mean() <= e.ci_high
    assert abs(poisson_covered / replicates - 0.95) <= bound(replicates)
    assert abs(wr_covered / replicates - 0.95) <= bound(replicates)


def test_a_stratum_without_labels_or_with_one_says_so():
    strata = np.array(["a"] * 5 + ["b"] * 5)
    e = finite_ppi_mean(np.zeros(10), Labelled(np.array([0, 1]), np.array([1.0, 0.0]),
                                               np.array([0.4, 0.4]), strata))
    assert e.value is None and "no label" in e.undefined_reason
    e = finite_ppi_mean(np.zeros(10), Labelled(np.array([0, 1, 5]), np.array([1.0, 0.0, 1.0]),
                                               np.array([0.4, 0.4, 0.2]), strata), lam=0.0)
    assert "hold one label" in e.note

"""Parity with scikit-learn, statsmodels and krippendorff to 1e-9 on 200 random datasets.

Each dataset is seeded and differs in shape: 2 to 400 units, 2 to 6 raters, 2 to 6
categories coded as ordinal integers (0.., 1..) or as non-contiguous numbers (integers
with gaps, quarter fractions, negatives), uniform to heavily skewed class prevalence
including near-degenerate and all-one-category data, 0% to 40% missing ratings, raters
from careless to near-perfect. Against the reference on the same data:

- Cohen's kappa, unweighted / linear / quadratic (raters 0 and 1; the reference gets the
  units both answered): ``sklearn.metrics.cohen_kappa_score(labels=categories)``;
- Fleiss' kappa on the complete table (no missing ratings; statsmodels has none):
  ``statsmodels.stats.inter_rater.fleiss_kappa`` of ``aggregate_raters``;
- Krippendorff's alpha, nominal / ordinal / interval, missing ratings as NaN and the same
  ``value_domain``: ``krippendorff.alpha``; the batched formula our bootstrap uses too;
- macro-F1 of rater 1 against rater 0: ``sklearn.metrics.f1_score(average="macro")`` over
  the categories either rater used (the convention ``macro_f1`` documents).

Where our value is None, the reference must decline too (NaN, or an error) - except where
the module's documented ``MIN_UNITS`` convention alone makes it undefined (one unit).
"""

import math
import warnings
from collections import Counter
from dataclasses import dataclass
from functools import cache

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, f1_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from labels import agreement as ag
from labels.agreement import cohen_kappa, fleiss_kappa, krippendorff_alpha, macro_f1

N_DATASETS = 200
TOL = 1e-9
WEIGHTS = [None, "linear", "quadratic"]
LEVELS = ["nominal", "ordinal", "interval"]


@dataclass(frozen=True)
class Dataset:
    seed: int
    categories: list
    complete: np.ndarray
    """units x raters, object: every rating present."""
    ratings: np.ndarray
    """The same with None where a rating is missing."""
    missing_rate: float

    def reliability(self) -> np.ndarray:
        """raters x units floats, NaN where missing: the krippendorff package's layout."""
        return np.array(
            [[np.nan if x is None else float(x) for x in row] for row in self.ratings], float
        ).T

    def pair(self) -> tuple[list, list]:
        """Raters 0 and 1, missing as None."""
        return self.ratings[:, 0].tolist(), self.ratings[:, 1].tolist()

    def complete_pairs(self) -> tuple[list, list]:
        """Raters 0 and 1 on the units both answered: what the reference is given."""
        a, b = self.pair()
        both = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
        return [x for x, _ in both], [y for _, y in both]


def make_dataset(seed: int) -> Dataset:
    rng = np.random.default_rng([20240604, seed])
    n = int(round(math.exp(rng.uniform(math.log(2), math.log(400)))))
    if seed % 40 == 1:
        n = 2  # the smallest table a chance-corrected coefficient takes
    raters, k = int(rng.integers(2, 7)), int(rng.integers(2, 7))
    codes = seed % 4
    if codes == 0:
        categories = list(range(k))
    elif codes == 1:
        categories = list(range(1, k + 1))
    elif codes == 2:  # integers with gaps, possibly negative
        categories = sorted(rng.choice(np.arange(-10, 40), k, replace=False).tolist())
    else:  # quarter fractions (exact in binary floating point), possibly negative
        categories = sorted((rng.choice(np.arange(-20, 60), k, replace=False) / 4).tolist())
    skew = seed % 5
    if skew == 0:
        prevalence = np.full(k, 1 / k)
    elif skew == 3:  # near-degenerate: one category holds 96-99% of the truth
        n = max(n, 40)  # (with fewer units it is mostly all one category)
        eps = rng.uniform(0.01, 0.04)
        prevalence = np.full(k, eps / (k - 1))
        prevalence[rng.integers(k)] = 1 - eps
    else:
        prevalence = rng.dirichlet(np.full(k, {1: 0.15, 2: 0.5, 4: 3.0}[skew]))
    truth = rng.choice(k, size=n, p=prevalence)
    accuracy = rng.uniform(0.35, 0.98, raters)
    near = rng.random((n, raters)) < 0.5  # an error is a neighbouring category, else a draw
    if skew == 3:  # keep near-degenerate data near-degenerate: careful raters, no drift
        accuracy, near[:] = rng.uniform(0.8, 0.99, raters), False
    if seed % 25 in (12, 17):  # degenerate: every rating the same category
        truth[:] = truth[0]
        accuracy[:] = 1.0
    keep = rng.random((n, raters)) < accuracy
    neighbour = np.clip(truth[:, None] + rng.choice([-1, 1], (n, raters)), 0, k - 1)
    by_prevalence = rng.choice(k, size=(n, raters), p=prevalence)
    index = np.where(keep, truth[:, None], np.where(near, neighbour, by_prevalence))
    odd = []
    if seed % 25 == 17:  # all but one or two ratings the same: chance agreement near 1
        for _ in range(int(rng.integers(1, 3))):
            unit, rater = int(rng.integers(n)), int(rng.integers(2))  # rater 0 or 1
            index[unit, rater] = (index[unit, rater] + int(rng.integers(1, k))) % k
            odd.append(unit)
    complete = np.asarray(categories, dtype=object)[index]
    missing_rate = 0.0 if seed % 3 == 0 else float(rng.uniform(0.0, 0.4))
    ratings = complete.copy()
    ratings[rng.random((n, raters)) < missing_rate] = None
    ratings[odd] = complete[odd]  # the odd ratings are never missing
    return Dataset(seed, categories, complete, ratings, missing_rate)


DATASETS = [make_dataset(seed) for seed in range(N_DATASETS)]


# What the references raise when they decline the data (any other error fails the test).
DECLINED = (
    "Found empty input array",  # sklearn: no unit both raters answered
    "at least one unit with values assigned by at least two coders",  # krippendorff
)


def reference(fn, *args, **kwargs) -> float:
    """The reference library's value; NaN where it declines (returns NaN or raises)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # their "undefined" warnings: we check the NaN
        try:
            return float(fn(*args, **kwargs))
        except ValueError as e:
            if any(text in str(e) for text in DECLINED):
                return math.nan
            raise


def for_sklearn(ds: Dataset, values: list) -> list:
    """sklearn's classification metrics reject non-integer float labels ("continuous"):
    give it those codes as strings; same labels, same order, same tables."""
    if all(float(c).is_integer() for c in ds.categories):
        return values
    return [str(x) for x in values]


def compare(coef: ag.Coefficient, expected: float, what: str) -> str:
    """Assert parity of one coefficient; say whether it was defined, and if not, why."""
    if coef.value is not None:
        assert math.isfinite(expected), f"{what}: ours {coef.value}, reference {expected}"
        assert coef.value == pytest.approx(expected, abs=TOL), what
        return "defined"
    assert coef.undefined_reason, what
    if coef.n < ag.MIN_UNITS:  # our convention: a chance-corrected coefficient needs 2 units
        assert "unit" in coef.undefined_reason, what
        if coef.n == 0:
            assert not math.isfinite(expected), f"{what}: no units, reference {expected}"
        return "too few units"
    assert not math.isfinite(expected), (
        f"{what}: ours undefined ({coef.undefined_reason}), reference {expected}"
    )
    return "undefined"


@cache
def cohen_outcome(seed: int, weights: str | None) -> str:
    ds = DATASETS[seed]
    coef = cohen_kappa(*ds.pair(), ds.categories, weights, n_boot=0)
    a, b, labels = (for_sklearn(ds, x) for x in (*ds.complete_pairs(), ds.categories))
    expected = reference(cohen_kappa_score, a, b, labels=labels, weights=weights)
    return compare(coef, expected, f"dataset {seed}, Cohen's kappa weights={weights}")


@cache
def fleiss_outcome(seed: int) -> str:
    ds = DATASETS[seed]
    coef = fleiss_kappa(ds.complete, ds.categories, n_boot=0)
    counts, _ = aggregate_raters(ds.complete.astype(float))
    expected = reference(sm_fleiss_kappa, counts, method="fleiss")
    return compare(coef, expected, f"dataset {seed}, Fleiss' kappa")


@cache
def alpha_outcome(seed: int, level: str) -> str:
    ds = DATASETS[seed]
    what = f"dataset {seed}, Krippendorff's alpha {level}"
    coef = krippendorff_alpha(ds.ratings, ds.categories, level, n_boot=0)
    expected = reference(
        krippendorff.alpha,
        ds.reliability(),
        value_domain=ds.categories,
        level_of_measurement=level,
    )
    outcome = compare(coef, expected, what)
    if outcome == "defined":
        # The bootstrap resamples with our batched formula, not the package: same value.
        k = len(ds.categories)
        counts = ag._counts(ag._encode(ds.ratings, ds.categories), k)
        counts = counts[counts.sum(axis=1) >= 2]
        m = counts.sum(axis=1)
        o = (
            (counts[:, :, None] * counts[:, None, :] - np.eye(k) * counts[:, None, :])
            / (m - 1)[:, None, None]
        ).sum(axis=0)
        values = np.asarray(ds.categories, float) if level == "interval" else np.arange(k)
        batched = ag._alpha_batch(o[None], level, values)[0]
        assert batched == pytest.approx(expected, abs=TOL), f"{what}, batched formula"
    return outcome


@cache
def f1_outcome(seed: int) -> str:
    ds = DATASETS[seed]
    coef = macro_f1(*ds.pair(), ds.categories, n_boot=0)
    a, b, labels = (for_sklearn(ds, x) for x in (*ds.complete_pairs(), ds.categories))
    used = [c for c in labels if c in set(a) | set(b)]
    expected = reference(f1_score, a, b, labels=used, average="macro", zero_division=0)
    return compare(coef, expected, f"dataset {seed}, macro-F1")


def outcomes(seed: int) -> dict[str, str]:
    out = {f"cohen_kappa_{w or 'unweighted'}": cohen_outcome(seed, w) for w in WEIGHTS}
    out["fleiss_kappa"] = fleiss_outcome(seed)
    out |= {f"krippendorff_alpha_{level}": alpha_outcome(seed, level) for level in LEVELS}
    out["macro_f1"] = f1_outcome(seed)
    return out


# ------------------------------------------------------------------- parity


@pytest.mark.parametrize("seed", range(N_DATASETS))
def test_cohen_kappa_matches_sklearn(seed):
    for weights in WEIGHTS:
        cohen_outcome(seed, weights)


@pytest.mark.parametrize("seed", range(N_DATASETS))
def test_fleiss_kappa_matches_statsmodels_on_complete_data(seed):
    fleiss_outcome(seed)


@pytest.mark.parametrize("seed", range(N_DATASETS))
def test_krippendorff_alpha_matches_the_package_with_missing_ratings(seed):
    for level in LEVELS:
        alpha_outcome(seed, level)


@pytest.mark.parametrize("seed", range(N_DATASETS))
def test_macro_f1_matches_sklearn(seed):
    f1_outcome(seed)


# ------------------------------------------------------ the datasets themselves


def test_datasets_vary_in_shape_codes_skew_and_missingness():
    units = [len(ds.complete) for ds in DATASETS]
    assert min(units) == 2 and max(units) >= 350
    assert {ds.complete.shape[1] for ds in DATASETS} == {2, 3, 4, 5, 6}
    assert {len(ds.categories) for ds in DATASETS} == {2, 3, 4, 5, 6}
    gaps = [ds for ds in DATASETS if np.ptp(ds.categories) != len(ds.categories) - 1]
    assert len(gaps) >= N_DATASETS // 3
    assert any(isinstance(c, float) and not c.is_integer() for ds in gaps for c in ds.categories)
    rates = [ds.missing_rate for ds in DATASETS]
    assert rates.count(0.0) >= N_DATASETS // 4 and max(rates) > 0.35
    missing = [ds for ds in DATASETS if (ds.ratings == None).any()]  # noqa: E711
    assert len(missing) >= N_DATASETS // 2
    top_share = [
        Counter(ds.complete.ravel().tolist()).most_common(1)[0][1] / ds.complete.size
        for ds in DATASETS
    ]
    assert sum(0.95 <= s < 1 for s in top_share) >= 20  # near-degenerate
    assert sum(s == 1.0 for s in top_share) >= 8  # all one category


def test_most_datasets_are_defined_and_undefined_cases_are_checked():
    tally = Counter()
    for seed in range(N_DATASETS):
        for name, outcome in outcomes(seed).items():
            tally[name, outcome] += 1
    names = {name for name, _ in tally}
    assert len(names) == 8
    for name in names:
        assert tally[name, "defined"] >= 0.85 * N_DATASETS, (name, tally)
        if name != "macro_f1":  # macro-F1 is undefined only with no shared unit
            assert tally[name, "undefined"] >= 8, (name, tally)

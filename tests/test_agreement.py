"""Agreement coefficients: published answers, library parity, undefined cases, bootstrap."""

import math
from dataclasses import fields

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, f1_score, precision_recall_fscore_support
from statsmodels.stats.inter_rater import aggregate_raters, cohens_kappa
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from labels import agreement as ag
from labels.agreement import (
    Coefficient,
    agreement_table,
    class_scores,
    cohen_kappa,
    confusion_matrix,
    fleiss_kappa,
    gwet_ac1,
    gwet_ac2,
    krippendorff_alpha,
    macro_f1,
    pabak,
    pair_table,
    percent_agreement,
)
from labels.intervals import bootstrap_ci

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 coders x 12 units.
_ = None
CODERS = {
    "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, _, _, _],
    "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, _, 3],
    "C": [_, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, _],
    "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, _],
}
KRIPP = [list(unit) for unit in zip(*CODERS.values(), strict=True)]  # units x raters
FIVE = [1, 2, 3, 4, 5]


def random_pairs(seed, n=300, k=4, noise=1):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, k, n)
    b = np.clip(a + rng.integers(-noise, noise + 1, n), 0, k - 1)
    return a.tolist(), b.tolist()


def random_table(seed, n=200, raters=4, k=4, missing=0.0):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n)
    table = np.clip(truth[:, None] + rng.integers(-1, 2, (n, raters)), 0, k - 1).astype(object)
    table[rng.random((n, raters)) < missing] = None
    return table


def floats_are_never_nan(coef: Coefficient):
    for f in fields(coef):
        v = getattr(coef, f.name)
        for x in v if isinstance(v, tuple) else (v,):
            assert not (isinstance(x, float) and math.isnan(x)), (coef.key, f.name)


# ------------------------------------------------------------ published answers


@pytest.mark.parametrize(
    "level, expected", [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)]
)
def test_krippendorff_published_example(level, expected):
    coef = krippendorff_alpha(KRIPP, FIVE, level)
    assert round(coef.value, 3) == expected
    assert coef.n == 11  # unit 12 has one value: not pairable


def test_gwet_and_fleiss_on_the_same_example_match_gwets_published_values():
    # Gwet, Handbook of Inter-Rater Reliability (4th ed.), 4-rater example; same data.
    ac1 = gwet_ac1(KRIPP, FIVE)
    assert ac1.value == pytest.approx(0.77544, abs=5e-6)
    assert ac1.analytic_ci == pytest.approx((0.46081, 1.0), abs=5e-6)
    fk = fleiss_kappa(KRIPP, FIVE)
    assert fk.value == pytest.approx(0.76117, abs=5e-6)
    assert fk.analytic_ci == pytest.approx((0.42438, 1.0), abs=5e-6)
    assert round(gwet_ac2(KRIPP, FIVE, "quadratic").value, 3) == 0.914
    assert round(gwet_ac2(KRIPP, FIVE, "linear").value, 3) == 0.859
    assert gwet_ac2(KRIPP, FIVE, "quadratic").analytic_ci[0] == pytest.approx(0.685, abs=5e-4)


def test_cohen_kappa_wikipedia_example():
    # 50 proposals: yes/yes 20, yes/no 5, no/yes 10, no/no 15.
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    coef = cohen_kappa(a, b, ["yes", "no"])
    assert coef.value == pytest.approx(0.4)
    assert coef.n == 50
    assert coef.ci_low < 0.4 < coef.ci_high
    assert coef.analytic_ci[0] < 0.4 < coef.analytic_ci[1]


def test_gwet_ac1_two_raters_by_hand():
    # p_a = 3/4; pi_yes = 5/8; p_e = 2 * 5/8 * 3/8 = 15/32; AC1 = (3/4 - 15/32) / (17/32) = 9/17
    coef = gwet_ac1(pair_table(["y", "y", "y", "n"], ["y", "y", "n", "n"]), ["y", "n"])
    assert coef.value == pytest.approx(9 / 17)


def test_percent_agreement_and_pabak_by_hand():
    a = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0]
    b = [1, 1, 1, 1, 1, 1, 1, 0, 1, 0]
    table = pair_table(a, b)
    assert percent_agreement(table, [0, 1]).value == pytest.approx(0.8)
    assert pabak(table, [0, 1]).value == pytest.approx(0.6)
    # Three raters: unit (1, 1, 0) has 1 agreeing pair of 3, unit (0, 0, 0) all 3.
    assert percent_agreement([[1, 1, 0], [0, 0, 0]], [0, 1]).value == pytest.approx((1 / 3 + 1) / 2)


# ------------------------------------------------------------- library parity


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_matches_sklearn_and_statsmodels_se(seed, weights):
    a, b = random_pairs(seed)
    cats = [0, 1, 2, 3]
    coef = cohen_kappa(a, b, cats, weights, n_boot=0)
    assert coef.value == pytest.approx(
        cohen_kappa_score(a, b, labels=cats, weights=weights), abs=1e-12
    )
    table = np.asarray(confusion_matrix(a, b, cats).counts)
    sm = cohens_kappa(table, wt=weights) if weights else cohens_kappa(table)
    z = 1.959963984540054
    assert coef.analytic_ci == pytest.approx(
        (max(-1, sm.kappa - z * sm.std_kappa), min(1, sm.kappa + z * sm.std_kappa)), abs=1e-9
    )


def test_cohen_category_order_matters_only_for_weights():
    a, b = random_pairs(7)
    cats, shuffled = [0, 1, 2, 3], [2, 0, 3, 1]
    assert cohen_kappa(a, b, cats).value == pytest.approx(cohen_kappa(a, b, shuffled).value)
    assert cohen_kappa(a, b, cats, "quadratic").value != pytest.approx(
        cohen_kappa(a, b, shuffled, "quadratic").value
    )


@pytest.mark.parametrize("seed", range(5))
def test_fleiss_matches_statsmodels(seed):
    table = random_table(seed, raters=3 + seed % 3)
    counts, _ = aggregate_raters(table.astype(int), n_cat=4)
    assert fleiss_kappa(table, [0, 1, 2, 3], n_boot=0).value == pytest.approx(
        sm_fleiss_kappa(counts, method="fleiss"), abs=1e-12
    )


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_alpha_matches_krippendorff_package_and_batched_formula(seed, level):
    table = random_table(seed, missing=0.3)
    reliability = np.array([[np.nan if x is None else x for x in row] for row in table], float).T
    expected = krippendorff.alpha(
        reliability, value_domain=[0, 1, 2, 3], level_of_measurement=level
    )
    coef = krippendorff_alpha(table, [0, 1, 2, 3], level, n_boot=0)
    assert coef.value == pytest.approx(expected, abs=1e-12)
    # The bootstrap uses our batched formula: it must agree with the package.
    counts = ag._counts(ag._encode(table, [0, 1, 2, 3]), 4)
    counts = counts[counts.sum(axis=1) >= 2]
    m = counts.sum(axis=1)
    o = (
        (counts[:, :, None] * counts[:, None, :] - np.eye(4) * counts[:, None, :])
        / (m - 1)[:, None, None]
    ).sum(axis=0)
    assert ag._alpha_batch(o[None], level, np.arange(4.0))[0] == pytest.approx(expected, abs=1e-12)


def test_interval_alpha_uses_numeric_category_values():
    table = [[0, 0], [10, 10], [1, 0], [10, 1]]
    reliability = np.array(table, float).T
    expected = krippendorff.alpha(reliability, level_of_measurement="interval")
    assert krippendorff_alpha(table, [0, 1, 10], "interval").value == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(4))
def test_macro_f1_and_class_scores_match_sklearn(seed):
    a, b = random_pairs(seed, n=60, k=5, noise=2)
    cats = [0, 1, 2, 3, 4]
    assert macro_f1(a, b, cats, n_boot=0).value == pytest.approx(
        f1_score(a, b, average="macro", zero_division=0)
    )
    present = sorted(set(a) | set(b))
    p, r, f, _ = precision_recall_fscore_support(a, b, labels=present, zero_division=0)
    scores = {s.category: s for s in class_scores(a, b, cats)}
    for i, c in enumerate(present):
        assert scores[c].f1 == pytest.approx(f[i])
        assert (scores[c].precision or 0.0) == pytest.approx(p[i])
        assert (scores[c].recall or 0.0) == pytest.approx(r[i])


def test_class_scores_say_none_when_a_class_is_never_used():
    scores = class_scores(["x", "x", "y"], ["x", "y", "y"], ["x", "y", "z"])
    z = scores[2]
    assert (z.precision, z.recall, z.f1) == (None, None, None)
    x = scores[0]
    assert (x.precision, x.recall, x.f1) == (1.0, 0.5, pytest.approx(2 / 3))


# ------------------------------------------------------------ undefined cases


ALL = [
    lambda t, c: cohen_kappa([u[0] for u in t], [u[1] for u in t], c),
    lambda t, c: cohen_kappa([u[0] for u in t], [u[1] for u in t], c, "quadratic"),
    fleiss_kappa,
    krippendorff_alpha,
    lambda t, c: krippendorff_alpha(t, c, "ordinal"),
]


@pytest.mark.parametrize("fn", ALL)
def test_perfect_agreement_on_one_category_is_undefined_and_explained(fn):
    coef = fn([["a", "a"]] * 5, ["a", "b", "c"])
    assert coef.value is None
    assert "'a'" in coef.undefined_reason
    assert "undefined" in coef.undefined_reason
    floats_are_never_nan(coef)


def test_cohen_reason_names_chance_agreement():
    coef = cohen_kappa(["a"] * 4, ["a"] * 4, ["a", "b"])
    assert coef.undefined_reason == (
        "only one category ('a') was used by both raters, "
        "so chance agreement is 1 and kappa is undefined"
    )


@pytest.mark.parametrize("fn", ALL + [gwet_ac1])
def test_single_unit_is_undefined(fn):
    coef = fn([["a", "a"]], ["a", "b"])
    assert coef.value is None and "one unit" in coef.undefined_reason


@pytest.mark.parametrize("fn", ALL + [gwet_ac1, percent_agreement, pabak])
def test_empty_input_is_undefined(fn):
    coef = fn([], ["a", "b"])
    assert coef.value is None and coef.n == 0 and coef.undefined_reason


def test_perfect_agreement_over_several_categories_gives_one():
    table = [["a", "a"], ["b", "b"], ["c", "c"], ["a", "a"]]
    cats = ["a", "b", "c"]
    for level in ("nominal", "ordinal", "interval"):
        assert krippendorff_alpha(table, cats, level).value == 1.0
    assert cohen_kappa(*zip(*table, strict=True), cats).value == 1.0
    assert fleiss_kappa(table, cats).value == 1.0


def test_ac1_stays_defined_where_kappa_collapses():
    # The kappa paradox: 18 of 20 "not met" agreements, kappa near 0, AC1 high.
    a = ["no"] * 18 + ["yes", "no"]
    b = ["no"] * 18 + ["no", "yes"]
    table = pair_table(a, b)
    assert cohen_kappa(a, b, ["no", "yes"]).value < 0
    assert gwet_ac1(table, ["no", "yes"]).value > 0.85
    assert gwet_ac1([["no", "no"]] * 5, ["no", "yes"]).value == 1.0


def test_missing_ratings_are_skipped_and_reported():
    a = ["x", "y", None, "x", float("nan"), "y"]
    b = ["x", "y", "x", None, "y", "x"]
    coef = cohen_kappa(a, b, ["x", "y"])
    assert coef.n == 3 and "3 units with a missing rating skipped" in coef.note
    cm = confusion_matrix(a, b, ["x", "y"])
    assert cm.skipped == [2, 3, 4]


def test_unknown_category_is_an_error_naming_the_unit():
    with pytest.raises(ValueError, match="unit 1, rater 0: 'maybe'"):
        percent_agreement([["yes", "no"], ["maybe", "no"]], ["yes", "no"])


def test_pandas_dataframe_input():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(KRIPP, columns=list("ABCD"))
    assert round(krippendorff_alpha(frame, FIVE).value, 3) == 0.743


@pytest.mark.parametrize(
    "table",
    [
        [],
        [["a", "a"]],
        [["a", "a"]] * 3,
        [["a", None]] * 3,
        [["a", "b"], ["b", "a"]],
        [["a"], ["b"]],
    ],
)
@pytest.mark.parametrize("level", ["nominal", "ordinal", "binary", "interval"])
def test_agreement_table_never_returns_nan(table, level):
    for coef in agreement_table(table, ["a", "b"], level, n_boot=50):
        floats_are_never_nan(coef)
        assert (coef.value is None) == (coef.undefined_reason is not None)


# ------------------------------------------------------- confusion matrix


def test_confusion_matrix_cells_list_the_units():
    a = ["low", "high", "mid", "low", "high"]
    b = ["low", "mid", "mid", "high", "high"]
    cm = confusion_matrix(a, b, ["low", "mid", "high"])
    assert cm.counts == [[1, 0, 1], [0, 1, 0], [0, 1, 1]]
    assert cm.units[0][2] == [3] and cm.units[2][1] == [1]
    assert cm.disagreements() == [1, 3]
    assert cm.n == 5


# ------------------------------------------------------- agreement_table


def keys(table, cats, level):
    return [c.key for c in agreement_table(table, cats, level, n_boot=20)]


def test_agreement_table_chooses_statistics_by_type():
    two = pair_table(*random_pairs(1, n=50))
    three = random_table(1, n=50, raters=3)
    cats = [0, 1, 2, 3]
    assert keys(two, cats, "nominal") == [
        "percent_agreement",
        "cohen_kappa",
        "krippendorff_alpha_nominal",
        "gwet_ac1",
    ]
    assert keys(three, cats, "nominal") == [
        "percent_agreement",
        "fleiss_kappa",
        "krippendorff_alpha_nominal",
        "gwet_ac1",
    ]
    assert keys(two, cats, "ordinal") == [
        "percent_agreement",
        "cohen_kappa",
        "cohen_kappa_linear",
        "cohen_kappa_quadratic",
        "krippendorff_alpha_nominal",
        "krippendorff_alpha_ordinal",
        "gwet_ac1",
        "gwet_ac2_quadratic",
    ]
    assert keys(two, cats, "interval") == ["percent_agreement", "krippendorff_alpha_interval"]
    binary = pair_table(["y", "n", "y", "y"], ["y", "n", "n", "y"])
    assert keys(binary, ["y", "n"], "binary")[-1] == "pabak"
    with pytest.raises(ValueError, match="two categories"):
        agreement_table(binary, ["y", "n", "?"], "binary")


def test_agreement_table_two_raters_use_only_units_both_answered():
    table = [["a", "a"], ["b", "b"], ["a", None], ["b", "a"], [None, "b"]]
    coefs = agreement_table(table, ["a", "b"], "binary", n_boot=20)
    assert {c.n for c in coefs} == {3}
    assert all("2 units answered by only one of the two raters left out" in c.note for c in coefs)


# ------------------------------------------------------------- bootstrap


def test_bootstrap_is_reproducible_and_contains_the_estimate():
    a, b = random_pairs(3, n=400)
    first = cohen_kappa(a, b, [0, 1, 2, 3], n_boot=500, seed=11)
    again = cohen_kappa(a, b, [0, 1, 2, 3], n_boot=500, seed=11)
    other = cohen_kappa(a, b, [0, 1, 2, 3], n_boot=500, seed=12)
    assert (first.ci_low, first.ci_high) == (again.ci_low, again.ci_high)
    assert (first.ci_low, first.ci_high) != (other.ci_low, other.ci_high)
    for coef in agreement_table(random_table(3, raters=3, missing=0.1), [0, 1, 2, 3], "ordinal"):
        assert coef.ci_low <= coef.value <= coef.ci_high, coef.key


def test_bootstrap_matches_naive_unit_resampling():
    """The multinomial shortcut has the distribution of resampling units one by one."""
    a, b = random_pairs(5, n=200)
    cats = [0, 1, 2, 3]
    rng = np.random.default_rng(0)
    a_arr, b_arr = np.array(a), np.array(b)
    naive = []
    for _ in range(2000):
        idx = rng.integers(0, len(a), len(a))
        naive.append(cohen_kappa_score(a_arr[idx], b_arr[idx], labels=cats))
    lo, hi = np.quantile(naive, [0.025, 0.975])
    coef = cohen_kappa(a, b, cats, n_boot=2000, seed=1)
    assert coef.ci_low == pytest.approx(lo, abs=0.02)
    assert coef.ci_high == pytest.approx(hi, abs=0.02)


def test_bootstrap_ci_generic_statistic_and_undefined_replicates():
    # Mean of a 0/1 variable: the interval brackets the proportion.
    tables = np.column_stack([np.r_[np.ones(30), np.zeros(70)], np.ones(100)])
    ci = bootstrap_ci(lambda t: t[:, 0] / t[:, 1], tables, n_boot=400, seed=0)
    assert ci.low < 0.3 < ci.high and ci.undefined_replicates == 0
    # A statistic undefined in most resamples gives no interval, and says so.
    ci = bootstrap_ci(lambda t: np.where(t[:, 0] > 40, 1.0, np.nan), tables, n_boot=100)
    assert ci.low is None and "undefined" in ci.note
    assert bootstrap_ci(lambda t: t[:, 0], np.zeros((0, 2))).low is None


def test_two_rater_bootstrap_on_2000_units_brackets_the_estimate():
    # Speed is measured in bench/bench_agreement.py, not asserted here.
    a, b = random_pairs(9, n=2000)
    coef = cohen_kappa(a, b, [0, 1, 2, 3], "quadratic", n_boot=1000, seed=0)
    assert coef.ci_low < coef.value < coef.ci_high

"""CARE-Bench triage metrics and ranking comparison, on hand-computed cases."""

import pytest
from sklearn.metrics import f1_score

from labels.triage import (
    CAREBENCH_ORDER,
    RankedModel,
    TriageMetric,
    escalation_split,
    rank_correlation,
    rank_models,
    triage_metrics,
)

A0, B0, A1, B1 = CAREBENCH_ORDER
GOLD = [A0, B0, A1, B1, B1, A0]
PRED = [B0, B0, B0, B1, A1, A0]


def test_escalation_split_reads_the_codebook_order():
    esc, urgent = escalation_split(CAREBENCH_ORDER)
    assert esc == {A1, B1} and urgent == B1


def test_triage_metrics_by_hand():
    m = triage_metrics(GOLD, PRED, CAREBENCH_ORDER)
    expect = {  # key: (count, n)
        "accuracy": (3, 6),  # prefixes 1, 3, 5
        "over_triage": (1, 6),  # 0A -> 0B
        "under_triage": (2, 6),  # 1A -> 0B, 1B -> 1A
        "missed_care": (1, 3),  # gold 1x: 1A -> 0B
        "unnecessary_care": (0, 3),
        "urgent_false_negative": (1, 2),  # gold 1B predicted 1A
        "false_urgent_escalation": (0, 4),
        "coverage": (6, 6),
    }
    for key, (count, n) in expect.items():
        assert (m[key].count, m[key].n) == (count, n), key
        assert m[key].value == pytest.approx(count / n), key
    # per-label F1: 0A 2/3, 0B 1/2, 1A 0, 1B 2/3
    assert m["macro_f1"].value == pytest.approx((2 / 3 + 1 / 2 + 0 + 2 / 3) / 4)
    assert m["macro_f1"].value == pytest.approx(f1_score(GOLD, PRED, average="macro"))
    assert m["missed_care"].lower_is_better and not m["accuracy"].lower_is_better


def test_ordinal_order_is_taken_from_the_argument():
    reversed_order = list(reversed(CAREBENCH_ORDER))
    # With the order reversed, "over" and "under" swap (escalation is still read from names).
    m = triage_metrics(GOLD, PRED, reversed_order)
    assert (m["over_triage"].count, m["under_triage"].count) == (2, 1)


def test_missing_predictions_are_unscored_and_counted_in_coverage():
    m = triage_metrics(GOLD + [A1], PRED + [None], CAREBENCH_ORDER)
    assert m["coverage"].value == pytest.approx(6 / 7)
    assert m["accuracy"].n == 6 and m["missed_care"].n == 3


def test_zero_denominator_gives_none_and_a_reason():
    m = triage_metrics([A0, B0], [A0, B1], CAREBENCH_ORDER)
    assert m["missed_care"].value is None and "escalates care" in m["missed_care"].undefined_reason
    assert (
        m["urgent_false_negative"].value is None
        and B1 in m["urgent_false_negative"].undefined_reason
    )
    assert m["false_urgent_escalation"].value == 0.5
    assert m["unnecessary_care"].value == 0.5
    empty = triage_metrics([A0], [None], CAREBENCH_ORDER)
    assert empty["macro_f1"].value is None and empty["macro_f1"].undefined_reason
    assert empty["accuracy"].value is None and empty["coverage"].value == 0.0


def test_unknown_labels_are_errors():
    with pytest.raises(ValueError, match="not in the codebook"):
        triage_metrics([A0], ["2A_SOMETHING"], CAREBENCH_ORDER)
    with pytest.raises(ValueError, match="gold label"):
        triage_metrics([None], [A0], CAREBENCH_ORDER)
    with pytest.raises(ValueError, match="predictions"):
        triage_metrics([A0, A0], [A0], CAREBENCH_ORDER)


def metrics(**values):
    """Fake per-model metrics: just what rank_models reads."""
    return {
        model: {key: TriageMetric(key, key, value, None, 1)}
        for model, (key, value) in values.items()
    }


def test_rank_models_best_first_with_ties_and_undefined_last():
    ranked = rank_models(
        metrics(
            m1=("macro_f1", 0.5), m2=("macro_f1", 0.9), m3=("macro_f1", 0.5), m4=("macro_f1", None)
        )
    )
    assert [(r.model, r.rank) for r in ranked] == [
        ("m2", 1),
        ("m1", 2.5),
        ("m3", 2.5),
        ("m4", None),
    ]


def test_rank_models_lower_is_better_for_error_rates():
    ranked = rank_models(
        metrics(m1=("missed_care", 0.1), m2=("missed_care", 0.3)), key="missed_care"
    )
    assert [r.model for r in ranked] == ["m1", "m2"]


def test_rank_correlation_by_hand():
    a = [RankedModel("m1", None, 1), RankedModel("m2", None, 2), RankedModel("m3", None, 3)]
    b = {"m1": 1, "m2": 3, "m3": 2, "m9": 4}  # m9 is not in a: ignored
    rc = rank_correlation(a, b)
    assert rc.n == 3 and rc.models == ["m1", "m2", "m3"]
    assert rc.spearman_rho == pytest.approx(0.5)  # 1 - 6 * 2 / (3 * 8)
    assert rc.kendall_tau == pytest.approx(1 / 3)  # 2 concordant, 1 discordant pair
    same = rank_correlation(b, b)
    assert same.spearman_rho == pytest.approx(1.0) and same.kendall_tau == pytest.approx(1.0)


def test_rank_correlation_undefined_cases():
    few = rank_correlation({"m1": 1, "m2": 2}, {"m1": 1, "m2": 2})
    assert (
        few.spearman_rho is None
        and few.kendall_tau is None
        and "at least 3" in few.undefined_reason
    )
    tied = rank_correlation({"a": 1, "b": 1, "c": 1}, {"a": 1, "b": 2, "c": 3})
    assert tied.spearman_rho is None and "tie" in tied.undefined_reason


def test_every_share_has_wilsons_interval_as_statsmodels_computes_it():
    import random

    from statsmodels.stats.proportion import proportion_confint

    from labels.triage import wilson_interval

    rng = random.Random(3)
    for _ in range(300):
        n = rng.randint(1, 2000)
        count = rng.choice([0, n, rng.randint(0, n)])
        low, high = wilson_interval(count, n)
        ref_low, ref_high = proportion_confint(count, n, alpha=0.05, method="wilson")
        assert low == pytest.approx(ref_low, abs=1e-12) and high == pytest.approx(ref_high, abs=1e-12)
    assert wilson_interval(0, 0) is None
    m = triage_metrics(GOLD, PRED, CAREBENCH_ORDER)
    acc = m["accuracy"]
    assert (acc.ci_low, acc.ci_high) == pytest.approx(proportion_confint(3, 6, method="wilson"))
    fue = m["false_urgent_escalation"]
    assert fue.count == 0 and fue.ci_low == 0.0 < fue.ci_high  # 0 of 4: still an interval


def test_macro_f1_has_a_bootstrap_interval_that_narrows_with_more_prefixes():
    import random

    rng = random.Random(9)
    widths = []
    for n in (40, 400, 4000):
        gold = [rng.choice(CAREBENCH_ORDER) for _ in range(n)]
        pred = [g if rng.random() < 0.7 else rng.choice(CAREBENCH_ORDER) for g in gold]
        f1 = triage_metrics(gold, pred, CAREBENCH_ORDER)["macro_f1"]
        assert f1.ci_low < f1.value < f1.ci_high
        widths.append(f1.ci_high - f1.ci_low)
        again = triage_metrics(gold, pred, CAREBENCH_ORDER)["macro_f1"]
        assert (again.ci_low, again.ci_high) == (f1.ci_low, f1.ci_high)  # seeded
    assert widths[0] > widths[1] > widths[2]
    none = triage_metrics(GOLD, PRED, CAREBENCH_ORDER, n_boot=0)["macro_f1"]
    assert none.value is not None and none.ci_low is None


def test_a_ranking_carries_each_models_interval():
    m = {"a": triage_metrics(GOLD, PRED, CAREBENCH_ORDER), "b": triage_metrics(GOLD, GOLD, CAREBENCH_ORDER)}
    ranked = {r.model: r for r in rank_models(m, "accuracy")}
    assert (ranked["a"].ci_low, ranked["a"].ci_high) == (m["a"]["accuracy"].ci_low, m["a"]["accuracy"].ci_high)
    assert ranked["b"].rank == 1 and ranked["b"].ci_high == pytest.approx(1.0)


def test_a_swap_inside_overlapping_intervals_is_called_noise():
    from labels.compare.leaderboard import swaps_within_noise

    def ranking(*rows):
        return [RankedModel(m, v, r, lo, hi) for m, v, r, lo, hi in rows]

    base = ranking(("a", 0.70, 1, 0.60, 0.80), ("b", 0.65, 2, 0.55, 0.75), ("c", 0.30, 3, 0.20, 0.40))
    close = ranking(("b", 0.70, 1, 0.60, 0.80), ("a", 0.66, 2, 0.56, 0.76), ("c", 0.31, 3, 0.21, 0.41))
    far = ranking(("c", 0.90, 1, 0.85, 0.95), ("a", 0.70, 2, 0.60, 0.80), ("b", 0.65, 3, 0.55, 0.75))
    assert swaps_within_noise(base, close) is True
    assert swaps_within_noise(base, far) is False  # c overtook a and b by far
    assert swaps_within_noise(base, base) is None  # nothing swapped
    assert swaps_within_noise(base, ranking(("b", 0.7, 1, None, None), ("a", 0.6, 2, None, None))) is None


def test_shares_of_responses_clustered_in_cases_use_a_case_bootstrap():
    """Ten cases of five responses each, over-triaged all together or not at all: Wilson's
    interval would take the 50 responses as independent and be far too narrow."""
    from labels.intervals import bootstrap_ci
    from labels.triage import CASE_BOOTSTRAP, WILSON, triage_metric_batch, triage_tables

    gold, pred, cases = [], [], []
    for case in range(10):
        over = case % 3 == 0  # cases 0, 3, 6, 9
        gold += [A0] * 5
        pred += [A1 if over else A0] * 5
        cases += [f"case-{case}"] * 5
    clustered = triage_metrics(gold, pred, CAREBENCH_ORDER, clusters=cases, n_boot=500, seed=2)
    alone = triage_metrics(gold, pred, CAREBENCH_ORDER, n_boot=500, seed=2)
    over, wilson = clustered["over_triage"], alone["over_triage"]
    assert over.value == wilson.value == pytest.approx(0.4) and (over.count, over.n) == (20, 50)
    assert over.interval == CASE_BOOTSTRAP and over.clusters == 10
    assert wilson.interval == WILSON and wilson.clusters is None
    assert over.ci_high - over.ci_low > 1.5 * (wilson.ci_high - wilson.ci_low)
    expected = bootstrap_ci(lambda t: triage_metric_batch("over_triage", t, CAREBENCH_ORDER),
                            triage_tables(gold, pred, CAREBENCH_ORDER), n_boot=500, seed=2,
                            clusters=cases)
    assert (over.ci_low, over.ci_high) == (expected.low, expected.high)
    again = triage_metrics(gold, pred, CAREBENCH_ORDER, clusters=cases, n_boot=500, seed=2)
    assert (again["over_triage"].ci_low, again["over_triage"].ci_high) == (over.ci_low,
                                                                          over.ci_high)
    # one response per case: nothing to keep together, Wilson's interval
    single = triage_metrics(gold, pred, CAREBENCH_ORDER, clusters=list(range(50)))
    assert single["over_triage"].interval == WILSON
    assert clustered["macro_f1"].interval == CASE_BOOTSTRAP


def test_the_leaderboard_and_the_mappers_shares_resample_cases_and_say_so(demo):
    import json

    from labels.compare import triage_comparison
    from labels.report import triage_json
    from labels.triage import CASE_BOOTSTRAP, WILSON_CASES

    report = triage_comparison(demo, n_boot=200, seed=1)
    x = report.labellings[0]
    for metrics in [*x.metrics.values(), *report.mapper_triage.values()]:
        for key in ("over_triage", "under_triage", "missed_care"):
            if metrics[key].value is not None:
                assert metrics[key].interval in (CASE_BOOTSTRAP, WILSON_CASES)
                assert metrics[key].clusters > 1
    method = json.loads(triage_json(report))["provenance"]["interval"]
    assert "bootstrap resampling whole cases (200 resamples, seed 1)" in method


def test_a_clustered_share_of_none_takes_wilson_on_the_cases_and_warns_when_few():
    """0 over-triaged of 50 responses in 10 cases: every resample says 0, an interval of no
    width; Wilson's on the 10 cases says how far it could be instead, and that 10 is few."""
    from labels.intervals import wilson_interval
    from labels.triage import WILSON_CASES

    gold = [A0, B0, A1, B1, A0] * 10
    cases = [i // 5 for i in range(50)]
    m = triage_metrics(gold, gold, CAREBENCH_ORDER, clusters=cases, n_boot=200)
    over = m["over_triage"]
    assert (over.count, over.value, over.interval) == (0, 0.0, WILSON_CASES)
    assert (over.ci_low, over.ci_high) == pytest.approx(wilson_interval(0, 10))
    assert any("only 10 cases" in w for w in over.warnings)
    # urgent false negatives: only the 10 responses with urgent gold, one per case
    ufn = m["urgent_false_negative"]
    assert (ufn.ci_low, ufn.ci_high) == pytest.approx(wilson_interval(0, 10))
    # macro-F1 of a perfect reading: no width, and said
    assert any("no width" in w for w in m["macro_f1"].warnings)


def test_the_triage_text_and_json_say_when_an_interval_rests_on_few_cases(store):
    import json

    from labels.compare import triage_comparison
    from labels.compare.text import format_triage_text
    from labels.report import triage_json
    from tests.test_leaderboard import study

    study(store, clinician_prefixes=range(12))  # 6 cases
    report = triage_comparison(store, n_boot=100)
    text = format_triage_text(report)
    assert "m2, macro-F1 interval: only 6 cases: below 20" in text
    assert "  warning: only 6 cases: below 20" in text  # under the mapper's shares
    data = json.loads(triage_json(report))
    m2 = data["labellings"][0]["metrics"]["m2"]
    assert any("only 6 cases" in w for w in m2["over_triage"]["warnings"])


def test_macro_f1_is_over_the_codebooks_labels_not_those_a_subset_has():
    """The issue's case: a model whose subset lacks one of the four labels read 0.50 over
    the three it has; over the codebook's four it is 0.375 (scikit-learn's f1_score with
    labels= the codebook's, zero_division=0)."""
    from sklearn.metrics import f1_score

    from labels.triage import triage_metrics

    order = ["0A", "0B", "1A", "1B"]
    gold = ["0A", "0A", "0B", "0B", "1A", "1A"]
    said = ["0A", "0B", "0B", "1A", "1A", "0A"]
    ours = triage_metrics(gold, said, order, n_boot=0)["macro_f1"].value
    theirs = f1_score(gold, said, labels=order, average="macro", zero_division=0)
    assert ours == pytest.approx(theirs) == pytest.approx(0.375)
    present = f1_score(gold, said, average="macro")
    assert present == pytest.approx(0.5)  # what averaging over the labels present gave

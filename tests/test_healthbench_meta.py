"""HealthBench meta-evaluation: grader vs physicians and the human ceiling, by hand."""

import random
from collections import defaultdict

import pytest

from labels.healthbench_meta import (
    MetaRow,
    by_group,
    grader_vs_physicians,
    human_ceiling,
    meta_row,
    physician_scores,
)

T, F = True, False


def row(grader, *labels, category="emergency", tags=()):
    return MetaRow(
        grader, tuple((f"p{i + 1}", x) for i, x in enumerate(labels)), category=category, tags=tags
    )


ROWS = [
    row(T, T, T, F),  # grader pairs (ref, pred): (T,T) (T,T) (F,T)
    row(F, F, T),  # (F,F) (T,F)
    row(T, T),  # (T,T); one physician: no ceiling pairs
]


def test_grader_vs_physicians_by_hand():
    s = grader_vs_physicians(ROWS)
    # met: TP 3, reference 4, predicted 4 -> 6/8; not met: TP 1, ref 2, pred 2 -> 2/4
    assert (s.f1_met, s.f1_not_met) == (pytest.approx(0.75), pytest.approx(0.5))
    assert s.macro_f1 == pytest.approx(0.625)
    assert (s.n_pairs, s.n_rows) == (6, 3)


def test_human_ceiling_by_hand():
    s = human_ceiling(ROWS)
    # row 1 (T,T,F): ordered pairs (pred, ref): TT x2, TF x2, FT x2; row 2 (F,T): FT, TF
    # met: TP 2, reference 5, predicted 5 -> 0.4; not met: TP 0, ref 3, pred 3 -> 0
    assert (s.f1_met, s.f1_not_met) == (pytest.approx(0.4), pytest.approx(0.0))
    assert s.macro_f1 == pytest.approx(0.2)
    assert (s.n_pairs, s.n_rows) == (8, 2)


def test_physician_scores_leave_one_out():
    scores = physician_scores(ROWS)
    assert set(scores) == {"p1", "p2", "p3"}
    # p1: row 1 T vs (T, F); row 2 F vs T -> met F1 2/4, not met F1 0
    assert scores["p1"].macro_f1 == pytest.approx(0.25)
    # p3 only said "not met" against two "met": undefined, explained
    assert scores["p3"].macro_f1 is None and "never said 'met'" in scores["p3"].undefined_reason


def official_balanced_f1(preds, refs_lists):
    """Independent oracle: the precision/recall bookkeeping of simple-evals'
    healthbench_meta_eval, rewritten as plain loops."""
    lists = defaultdict(list)
    for pred, refs in zip(preds, refs_lists, strict=True):
        for ref in refs:
            lists[("precision", pred)].append(pred == ref)
            lists[("recall", ref)].append(pred == ref)
    f1 = {}
    for cls in (True, False):
        p, r = lists[("precision", cls)], lists[("recall", cls)]
        if not p or not r:
            return None
        p, r = sum(p) / len(p), sum(r) / len(r)
        f1[cls] = 0.0 if p == r == 0 else 2 * p * r / (p + r)
    return (f1[True] + f1[False]) / 2


@pytest.mark.parametrize("seed", range(5))
def test_matches_the_published_bookkeeping(seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(40):
        labels = [rng.random() < 0.6 for _ in range(rng.randint(1, 4))]
        rows.append(row(rng.random() < 0.55, *labels))
    grader = grader_vs_physicians(rows, n_boot=0)
    assert grader.macro_f1 == pytest.approx(
        official_balanced_f1(
            [r.grader_met for r in rows], [[x for _, x in r.physician_labels] for r in rows]
        )
    )
    preds, refs = [], []
    for r in rows:
        labels = [x for _, x in r.physician_labels]
        for i, x in enumerate(labels):
            preds.append(x)
            refs.append(labels[:i] + labels[i + 1 :])
    assert human_ceiling(rows, n_boot=0).macro_f1 == pytest.approx(
        official_balanced_f1(preds, refs)
    )


def test_undefined_when_the_grader_never_says_not_met():
    s = grader_vs_physicians([row(T, T, F), row(T, F)])
    assert s.macro_f1 is None and s.f1_not_met is None
    assert s.f1_met == pytest.approx(2 / 4)  # TP 1, reference 1, predicted 3
    assert "the grader never said 'not met'" in s.undefined_reason
    assert human_ceiling([row(T, T)]).undefined_reason == "no label pairs to compare"


def test_rows_without_a_grader_verdict_are_left_out_of_its_score_only():
    rows = ROWS + [row(None, F, F)]
    s = grader_vs_physicians(rows)
    assert s.n_pairs == 6 and "1 row without a grader verdict" in s.note
    assert human_ceiling(rows).n_pairs == 10


def test_bootstrap_over_rows_is_seeded_and_brackets_the_estimate():
    rng = random.Random(0)
    rows = [row(rng.random() < 0.5, *(rng.random() < 0.5 for _ in range(3))) for _ in range(60)]
    a, b = grader_vs_physicians(rows, seed=3), grader_vs_physicians(rows, seed=3)
    assert (a.ci_low, a.ci_high) == (b.ci_low, b.ci_high)
    assert a.ci_low <= a.macro_f1 <= a.ci_high
    c = human_ceiling(rows, seed=3)
    assert c.ci_low <= c.macro_f1 <= c.ci_high


def test_by_group_places_grader_next_to_ceiling():
    rows = ROWS + [
        row(F, F, F, category="hedging", tags=("axis:accuracy",)),
        row(T, T, F, category="hedging", tags=("axis:accuracy", "axis:completeness")),
    ]
    groups = by_group(rows, "category", n_boot=0)
    assert list(groups) == ["emergency", "hedging"]
    assert groups["emergency"].grader.macro_f1 == pytest.approx(0.625)
    assert groups["emergency"].physicians.macro_f1 == pytest.approx(0.2)
    hedging = groups["hedging"].grader  # pairs (F,F) (F,F) (T,T) (F,T)
    assert hedging.f1_met == pytest.approx(2 / 3) and hedging.f1_not_met == pytest.approx(0.8)
    axes = by_group(rows, "axis", n_boot=0)
    assert list(axes) == ["accuracy", "completeness", None]
    assert axes["completeness"].grader.n_pairs == 2
    assert by_group(rows, lambda r: len(r.physician_labels), n_boot=0).keys() == {1, 2, 3}


def test_meta_row_from_a_published_record():
    record = {
        "binary_labels": [True, False],
        "anonymized_physician_ids": ["a", "b"],
        "category": "cluster_x",
        "rubric": "Advises calling emergency services.",
        "prompt_id": "p",
        "completion_id": "c",
    }
    r = meta_row(record, grader_met=True, tags=["axis:accuracy"])
    assert r.physician_labels == (("a", True), ("b", False))
    assert (r.category, r.criterion, r.tags) == ("cluster_x", record["rubric"], ("axis:accuracy",))
    with pytest.raises(ValueError, match="2 labels but 1 physician ids"):
        meta_row({**record, "anonymized_physician_ids": ["a"]}, True)

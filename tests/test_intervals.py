"""Intervals that say when they mean little (issue 17, point 5): no width, too few units,
resamples dropped, Wilson's interval where it exists, a seed and a resample count to
choose, and a bootstrap over cases where a case's units are correlated."""

from __future__ import annotations

import json

import numpy as np
import pytest

from codebook import CAREBENCH, codebook
from labels.agreement import agreement_table, cohen_kappa, percent_agreement
from labels.compare import compare
from labels.intervals import SMALL_N, bootstrap_ci, wilson_interval
from store.records import AnnotationRecord, ItemRecord, RaterRecord
from store.writer import RecordWriter
from tests.helpers import run_cli

A, B, C, D = codebook(CAREBENCH).codes
PREFIX_Q = "carebench.escalation_needed"


def test_perfect_agreement_on_five_items_says_its_interval_has_no_width():
    k = cohen_kappa([A, B, C, D, A], [A, B, C, D, A], [A, B, C, D])
    assert (k.value, k.ci_low, k.ci_high) == (1.0, 1.0, 1.0)
    words = " ".join(k.warnings)
    assert "no width" in words and "says nothing" in words
    assert f"only 5 units: below {SMALL_N}" in words


def test_a_rater_who_always_gives_one_label_is_flagged():
    k = cohen_kappa([A, B, C, D] * 6, [A] * 24, [A, B, C, D])
    assert k.value == pytest.approx(0.0) and k.ci_high - k.ci_low < 1e-12
    assert any("no width" in w for w in k.warnings)
    assert not any("only" in w for w in k.warnings)  # 24 units: enough


def test_the_share_of_resamples_dropped_is_reported():
    k = cohen_kappa([A, B], [A, B], [A, B, C, D], n_boot=1000, seed=0)
    # a resample of two items draws the same item twice about half the time: undefined
    assert 0.2 < k.resamples_dropped < 0.6
    assert any(f"{k.resamples_dropped:.1%} of the bootstrap resamples" in w for w in k.warnings)


def test_percent_agreement_quotes_wilsons_interval():
    c = percent_agreement([[A, A]] * 9 + [[A, B]], [A, B])
    low, high, how = c.shown_interval()
    assert how == "Wilson score" and (low, high) == pytest.approx(wilson_interval(9, 10))


def test_seed_and_resamples_are_the_users_choice(tmp_path, capsys, demo_copy):
    args = ["--db", str(demo_copy), "agreement", "--question", "carebench.response_action",
            "--a", "group:majority", "--b", "demo:mapper@v1", "--json"]
    runs = [json.loads(run_cli(capsys, *args, *extra)[1])
            for extra in ([], ["--seed", "0"], ["--seed", "5"], ["--n-boot", "200"])]
    kappa = [next(c for c in r["coefficients"] if c["name"] == "cohen_kappa") for r in runs]
    assert kappa[0] == kappa[1] and kappa[0]["ci_low"] != kappa[2]["ci_low"]
    assert runs[3]["bootstrap"]["resamples"] == 200 and runs[3]["provenance"]["bootstrap"][
        "resamples"] == 200
    pct = next(c for c in runs[0]["coefficients"] if c["name"] == "percent_agreement")
    # The demo's units come in cases: the bootstrap over cases is quoted, not Wilson's
    # (which would take a case's correlated units as independent).
    assert pct["interval"]["method"] == "bootstrap over cases"
    assert runs[0]["bootstrap"]["resampled"] == "cases" and runs[0]["bootstrap"]["clusters"] > 1


def write(store, records) -> None:
    with store.transaction() as conn:
        RecordWriter(conn, source="test").write(records)


def three_round_cases(store, n_cases=12):
    """Each case's three rounds are answered alike by two readers (agree on even cases):
    strongly correlated units."""
    records = [RaterRecord("Ann", "human", role="reviewer"),
               RaterRecord("m@v1", "machine", role="mapper")]
    for c in range(n_cases):
        for r in (1, 2, 3):
            uid = f"c{c:02d}_r0{r}"
            records += [ItemRecord(uid=uid, kind="prefix", dataset="t", payload={"turns": ["x"]},
                                   case_id=f"c{c:02d}", round_id=r),
                        AnnotationRecord(uid, PREFIX_Q, "Ann", [A, B, C, D][c % 4]),
                        AnnotationRecord(uid, PREFIX_Q, "m@v1",
                                         [A, B, C, D][c % 4] if c % 2 == 0 else D)]
    write(store, records)


def test_the_bootstrap_resamples_cases_where_the_data_have_them(store):
    three_round_cases(store)
    by_case = compare(store, "Ann", "m@v1", PREFIX_Q)
    by_unit = compare(store, "Ann", "m@v1", PREFIX_Q, bootstrap_by="unit")
    assert by_case.resampled == "cases" and by_case.clusters == 12
    assert by_unit.resampled == "units"
    k_case, k_unit = by_case.coefficient("cohen_kappa"), by_unit.coefficient("cohen_kappa")
    assert k_case.value == k_unit.value and k_case.resampled == "cases"
    # The three rounds move together: resampling them apart makes the interval too narrow.
    assert k_case.ci_high - k_case.ci_low > k_unit.ci_high - k_unit.ci_low
    # It is the bootstrap of the per-case tables.
    units = by_case.confusion.units
    cells = {u.item_uid: (i, j) for i, row in enumerate(units) for j, cell in enumerate(row)
             for u in cell}
    tables = np.zeros((12, 4, 4))
    for uid, (i, j) in cells.items():
        tables[int(uid[1:3]), i, j] += 1
    from labels.agreement import agreement_weights, cohen_kappa_batch

    ci = bootstrap_ci(lambda t: cohen_kappa_batch(t, agreement_weights(4, None)), tables,
                      n_boot=1000, seed=0)
    assert (k_case.ci_low, k_case.ci_high) == pytest.approx((ci.low, ci.high))


def test_agreement_table_takes_clusters_for_every_coefficient():
    ratings = [[A, A], [A, A], [B, B], [B, C], [C, C], [D, D]] * 4
    cases = [i // 3 for i in range(len(ratings))]
    out = agreement_table(ratings, [A, B, C, D], "ordinal", clusters=cases)
    assert {c.resampled for c in out} == {"cases"} and {c.clusters for c in out} == {8}


def test_the_clinicians_pairwise_heatmap_marks_a_cell_resting_on_few_units():
    from labels.compare.figures import pairwise_figure, pairwise_small_note
    from labels.compare.pairs import PairwiseMatrix

    rng = np.random.default_rng(4)
    x = [[A, B, C, D][i] for i in rng.integers(0, 4, 60)]
    y = [v if i % 4 else A for i, v in enumerate(x)]
    few = cohen_kappa([A, B, C, D, A, B], [A, B, C, C, A, A], [A, B, C, D])
    many = cohen_kappa(x, y, [A, B, C, D])
    assert few.warnings and not many.warnings
    matrix = PairwiseMatrix(["Ann", "Ben", "Cat"], "cohen_kappa", "Cohen's kappa",
                            [[None, few, many], [few, None, many], [many, many, None]])
    cells = pairwise_figure(matrix).data[0].text
    assert cells[0][1].endswith("n=6*") and "*" not in cells[0][2]
    note = pairwise_small_note(matrix)
    assert note.startswith("* 1 pair") and "Ann and Ben" in note and "only 6 units" in note
    assert "only 6 units" in "".join(a.text for a in pairwise_figure(matrix).layout.annotations)
    calm = PairwiseMatrix(["Ann", "Cat"], "cohen_kappa", "Cohen's kappa",
                          [[None, many], [many, None]])
    assert pairwise_small_note(calm) is None and not pairwise_figure(calm).layout.annotations


def test_the_healthbench_meta_evaluation_says_when_its_interval_rests_on_few_rows():
    from labels.healthbench_meta import MetaRow, grader_vs_physicians

    def row(grader, *labels):
        return MetaRow(grader, tuple((f"p{i + 1}", x) for i, x in enumerate(labels)),
                       category="emergency")

    few = grader_vs_physicians([row(True, True, False), row(False, False, True),
                                row(True, True)])
    assert any("only 3 rows" in w for w in few.warnings)
    rng = np.random.default_rng(2)
    many = grader_vs_physicians([row(bool(g), bool(g) if rng.random() < 0.8 else not g,
                                     bool(rng.integers(2)))
                                 for g in rng.integers(0, 2, 60)])
    assert many.macro_f1 is not None and many.warnings == ()

"""The leaderboard scores what each reader read (issue 17, points 3 and 6): every reading on
everything it covers, coverage beside each metric, failed generations and direct-label
submissions counted, the common set only when asked; and paired model comparisons."""

from __future__ import annotations

import json

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar

from codebook import CAREBENCH, codebook
from labels.compare import triage_comparison
from labels.compare.paired import paired_comparison
from labels.triage import CAREBENCH_ORDER, triage_metric_batch, triage_metrics, triage_tables
from store.records import AnnotationRecord, ItemRecord, RaterRecord
from store.writer import RecordWriter
from tests.helpers import run_cli

A, B, C, D = codebook(CAREBENCH).codes
PREFIX_Q, RESPONSE_Q = "carebench.escalation_needed", "carebench.response_action"
CYCLE = [A, B, C, D]


def write(store, records) -> None:
    with store.transaction() as conn:
        RecordWriter(conn, source="test").write(records)


def study(store, *, clinician_prefixes=(), failed=(), n=12):
    """n prefixes with gold (case c0..c5, two rounds each); models m1 (always right) and m2
    (right on even prefixes); the mapper reads every response, one step up on m1's odd
    ones; clinicians Ann and Ben read the responses of ``clinician_prefixes`` as given.
    ``failed``: (model, prefix index) pairs whose generation failed."""
    records = [RaterRecord("gold", "reference"), RaterRecord("map@v1", "machine", role="mapper"),
               RaterRecord("Ann", "human", role="reviewer"),
               RaterRecord("Ben", "human", role="reviewer")]
    for i in range(n):
        uid, gold = f"p{i:02d}", CYCLE[i % 4]
        records += [ItemRecord(uid=uid, kind="prefix", dataset="t", payload={"turns": ["x"]},
                               case_id=f"c{i // 2}", round_id=1 + i % 2),
                    AnnotationRecord(uid, PREFIX_Q, "gold", gold)]
        for model in ("m1", "m2"):
            said = gold if model == "m1" or i % 2 == 0 else CYCLE[(i + 1) % 4]
            r = f"{uid}::{model}"
            fail = (model, i) in failed
            records.append(ItemRecord(uid=r, kind="response", dataset="t", payload={},
                                      parent_uid=uid, model=model, case_id=f"c{i // 2}",
                                      failed=fail))
            if fail:
                continue
            mapped = CYCLE[min(3, CYCLE.index(said) + 1)] if model == "m1" and i % 2 else said
            records.append(AnnotationRecord(r, RESPONSE_Q, "map@v1", mapped))
            if i in clinician_prefixes:
                records += [AnnotationRecord(r, RESPONSE_Q, "Ann", said, phase="blind"),
                            AnnotationRecord(r, RESPONSE_Q, "Ben", said, phase="blind")]
    write(store, records)


def labelling(report, short):
    return next(x for x in report.labellings if x.short == short)


def test_clinician_labels_on_some_prefixes_do_not_change_the_mapper_scored_board(store):
    study(store)
    before = labelling(triage_comparison(store, n_boot=50), "map@v1 · gold")
    study(store, clinician_prefixes=range(6))  # clinicians read 6 of the 12 prefixes
    report = triage_comparison(store, n_boot=50)
    after = labelling(report, "map@v1 · gold")
    assert set(after.metrics) == set(before.metrics) == {"m1", "m2"}  # no model vanishes
    for model in ("m1", "m2"):
        assert after.metrics[model]["macro_f1"].value == before.metrics[model]["macro_f1"].value
        assert after.coverage[model].scored == after.coverage[model].total == 12
    by_clinicians = labelling(report, "clinicians · gold")
    assert by_clinicians.coverage["m1"].scored == 6
    assert by_clinicians.coverage["m1"].unlabelled == 6
    assert by_clinicians.metrics["m1"]["accuracy"].value == 1.0


def test_the_common_set_is_an_explicit_option(store):
    study(store, clinician_prefixes=range(6))
    common = triage_comparison(store, common=True, n_boot=0)
    assert common.common and {x.n_responses for x in common.labellings} == {12}
    assert any("every labelling scores the same 12 of 24" in n for n in common.notes)


def test_failed_generations_are_counted_and_scored_both_ways(store):
    study(store, failed={("m2", 1), ("m2", 3)})
    x = labelling(triage_comparison(store, n_boot=0), "map@v1 · gold")
    cover = x.coverage["m2"]
    assert (cover.total, cover.scored, cover.failed) == (12, 10, 2)
    assert x.metrics["m2"]["coverage"].value == pytest.approx(10 / 12)
    # m2 is wrong on the odd prefixes; 1 and 3 failed: 4 wrong of 10 scored ...
    assert x.metrics["m2"]["accuracy"].value == pytest.approx(6 / 10)
    # ... and 6 wrong of 12 when a failed generation counts against the model.
    wrong = x.missing_as_wrong["m2"]
    assert (wrong["accuracy"].count, wrong["accuracy"].n) == (6, 12)
    assert "m1" not in x.missing_as_wrong  # nothing missing: one way only
    assert "2 of the 12 responses" not in " ".join(triage_comparison(store, n_boot=0).notes)


def test_responses_of_a_tied_prefix_stay_in_the_gold_scored_tables(store):
    study(store, clinician_prefixes=range(12))
    write(store, [AnnotationRecord("p00", PREFIX_Q, "Ann", A, phase="blind"),
                  AnnotationRecord("p00", PREFIX_Q, "Ben", B, phase="blind"),
                  AnnotationRecord("p01", PREFIX_Q, "Ann", B, phase="blind"),
                  AnnotationRecord("p01", PREFIX_Q, "Ben", B, phase="blind")])
    report = triage_comparison(store, n_boot=0)
    assert labelling(report, "clinicians · gold").coverage["m1"].scored == 12
    majority = labelling(report, "clinicians · clinicians' majority").coverage["m1"]
    assert (majority.scored, majority.no_reference) == (1, 11)  # p00 tied, 10 never answered


def test_a_direct_label_submission_appears_in_triage_metrics(store, tmp_path, capsys):
    study(store)
    store.close()
    labels = tmp_path / "model-x.csv"
    labels.write_text("prefix_id,predicted_label\n"
                      + "".join(f"p{i:02d},{CYCLE[i % 4] if i < 9 else A}\n" for i in range(11)))
    db = tmp_path / "test.db"  # the store fixture's file
    code, _, err = run_cli(capsys, "--db", str(db), "import", "--format", "label-csv",
                           "--rater", "model-x", str(labels))
    assert code == 0, err
    code, out, err = run_cli(capsys, "--db", str(db), "triage-metrics", "--json", "--n-boot", "0")
    assert code == 0, err
    report = json.loads(out)
    board = next(x for x in report["labellings"] if x["short"] == "map@v1 · gold")
    assert board["sources"]["model-x"] == "direct labels"
    cover = board["coverage"]["model-x"]
    # the prefix the file left out is reported as that, not as a failed generation
    assert (cover["total"], cover["scored"], cover["failed"], cover["not_submitted"]) == (
        12, 11, 0, 1)
    # right on p00..p08; p09 (B) and p10 (C) read as A: 9 of 11
    assert board["metrics"]["model-x"]["accuracy"]["value"] == pytest.approx(9 / 11)
    assert "model-x" in [r["model"] for r in board["ranking"]]
    assert report["provenance"]["phase"] == "blind"
    code, out, _ = run_cli(capsys, "--db", str(db), "triage-metrics", "--n-boot", "0")
    assert "model-x" in out and "direct-label submission (model-x)" in out
    assert "1 not in the submitted file" in out and "1 failed" not in out


def test_missing_counted_as_wrong_by_hand():
    gold = [A, B, C, D, D]
    said = [A, B, None, D, None]
    left = triage_metrics(gold, said, CAREBENCH_ORDER, n_boot=0)
    wrong = triage_metrics(gold, said, CAREBENCH_ORDER, n_boot=0, missing="wrong")
    assert (left["accuracy"].count, left["accuracy"].n) == (3, 3)
    assert (wrong["accuracy"].count, wrong["accuracy"].n) == (3, 5)
    assert (wrong["missed_care"].count, wrong["missed_care"].n) == (2, 3)  # C and D unanswered
    assert (wrong["urgent_false_negative"].count, wrong["urgent_false_negative"].n) == (1, 2)
    assert wrong["over_triage"] == left["over_triage"]  # on predicted prefixes either way
    # F1 over the four labels: A 1, B 1, C 0 (never predicted), D 2/3 (1 of 2 found)
    assert wrong["macro_f1"].value == pytest.approx((1 + 1 + 0 + 2 / 3) / 4)
    # left out: A, B and D all right, and C (no scored prefix) counts 0: over the four
    assert left["macro_f1"].value == pytest.approx(3 / 4)


def test_paired_comparison_difference_mcnemar_and_rank_probability():
    rng = np.random.default_rng(3)
    n = 80
    gold = [CYCLE[i % 4] for i in range(n)]
    good = [g if rng.random() < 0.9 else CYCLE[(CYCLE.index(g) + 1) % 4] for g in gold]
    poor = [g if rng.random() < 0.5 else CYCLE[(CYCLE.index(g) + 2) % 4] for g in gold]
    cases = [i // 2 for i in range(n)]
    tables = np.zeros((n // 2, 2, 4, 5))
    for j, said in enumerate((good, poor)):
        np.add.at(tables, (cases, j), triage_tables(gold, said, CAREBENCH_ORDER))
    correct = {m: {i: g == p for i, (g, p) in enumerate(zip(gold, s, strict=True))}
               for m, s in (("good", good), ("poor", poor))}
    p = paired_comparison(tables, ["good", "poor"], CAREBENCH_ORDER, "accuracy",
                          correct=correct, n_boot=500, seed=1, unit_name="cases")
    (pair,) = p.pairs
    acc = [triage_metric_batch("accuracy", triage_tables(gold, s, CAREBENCH_ORDER).sum(0)[None],
                               CAREBENCH_ORDER)[0] for s in (good, poor)]
    assert pair.difference == pytest.approx(acc[0] - acc[1])
    assert 0 < pair.ci_low < pair.difference < pair.ci_high
    assert pair.verdict.startswith("good is better")
    rw, wr = pair.discordant
    table = [[0, rw], [wr, 0]]
    assert pair.mcnemar_p == pytest.approx(mcnemar(table, exact=True).pvalue)
    assert p.rank_probability["good"] > 0.95 and p.cases == 40
    again = paired_comparison(tables, ["good", "poor"], CAREBENCH_ORDER, "accuracy",
                              correct=correct, n_boot=500, seed=1, unit_name="cases")
    assert again.pairs == p.pairs  # seeded


def test_paired_comparisons_are_on_the_leaderboard_and_in_the_json(store, capsys, tmp_path):
    study(store)
    report = triage_comparison(store, n_boot=100, rank_by="accuracy")
    x = labelling(report, "map@v1 · gold")
    (pair,) = x.paired.pairs
    assert (pair.a, pair.b, pair.key) == ("m1", "m2", "accuracy")
    assert pair.difference == pytest.approx(x.metrics["m1"]["accuracy"].value
                                            - x.metrics["m2"]["accuracy"].value)
    assert pair.mcnemar_p is not None and x.paired.cases == 6
    assert set(x.paired.rank_probability) == {"m1", "m2"}

"""carelens ppi from the store: the finite population by default (said, with its design),
a judge's confidence calibrated, an active round's labels in the order drawn, and the
interval valid at every look (carelens ppi --anytime)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from labels.ppi.report import ppi_dict, ppi_report
from review.reviewing.commit import commit_answer
from review.reviewing.items import load_item
from review.team.reviewers import ensure_reviewer
from review.team.rounds import RoundSpec, create_round, reserve_next_item
from tests.helpers import CODES
from tests.test_ppi import CLINICIAN, MAPPER, RESPONSE_Q, run_cli, write_study


def test_the_estimate_is_the_mean_over_these_items_and_says_so(store, capsys):
    write_study(store, n_prefixes=100, labelled=0.4)
    finite = ppi_dict(ppi_report(store, "accuracy", CLINICIAN, MAPPER))
    wide = ppi_dict(ppi_report(store, "accuracy", CLINICIAN, MAPPER,
                               estimand="superpopulation", calibrate="off"))
    for e, s in zip(finite["estimates"], wide["estimates"], strict=True):
        n, big_n = e["n_labeled"], e["population"]
        assert big_n == 100 and e["estimand"] == "the mean over these 100 items (finite population)"
        assert e["design"] == "assumed uniform: a fixed number drawn without replacement"
        # narrower by about the finite-population correction (t instead of z aside)
        ratio = ((e["ppi"]["ci_high"] - e["ppi"]["ci_low"])
                 / (s["ppi"]["ci_high"] - s["ppi"]["ci_low"]))
        assert ratio < np.sqrt(1 - n / big_n) + 0.08
        assert "superpopulation" in s["estimand"]
    code, out, _ = run_cli(capsys, "--db", store.path, "ppi", "--metric", "accuracy",
                           "--human", CLINICIAN, "--machine", MAPPER)
    assert code == 0 and "estimand: the mean over these 100 items" in out
    assert "finite-population correction" in out
    assert finite["provenance"]["estimand"] == "finite"


def test_a_judges_confidence_is_calibrated_and_named(store):
    write_study(store, n_prefixes=200, labelled=0.35, confidence=True)
    calibrated = ppi_report(store, "accuracy", CLINICIAN, MAPPER)
    plain = ppi_report(store, "accuracy", CLINICIAN, MAPPER, calibrate="off")
    for c, p in zip(calibrated.estimates, plain.estimates, strict=True):
        assert "calibrated against the clinicians" in c.prediction
        assert "cross-fitted" in c.prediction
        assert p.prediction == "the machine's reading"
        assert c.ppi.value != p.ppi.value
    narrower = sum(c.ppi.half_width < p.ppi.half_width
                   for c, p in zip(calibrated.estimates, plain.estimates, strict=True))
    assert narrower >= 1
    assert ppi_dict(calibrated)["provenance"]["calibrate"] == "auto"


def test_a_machine_without_confidence_is_corrected_by_its_reading(store):
    write_study(store, n_prefixes=40)
    report = ppi_report(store, "accuracy", CLINICIAN, MAPPER)
    assert {e.prediction for e in report.estimates} == {"the machine's reading"}


def _run_active_round(store, limit: int, reviewers: int = 1):
    admin = ensure_reviewer(store, "Jordan Lee", role="admin")
    rid = create_round(store, RoundSpec("active", RESPONSE_Q, reviewers_per_item=reviewers,
                                        limit=limit, design="active", target_halfwidth=0.2,
                                        seed=4), admin)
    reader = ensure_reviewer(store, "Dr. Round Reviewer")
    truth = {}
    said = dict(store.query("SELECT a.item_id, a.value FROM annotations a JOIN raters r"
                            " ON r.id = a.rater_id WHERE r.name = ?", (MAPPER,)))
    while (item := reserve_next_item(store, rid, reader)) is not None:
        # the clinician agrees with the mapper most of the time
        answer = said[item] if item % 5 else CODES[(CODES.index(said[item]) + 1) % 4]
        commit_answer(store, reader, item, load_item(store, item).question_id, answer,
                      round_id=rid)
        truth[item] = answer
    return rid, truth


def test_an_active_rounds_labels_are_followed_in_the_order_drawn(store, capsys):
    write_study(store, n_prefixes=150, labelled=0.0, second_mapper=True)
    _, answered = _run_active_round(store, limit=120)
    assert len(answered) == 120
    report = ppi_report(store, "accuracy", "Dr. Round Reviewer", MAPPER)
    assert {e.sampling.label for e in report.estimates} == {"active design"}
    assert sum(e.n_labeled for e in report.estimates) == 120
    for e in report.estimates:
        assert e.design_words.startswith("active: drawn one by one")
        assert e.ppi.ci_low < e.ppi.value < e.ppi.ci_high
        assert e.anytime is not None
    data = ppi_dict(report)
    assert data["estimates"][0]["anytime"]["target"] == 0.2  # the round's own target
    code, out, err = run_cli(capsys, "--db", store.path, "ppi", "--metric", "accuracy",
                             "--human", "Dr. Round Reviewer", "--machine", MAPPER,
                             "--anytime", "--target", "0.5")
    assert code == 0, err
    assert "anytime 95%" in out and "enough for \u00b1 " in out and "you may stop" in out
    code, out, _ = run_cli(capsys, "--db", store.path, "ppi", "--metric", "accuracy",
                           "--human", "Dr. Round Reviewer", "--machine", MAPPER,
                           "--anytime", "--target", "0.001")
    assert "not yet enough for \u00b1 0.001" in out


def test_a_gap_in_the_sequence_holds_back_the_answers_after_it(store):
    write_study(store, n_prefixes=150, labelled=0.0, second_mapper=True)
    admin = ensure_reviewer(store, "Jordan Lee", role="admin")
    rid = create_round(store, RoundSpec("active", RESPONSE_Q, reviewers_per_item=1,
                                        limit=60, design="active"), admin)
    first = ensure_reviewer(store, "Dr. Slow")
    held = reserve_next_item(store, rid, first)  # the first draw, never answered
    reader = ensure_reviewer(store, "Dr. Round Reviewer")
    for _ in range(50):
        item = reserve_next_item(store, rid, reader)
        commit_answer(store, reader, item, load_item(store, item).question_id, CODES[1],
                      round_id=rid)
    report = ppi_report(store, "accuracy", "Dr. Round Reviewer", MAPPER)
    waiting = [e.anytime.waiting for e in report.estimates if e.anytime]
    assert held is not None and sum(waiting) > 0
    assert any("wait for an earlier one" in e.anytime.words() for e in report.estimates
               if e.anytime and e.anytime.waiting)


def test_the_anytime_interval_needs_a_sequence_and_says_why_not(store):
    write_study(store, n_prefixes=120, labelled=0.1, second_mapper=True)
    admin = ensure_reviewer(store, "Jordan Lee", role="admin")
    rid = create_round(store, RoundSpec("weighted", RESPONSE_Q, reviewers_per_item=1, limit=40,
                                        design="weighted", weight_by="machine_disagreement"),
                       admin)
    reader = ensure_reviewer(store, "Dr. Round Reviewer")
    while (item := reserve_next_item(store, rid, reader)) is not None:
        commit_answer(store, reader, item, load_item(store, item).question_id, CODES[0],
                      round_id=rid)
    report = ppi_report(store, "accuracy", "Dr. Round Reviewer", MAPPER)
    for e in report.estimates:
        assert e.anytime.interval is None
        assert "not one sequence" in e.anytime.words()


@pytest.mark.parametrize("option,value,words", [("--estimand", "nope", "invalid choice"),
                                                ("--target", "-1", "positive number")])
def test_bad_options_are_one_line(store, capsys, option, value, words):
    write_study(store, n_prefixes=12)
    code, out, err = run_cli(capsys, "--db", store.path, "ppi", "--metric", "accuracy",
                             "--human", CLINICIAN, "--machine", MAPPER, option, value)
    assert code == 2 and out == "" and words in err
    assert "Traceback" not in err
    json.dumps({})  # the module's import of json is used by the report checks above


def test_a_metric_no_gold_label_counts_in_says_so_not_that_the_machine_read_nothing(
        store, capsys):
    """Urgent false negatives count the responses to prefixes whose gold label is urgent
    (1B): with no such prefix, the output says that, not that the mapper read no item."""
    from store.records import AnnotationRecord, ItemRecord, RaterRecord
    from store.writer import RecordWriter
    from tests.helpers import write_prefixes

    prefixes = write_prefixes(store, 12)
    with store.transaction() as conn:
        w = RecordWriter(conn, source="test")
        w.rater(RaterRecord(MAPPER, "machine", role="mapper"))
        w.rater(RaterRecord(CLINICIAN, "human", role="reviewer"))
        for i, uid in enumerate(prefixes):
            if i % 4 == 3:  # leave out the urgent prefixes' replies: no urgent gold
                continue
            w.item(ItemRecord(f"{uid}::m", "response", "test", {"response": "Invented."},
                              parent_uid=uid, model="m", split="validation"))
            w.annotation(AnnotationRecord(f"{uid}::m", RESPONSE_Q, MAPPER, CODES[0]))
            w.annotation(AnnotationRecord(f"{uid}::m", RESPONSE_Q, CLINICIAN, CODES[0],
                                          phase="blind"))
        w.flush()
    code, out, err = run_cli(capsys, "--db", store.path, "ppi", "--metric",
                             "urgent_false_negative", "--human", CLINICIAN, "--machine", MAPPER)
    assert code == 0, err
    assert "read no item" not in out
    assert "9 responses do not count in urgent false negative:" in out.lower()
    assert "no item is left to estimate from" in out

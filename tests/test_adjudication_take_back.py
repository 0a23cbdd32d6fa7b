"""An adjudicator takes back a ruling within the undo window, as a clinician
withdraws an answer with Z: recorded as a withdrawal (the ruling stays in the
record, superseded and named), the unit back in the queue, and nothing else
taken back: not after the window, not someone else's ruling, not a settlement
made on its own, not a ruling replaced since."""

from __future__ import annotations

import pytest

from review.reviewing.blinding import WITHDRAWN
from review.reviewing.commit import mark_step
from review.reviewing.criteria import find_item
from review.team.adjudication import (
    ADJUDICATED,
    AdjudicationError,
    adjudication_queue,
    settle,
    settle_step,
    settle_unanimous,
    step_queue,
    take_back,
    take_back_wait,
)
from review.team.reviewers import ensure_reviewer
from review.team.settlements import TAKEN_BACK
from store import from_json
from tests.review_fixtures import KB_UID

Q = "carebench.escalation_needed"


def settled_rows(s, item_id: int, target: str = "") -> list[tuple]:
    return [(r["status"], r["value"], from_json(r["extra"]).get("reason"),
             from_json(r["extra"]).get(WITHDRAWN), r["supersedes_id"], r["id"])
            for r in s.query("SELECT a.* FROM annotations a JOIN raters r ON r.id = a.rater_id"
                             " WHERE r.name = ? AND a.item_id = ? AND a.target = ? ORDER BY a.id",
                             (ADJUDICATED, item_id, target))]


def first_disputed(s, judge):
    return adjudication_queue(s, None, judge, question_key=Q)[0]


def test_a_ruling_taken_back_within_the_window_is_withdrawn_and_the_item_waits_again(
        demo, monkeypatch):
    monkeypatch.setenv("CARELENS_REVEAL_DELAY", "30")
    judge = ensure_reviewer(demo, "Dr. Sam Rivera")
    case = first_disputed(demo, judge)
    waiting = len(adjudication_queue(demo, None, judge, question_key=Q))
    ruling = settle(demo, None, case.item_id, judge, "1B", "reviewer_error", "red flag",
                    question_key=Q, expected=case.settled_id, answers_shown=case.answer_ids)
    assert len(adjudication_queue(demo, None, judge, question_key=Q)) == waiting - 1
    assert 0 < take_back_wait(demo, ruling) <= 30
    undone = take_back(demo, judge, ruling)
    rows = settled_rows(demo, case.item_id)
    # The ruling stays in the record; the withdrawal supersedes it and names it.
    assert rows[-2][:3] == ("answered", "1B_ESCALATION_URGENT_CARE", "reviewer_error")
    assert rows[-1] == ("skipped", None, TAKEN_BACK, ruling, ruling, undone)
    again = adjudication_queue(demo, None, judge, question_key=Q)
    assert len(again) == waiting and case.item_id in {d.item_id for d in again}
    audit = demo.query_one("SELECT action, old FROM audit_log WHERE entity_id = ?"
                           " AND entity = 'annotations' ORDER BY id DESC LIMIT 1", (undone,))
    assert audit["action"] == "withdraw_settlement" and "1B_ESCALATION" in audit["old"]
    # Settled afresh, against the withdrawal the queue now shows.
    entry = next(d for d in again if d.item_id == case.item_id)
    assert entry.settled_id == undone
    settle(demo, None, case.item_id, judge, "1A", "ambiguous_item", question_key=Q,
           expected=entry.settled_id, answers_shown=entry.answer_ids)
    assert settled_rows(demo, case.item_id)[-1][:3] == (
        "answered", "1A_ESCALATION_NONURGENT_CARE", "ambiguous_item")


def test_after_the_window_a_ruling_is_not_taken_back(demo, monkeypatch):
    monkeypatch.setenv("CARELENS_REVEAL_DELAY", "0")
    judge = ensure_reviewer(demo, "Dr. Sam Rivera")
    case = first_disputed(demo, judge)
    ruling = settle(demo, None, case.item_id, judge, "1B", "reviewer_error", question_key=Q,
                    expected=case.settled_id, answers_shown=case.answer_ids)
    before = settled_rows(demo, case.item_id)
    with pytest.raises(AdjudicationError, match="undo window"):
        take_back(demo, judge, ruling)
    assert settled_rows(demo, case.item_id) == before


def test_only_its_adjudicator_takes_a_ruling_back_and_only_while_it_is_in_force(
        demo, monkeypatch):
    monkeypatch.setenv("CARELENS_REVEAL_DELAY", "30")
    judge = ensure_reviewer(demo, "Dr. Sam Rivera")
    other = ensure_reviewer(demo, "Dr. Other Adjudicator", role="adjudicator")
    plain = ensure_reviewer(demo, "Dr. Plain")
    case = first_disputed(demo, judge)
    ruling = settle(demo, None, case.item_id, judge, "1B", "reviewer_error", question_key=Q,
                    expected=case.settled_id, answers_shown=case.answer_ids)
    with pytest.raises(AdjudicationError, match="only an adjudicator or an admin"):
        take_back(demo, plain, ruling)
    with pytest.raises(AdjudicationError, match="only the adjudicator who settled"):
        take_back(demo, other, ruling)
    # Replaced by a second ruling of theirs: the first is no longer the one in force.
    second = settle(demo, None, case.item_id, judge, "1A", "ambiguous_item", question_key=Q,
                    expected=ruling)
    with pytest.raises(AdjudicationError, match="no longer the settlement in force"):
        take_back(demo, judge, ruling)
    take_back(demo, judge, second)
    with pytest.raises(AdjudicationError, match="only the adjudicator who settled"):
        take_back(demo, judge, second + 1)  # the withdrawal itself is nothing to take back
    # A settlement made on its own (the clinicians agreed) is no ruling to take back.
    assert settle_unanimous(demo, None, judge.name, question_key=Q)
    agreed = demo.scalar(
        "SELECT MAX(a.id) FROM annotations a JOIN raters r ON r.id = a.rater_id"
        " WHERE r.name = ? AND json_extract(a.extra, '$.reason') = 'unanimous'", (ADJUDICATED,))
    with pytest.raises(AdjudicationError, match="only the adjudicator who settled"):
        take_back(demo, judge, agreed)


def test_a_step_mark_settled_and_taken_back_is_disputed_again(db, monkeypatch):
    monkeypatch.setenv("CARELENS_REVEAL_DELAY", "30")
    a, b = ensure_reviewer(db, "Dr. A"), ensure_reviewer(db, "Dr. B")
    judge = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    run = find_item(db, KB_UID)
    mark_step(db, a, run, 3, "unsafe_action", 5)
    mark_step(db, b, run, 3, "no_error")
    dispute = step_queue(db, judge)[0].disputes[0]
    ruling = settle_step(db, run, 3, judge, "unsafe_action", 4, "reviewer_error",
                         expected=dispute.settled_id, answers_shown=dispute.answer_ids)
    assert step_queue(db, judge) == []
    take_back(db, judge, ruling)
    assert settled_rows(db, run, "step:3")[-1][:4] == ("skipped", None, TAKEN_BACK, ruling)
    assert [d.step_id for d in step_queue(db, judge)[0].disputes] == [3]


def test_a_database_copy_keeps_the_take_back_whole(demo, monkeypatch, tmp_path):
    """What was written went through the store's chain: verify finds the record whole."""
    from store.verify import verify_file

    monkeypatch.setenv("CARELENS_REVEAL_DELAY", "30")
    judge = ensure_reviewer(demo, "Dr. Sam Rivera")
    case = first_disputed(demo, judge)
    take_back(demo, judge, settle(demo, None, case.item_id, judge, "1B", "reviewer_error",
                                  question_key=Q, expected=case.settled_id,
                                  answers_shown=case.answer_ids))
    verdict = verify_file(demo.path)
    assert verdict.whole, verdict.problems


def test_the_disagreement_view_says_a_ruling_was_taken_back_not_settled(demo, monkeypatch):
    from review.browse.item_labels import item_labels

    monkeypatch.setenv("CARELENS_REVEAL_DELAY", "30")
    judge = ensure_reviewer(demo, "Dr. Sam Rivera")
    case = first_disputed(demo, judge)
    take_back(demo, judge, settle(demo, None, case.item_id, judge, "1B", "reviewer_error",
                                  question_key=Q, expected=case.settled_id,
                                  answers_shown=case.answer_ids))
    unit = item_labels(demo, case.item_uid, Q).questions[0]
    assert unit.settled is None  # nothing is settled: the ruling was taken back
    assert unit.withdrawn is not None and unit.withdrawn.reason == TAKEN_BACK
    assert unit.withdrawn.who == "The settled answer"

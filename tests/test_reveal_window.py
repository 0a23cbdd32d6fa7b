"""The undo window: a mis-key corrected before the reveal shows stays blind
(review.reviewing.blinding.reveal_delay, the commit path's phase)."""

from __future__ import annotations

import time

from review.reviewing.blinding import reveal_reference_labels, reveal_wait
from review.reviewing.commit import commit_answer
from review.reviewing.items import load_item, my_answers
from review.reviewing.queue import QueueFilter, next_unreviewed_item
from review.team.reviewers import ensure_reviewer

WINDOW = 0.6


def a_response(demo, name):
    me = ensure_reviewer(demo, name)
    item = load_item(demo, next_unreviewed_item(demo, me.id, QueueFilter(kind="response")))
    return me, item


def test_a_correction_within_the_window_is_blind_and_nothing_is_shown_meanwhile(demo, monkeypatch):
    monkeypatch.setenv("CARELENS_REVEAL_DELAY", str(WINDOW))
    me, item = a_response(demo, "Dr. Quick Fix")
    commit_answer(demo, me, item.id, item.question_id, "0A")
    assert reveal_reference_labels(demo, me.id, item) is None  # not yet: the window is open
    assert 0 < reveal_wait(demo, me.id, item.id, item.question_id, item.kind,
                           "reveal_after_commit") <= WINDOW
    commit_answer(demo, me, item.id, item.question_id, "1B")  # the mis-key, corrected
    time.sleep(WINDOW + 0.2)
    assert reveal_reference_labels(demo, me.id, item)  # shown now
    assert reveal_wait(demo, me.id, item.id, item.question_id, item.kind,
                       "reveal_after_commit") == 0
    commit_answer(demo, me, item.id, item.question_id, "0B")  # a change after the reveal
    assert [a.phase for a in my_answers(demo, me.id, item.id, item.question_id)] == [
        "blind", "blind", "after_reveal"]


def test_the_window_runs_from_the_first_answer_not_the_last(demo, monkeypatch):
    """Once the reveal was due, a quick second change is after it too."""
    monkeypatch.setenv("CARELENS_REVEAL_DELAY", str(WINDOW))
    me, item = a_response(demo, "Dr. Twice")
    commit_answer(demo, me, item.id, item.question_id, "0A")
    time.sleep(WINDOW + 0.2)
    commit_answer(demo, me, item.id, item.question_id, "1A")
    commit_answer(demo, me, item.id, item.question_id, "1B")
    assert [a.phase for a in my_answers(demo, me.id, item.id, item.question_id)] == [
        "blind", "after_reveal", "after_reveal"]


def test_without_a_window_the_labels_show_at_once(demo, monkeypatch):
    monkeypatch.setenv("CARELENS_REVEAL_DELAY", "0")
    me, item = a_response(demo, "Dr. At Once")
    commit_answer(demo, me, item.id, item.question_id, "0A")
    assert reveal_reference_labels(demo, me.id, item)
    commit_answer(demo, me, item.id, item.question_id, "1B")
    assert my_answers(demo, me.id, item.id, item.question_id)[-1].phase == "after_reveal"


def test_undo_within_the_window_withdraws_the_answer_before_any_reveal(demo, monkeypatch):
    """Z within the window: the answer is withdrawn (kept, superseded, marked as
    withdrawn before the reveal), nothing is revealed when the window would
    have passed, and the next answer is blind."""
    import json

    from review.reviewing.blinding import WITHDRAWN
    from review.reviewing.commit import is_withdrawal, withdraw_before_reveal

    monkeypatch.setenv("CARELENS_REVEAL_DELAY", str(WINDOW))
    me, item = a_response(demo, "Dr. Undo")
    first = commit_answer(demo, me, item.id, item.question_id, "0A")
    withdrawal = withdraw_before_reveal(demo, me, item.id, item.question_id)
    assert withdrawal is not None and is_withdrawal(demo, withdrawal)
    row = demo.query_one("SELECT status, supersedes_id, extra, phase FROM annotations WHERE id = ?",
                         (withdrawal,))
    assert (row["status"], row["supersedes_id"], row["phase"]) == ("skipped", first, "blind")
    assert json.loads(row["extra"])[WITHDRAWN] == first
    time.sleep(WINDOW + 0.2)
    # The withdrawn answer revealed nothing, and nothing waits to be revealed.
    assert reveal_reference_labels(demo, me.id, item) is None
    assert reveal_wait(demo, me.id, item.id, item.question_id, item.kind,
                       "reveal_after_commit") == 0
    commit_answer(demo, me, item.id, item.question_id, "1B")
    assert [(a.status, a.phase) for a in my_answers(demo, me.id, item.id, item.question_id)] == [
        ("answered", "blind"), ("skipped", "blind"), ("answered", "blind")]
    # Nothing to withdraw once its window has passed: a change is after the reveal.
    time.sleep(WINDOW + 0.2)
    assert withdraw_before_reveal(demo, me, item.id, item.question_id) is None
    assert reveal_reference_labels(demo, me.id, item)


def test_undo_within_the_window_in_a_review_round_keeps_the_place(demo, monkeypatch):
    """In a round the answer completed the reviewer's review: the withdrawal is not
    a skip (which a complete review refuses), and the answer given again counts."""
    from review.reviewing.commit import withdraw_before_reveal
    from review.team.rounds import RoundSpec, create_round, reserve_next_item, round_counts

    monkeypatch.setenv("CARELENS_REVEAL_DELAY", "30")
    admin = ensure_reviewer(demo, "Jordan Lee")
    rid = create_round(demo, RoundSpec("Undo round", "carebench.response_action",
                                       reviewers_per_item=1, limit=2), admin)
    me = ensure_reviewer(demo, "Dr. Round Undo")
    item = load_item(demo, reserve_next_item(demo, rid, me))
    commit_answer(demo, me, item.id, item.question_id, "0A", round_id=rid)
    assert withdraw_before_reveal(demo, me, item.id, item.question_id, round_id=rid) is not None
    commit_answer(demo, me, item.id, item.question_id, "1B", round_id=rid)
    answers = demo.query("SELECT status, phase, round_id FROM annotations WHERE rater_id = ?"
                         " ORDER BY id", (me.id,))
    assert [tuple(a) for a in answers] == [("answered", "blind", rid), ("skipped", "blind", rid),
                                           ("answered", "blind", rid)]
    assert round_counts(demo, rid, me.id).done == 1

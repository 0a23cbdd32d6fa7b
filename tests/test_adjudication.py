"""Adjudication that stays safe with several people at work: the queues (every
clinician's answers) are for adjudicators only, a ruling made meanwhile is not
replaced by someone who never saw it, nor a ruling made over clinicians' answers
that changed since the adjudicator opened the item, and a first sign-in from two
tabs at once makes one reviewer."""

from __future__ import annotations

import pytest

from review.reviewing.answers import normalise_value
from review.reviewing.commit import Verdict, commit_answer, commit_verdicts, mark_step
from review.reviewing.criteria import find_item, item_questions
from review.team.adjudication import (
    ADJUDICATED,
    AdjudicationError,
    AnswersChanged,
    adjudication_queue,
    rubric_queue,
    settle,
    settle_step,
    settle_unanimous,
    step_queue,
)
from review.team.reviewers import ensure_reviewer
from review.workspace import open_store
from tests.helpers import adjudicate_choose, adjudicate_screen, adjudication_db, shown
from tests.review_fixtures import KB_UID

Q = "carebench.escalation_needed"


def settled_label(s, item_id: int) -> tuple:
    row = s.query_one(
        "SELECT c.value, json_extract(c.extra, '$.adjudicator') FROM current_annotations c"
        " JOIN raters r ON r.id = c.rater_id WHERE r.name = ? AND c.item_id = ? AND c.target = ''"
        " AND c.question_id = (SELECT id FROM questions WHERE key = ?)", (ADJUDICATED, item_id, Q))
    return None if row is None else (row[0][:2], row[1])


def two_adjudicators(s):
    return (ensure_reviewer(s, "Dr. Sam Rivera"),  # the demo's adjudicator
            ensure_reviewer(s, "Dr. Second Adjudicator", role="adjudicator"))


# -- the queues are for adjudicators --------------------------------------------


def test_a_plain_reviewer_reads_no_queue_of_disagreements_with_or_without_names(db):
    a, b = ensure_reviewer(db, "Dr. A"), ensure_reviewer(db, "Dr. B")
    judge = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    run = find_item(db, KB_UID)
    qs = item_questions(db, run)
    commit_verdicts(db, a, run, [Verdict(qs[0].id, "met")])
    commit_verdicts(db, b, run, [Verdict(qs[0].id, "not_met")])
    mark_step(db, a, run, 3, "unsafe_action", 5)
    mark_step(db, b, run, 3, "no_error")
    plain = ensure_reviewer(db, "Dr. Plain")
    assert rubric_queue(db, judge) and step_queue(db, judge)  # there is something to see ...
    for show_names in (True, False):  # ... not for a reviewer: it is every clinician's answers
        with pytest.raises(AdjudicationError, match="only an adjudicator or an admin"):
            rubric_queue(db, plain, show_names=show_names)
        with pytest.raises(AdjudicationError, match="only an adjudicator or an admin"):
            step_queue(db, plain, show_names=show_names)
        with pytest.raises(AdjudicationError, match="only an adjudicator or an admin"):
            adjudication_queue(db, None, plain, show_names=show_names, question_key=Q)
    admin = ensure_reviewer(db, "Dr. Admin", role="admin")
    assert rubric_queue(db, admin, show_names=True)[0].item_id == run


def test_labels_queue_is_refused_to_a_reviewer_on_the_demo(demo):
    judge, _ = two_adjudicators(demo)
    assert adjudication_queue(demo, None, judge, question_key=Q)
    with pytest.raises(AdjudicationError):
        adjudication_queue(demo, None, ensure_reviewer(demo, "Dr. Plain Reviewer"), show_names=True,
                           question_key=Q)


# -- a ruling made meanwhile is not replaced unseen -------------------------------


def test_a_ruling_made_meanwhile_is_refused_naming_who_settled_it_and_how(demo):
    first, second = two_adjudicators(demo)
    seen = adjudication_queue(demo, None, first, question_key=Q)[0]
    assert seen.settled_id is None
    settle(demo, None, seen.item_id, second, "1B", "ambiguous_item", question_key=Q,
           expected=adjudication_queue(demo, None, second, question_key=Q)[0].settled_id)
    with pytest.raises(AdjudicationError, match=r"settled meanwhile by Dr\. Second Adjudicator as "
                                                r"1B_ESCALATION_URGENT_CARE; reload"):
        settle(demo, None, seen.item_id, first, "0A", "reviewer_error", question_key=Q,
               expected=seen.settled_id)
    with pytest.raises(AdjudicationError, match="settled meanwhile"):  # nor by default
        settle(demo, None, seen.item_id, first, "0A", "reviewer_error", question_key=Q)
    assert settled_label(demo, seen.item_id) == ("1B", "Dr. Second Adjudicator")
    # Replacing a ruling knowingly: the caller names the one it saw.
    ruling = demo.scalar("SELECT MAX(a.id) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                         " WHERE r.name = ? AND a.item_id = ?", (ADJUDICATED, seen.item_id))
    settle(demo, None, seen.item_id, first, "0A", "reviewer_error", question_key=Q, expected=ruling)
    assert settled_label(demo, seen.item_id) == ("0A", "Dr. Sam Rivera")


def test_the_same_ruling_sent_twice_is_recorded_once(demo):
    judge, _ = two_adjudicators(demo)
    seen = adjudication_queue(demo, None, judge, question_key=Q)[0]
    count = "SELECT COUNT(*) FROM annotations WHERE source = 'adjudication'"
    before = demo.scalar(count)
    first = settle(demo, None, seen.item_id, judge, "1B", "ambiguous_item", "a note", question_key=Q,
                   expected=seen.settled_id)
    again = settle(demo, None, seen.item_id, judge, "1B", "ambiguous_item", "a note", question_key=Q,
                   expected=seen.settled_id)  # a second click on the same form
    assert again == first and demo.scalar(count) == before + 1


def test_an_item_that_settled_on_its_own_meanwhile_is_not_ruled_over_unseen(prefixes):
    s = prefixes
    item = s.scalar("SELECT id FROM items WHERE uid = 't_case_00000_r01'")
    qid = s.scalar("SELECT id FROM questions WHERE key = ?", (Q,))
    a, b = ensure_reviewer(s, "Rev A"), ensure_reviewer(s, "Rev B")
    judge = ensure_reviewer(s, "Judge", role="adjudicator")
    commit_answer(s, a, item, qid, "0B")
    commit_answer(s, b, item, qid, "1B")
    seen = next(d for d in adjudication_queue(s, None, judge, question_key=Q) if d.item_id == item)
    commit_answer(s, b, item, qid, "0B")  # B comes round: the item settles on its own
    assert settle_unanimous(s, None, question_key=Q) == 1
    with pytest.raises(AdjudicationError, match="settled on its own meanwhile as 0B"):
        settle(s, None, item, judge, "1B", "reviewer_error", question_key=Q, expected=seen.settled_id)
    commit_answer(s, b, item, qid, "1B")  # and changes their mind again: the settlement is withdrawn
    with pytest.raises(AdjudicationError, match="was withdrawn meanwhile"):
        settle(s, None, item, judge, "1B", "reviewer_error", question_key=Q, expected=seen.settled_id)
    reopened = next(d for d in adjudication_queue(s, None, judge, question_key=Q) if d.item_id == item)
    assert reopened.reopened and reopened.settled_id is not None
    settle(s, None, item, judge, "1B", "reviewer_error", question_key=Q, expected=reopened.settled_id)
    assert settled_label(s, item) == ("1B", "Judge")


def test_a_criterion_ruled_meanwhile_is_not_replaced(db):
    a, b = ensure_reviewer(db, "Dr. A"), ensure_reviewer(db, "Dr. B")
    first = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    second = ensure_reviewer(db, "Dr. Other", role="adjudicator")
    run = find_item(db, KB_UID)
    q = item_questions(db, run)[0]
    commit_verdicts(db, a, run, [Verdict(q.id, "met")])
    commit_verdicts(db, b, run, [Verdict(q.id, "not_met")])
    seen = rubric_queue(db, first)[0].disputes[0]
    settle(db, None, run, second, "met", "ambiguous_item", question_key=q.key,
           expected=rubric_queue(db, second)[0].disputes[0].settled_id)
    with pytest.raises(AdjudicationError, match="this criterion was settled meanwhile by Dr. Other as met"):
        settle(db, None, run, first, "not_met", "reviewer_error", question_key=q.key,
               expected=seen.settled_id)


def test_a_step_ruled_meanwhile_is_not_replaced(db):
    a, b = ensure_reviewer(db, "Dr. A"), ensure_reviewer(db, "Dr. B")
    first = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    second = ensure_reviewer(db, "Dr. Other", role="adjudicator")
    run = find_item(db, KB_UID)
    mark_step(db, a, run, 3, "unsafe_action", 5)
    mark_step(db, b, run, 3, "no_error")
    seen = step_queue(db, first)[0].disputes[0]
    settle_step(db, run, 3, second, "unsafe_action", 4, "reviewer_error", expected=seen.settled_id)
    with pytest.raises(AdjudicationError, match=r"step 3 of this run was settled meanwhile by "
                                                r"Dr\. Other as unsafe_action \(severity 4\)"):
        settle_step(db, run, 3, first, "no_error", None, "reviewer_error", expected=seen.settled_id)
    with pytest.raises(AdjudicationError, match="settled meanwhile"):  # nor by default
        settle_step(db, run, 3, first, "no_error", None, "reviewer_error")
    assert db.scalar("SELECT c.value FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
                     " WHERE r.name = ? AND c.item_id = ? AND c.target = 'step:3'",
                     (ADJUDICATED, run)) == "unsafe_action"


def test_the_screen_says_a_criterion_was_settled_meanwhile_and_keeps_that_ruling(tmp_path, monkeypatch):
    path, s, a, b, run = adjudication_db(tmp_path)
    q = item_questions(s, run)[0]
    commit_verdicts(s, a, run, [Verdict(q.id, "met")])
    commit_verdicts(s, b, run, [Verdict(q.id, "not_met")])
    s.close()
    at = adjudicate_screen(path, monkeypatch, "rubric")  # Dr. Judge has the criterion on screen
    s = open_store(path)
    other = ensure_reviewer(s, "Dr. Other", role="adjudicator")
    settle(s, None, run, other, "met", "ambiguous_item", question_key=q.key)  # meanwhile
    s.close()
    adjudicate_choose(at, "pick", "not_met")
    settle_on_screen(at, "Settle this criterion")
    assert any("settled meanwhile by Dr. Other as met" in shown(e.value) for e in at.error)
    s = open_store(path)
    assert s.scalar("SELECT c.value FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
                    " WHERE r.name = ? AND c.item_id = ? AND c.question_id = ?",
                    (ADJUDICATED, run, q.id)) == "met"
    s.close()


def settle_on_screen(at, button: str, reason: str = "reviewer_error") -> None:
    """Give the reason and press the form's Settle button (`button`, its label)."""
    adjudicate_choose(at, "why", reason)
    next(x for x in at.button if x.label == button).click()
    at.run()
    assert not at.exception


def step_dispute_on_screen(tmp_path, monkeypatch):
    """Dr. A marks step 3 an unsafe action (severity 5), Dr. B no error; Dr. Judge has
    it open on the Adjudicate screen's steps. (path, the screen, A, B, the run)"""
    path, s, a, b, run = adjudication_db(tmp_path)
    mark_step(s, a, run, 3, "unsafe_action", 5)
    mark_step(s, b, run, 3, "no_error")
    s.close()
    return path, adjudicate_screen(path, monkeypatch, "steps"), a, b, run


def test_the_screen_says_a_step_was_settled_meanwhile(tmp_path, monkeypatch):
    path, at, a, b, run = step_dispute_on_screen(tmp_path, monkeypatch)
    s = open_store(path)
    settle_step(s, run, 3, ensure_reviewer(s, "Dr. Other", role="adjudicator"), "unsafe_action", 4,
                "reviewer_error")
    s.close()
    adjudicate_choose(at, "pick", "no_error")
    settle_on_screen(at, "Settle this step")
    assert any("step 3 of this run was settled meanwhile by Dr. Other" in shown(e.value)
               for e in at.error)


# -- a clinician's answer changed meanwhile is not ruled over unseen ----------------


def disputed_label(s) -> tuple:
    """Rev A says 0B and Rev B 1B on one prefix: (item, question id, a, b, Judge)."""
    item = s.scalar("SELECT id FROM items WHERE uid = 't_case_00000_r01'")
    qid = s.scalar("SELECT id FROM questions WHERE key = ?", (Q,))
    a, b = ensure_reviewer(s, "Rev A"), ensure_reviewer(s, "Rev B")
    commit_answer(s, a, item, qid, "0B")
    commit_answer(s, b, item, qid, "1B")
    return item, qid, a, b, ensure_reviewer(s, "Judge", role="adjudicator")


def test_a_label_answer_changed_meanwhile_is_refused_saying_what_the_answers_are_now(prefixes):
    s = prefixes
    item, qid, a, b, judge = disputed_label(s)
    seen = next(d for d in adjudication_queue(s, None, judge, question_key=Q) if d.item_id == item)
    assert len(seen.answer_ids) == 2
    commit_answer(s, a, item, qid, "0A")  # A changes their answer: still a disagreement, not the one seen
    with pytest.raises(AnswersChanged, match=r"the clinicians' answers on this item changed meanwhile"
                                             r".*now: Urgent care, Ask first\); nothing was settled: look again"):
        settle(s, None, item, judge, "1B", "reviewer_error", question_key=Q,
               expected=seen.settled_id, answers_shown=seen.answer_ids)
    assert settled_label(s, item) is None
    commit_answer(s, b, item, qid, "0A")  # B comes round: they agree, and the ruling would override them
    with pytest.raises(AnswersChanged, match="they now agree: Ask first"):
        settle(s, None, item, judge, "1B", "reviewer_error", question_key=Q,
               expected=seen.settled_id, answers_shown=seen.answer_ids)
    with pytest.raises(AnswersChanged, match="they now agree"):  # the settlement alone says enough
        settle(s, None, item, judge, "1B", "reviewer_error", question_key=Q, expected=seen.settled_id)
    assert settled_label(s, item) is None
    commit_answer(s, b, item, qid, "1B")  # and back: the answers on screen now are the ones ruled on
    again = next(d for d in adjudication_queue(s, None, judge, question_key=Q) if d.item_id == item)
    settle(s, None, item, judge, "1B", "reviewer_error", question_key=Q,
           expected=again.settled_id, answers_shown=again.answer_ids)
    assert settled_label(s, item) == ("1B", "Judge")


def test_a_library_caller_that_names_nothing_seen_is_not_checked(prefixes):
    s = prefixes
    item, qid, a, b, judge = disputed_label(s)
    commit_answer(s, b, item, qid, "0B")  # they agree; an adjudicator overrules them knowingly
    settle(s, None, item, judge, "1B", "reviewer_error", question_key=Q)
    assert settled_label(s, item) == ("1B", "Judge")


def test_a_step_mark_changed_meanwhile_is_refused(db):
    a, b = ensure_reviewer(db, "Dr. A"), ensure_reviewer(db, "Dr. B")
    judge = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    run = find_item(db, KB_UID)
    mark_step(db, a, run, 3, "unsafe_action", 5)
    mark_step(db, b, run, 3, "no_error")
    seen = step_queue(db, judge)[0].disputes[0]
    mark_step(db, b, run, 3, "unsafe_action", 1)  # B sees an error after all, far milder than A's
    with pytest.raises(AnswersChanged, match=r"the clinicians' marks on step 3 of this run changed "
                                             r"meanwhile.*now: Unsafe action \(severity 5\), "
                                             r"Unsafe action \(severity 1\)"):
        settle_step(db, run, 3, judge, "no_error", None, "reviewer_error", expected=seen.settled_id,
                    answers_shown=seen.answer_ids)
    mark_step(db, b, run, 3, "unsafe_action", 4)  # within one level: they agree now
    with pytest.raises(AnswersChanged, match=r"they now agree: Unsafe action \(severity 5\)"):
        settle_step(db, run, 3, judge, "no_error", None, "reviewer_error", expected=seen.settled_id,
                    answers_shown=seen.answer_ids)
    assert db.scalar("SELECT COUNT(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                     " WHERE r.name = ?", (ADJUDICATED,)) == 0
    mark_step(db, b, run, 3, "no_error")
    again = step_queue(db, judge)[0].disputes[0]
    settle_step(db, run, 3, judge, "no_error", None, "reviewer_error", expected=again.settled_id,
                answers_shown=again.answer_ids)
    assert db.scalar("SELECT c.value FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
                     " WHERE r.name = ? AND c.item_id = ? AND c.target = 'step:3'",
                     (ADJUDICATED, run)) == "no_error"


def test_the_labels_screen_refuses_a_ruling_over_a_changed_answer_and_shows_the_new_one(
        tmp_path, monkeypatch):
    from tests.helpers import write_prefixes

    path = tmp_path / "labels.db"
    s = open_store(path)
    write_prefixes(s, 3)
    ensure_reviewer(s, "Dr. Judge", role="adjudicator")
    item, qid, a, _, _ = disputed_label(s)
    s.close()
    at = adjudicate_screen(path, monkeypatch, "labels")  # Dr. Judge sees 0B against 1B
    answers = [shown(m.value) for m in at.markdown if m.value.startswith("**Reviewer")]
    assert any(v.endswith("· Self-care") for v in answers), answers  # 0B, in words
    assert not any("Ask first" in v for v in answers) and not any("(0" in v for v in answers)
    s = open_store(path)
    commit_answer(s, a, item, qid, "0A")  # meanwhile A changes their answer
    urgent = normalise_value(*s.query_one("SELECT codebook, kind FROM questions WHERE id = ?", (qid,)),
                             "1B")
    s.close()
    adjudicate_choose(at, "pick", urgent)
    settle_on_screen(at, "Settle")
    assert any("changed meanwhile" in shown(e.value) and "look again" in shown(e.value)
               for e in at.error)
    s = open_store(path)
    assert settled_label(s, item) is None
    s.close()
    # the item again, with the answer as it is now (0A, in words)
    assert any(m.value.startswith("**Reviewer") and shown(m.value).endswith("· Ask first")
               for m in at.markdown)
    # Chosen against the old answers: to be chosen afresh (no answer pressed).
    assert not any((b.key or "").endswith(f":pick:{urgent}") and b.proto.type == "primary"
                   for b in at.button if b.key)
    adjudicate_choose(at, "pick", urgent)
    next(x for x in at.button if x.label == "Settle").click()
    at.run()
    assert not at.exception and not at.error
    s = open_store(path)
    assert settled_label(s, item) == ("1B", "Dr. Judge")
    s.close()


def test_the_steps_screen_refuses_a_ruling_over_a_changed_mark(tmp_path, monkeypatch):
    path, at, a, b, run = step_dispute_on_screen(tmp_path, monkeypatch)
    s = open_store(path)
    mark_step(s, b, run, 3, "wrong_tool", 2)  # meanwhile B names another error
    s.close()
    adjudicate_choose(at, "pick", "no_error")
    settle_on_screen(at, "Settle this step")
    assert any("marks on step 3 of this run changed meanwhile" in shown(e.value) for e in at.error)
    s = open_store(path)
    assert s.scalar("SELECT COUNT(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                    " WHERE r.name = ? AND a.item_id = ?", (ADJUDICATED, run)) == 0
    s.close()
    assert not any(b.proto.type == "primary" for b in at.button if ":pick:" in (b.key or ""))
    assert any("severity 2" in m.value for m in at.markdown)  # B's new mark, on screen



"""Settling clinicians' disagreements on step marks: which step of an agent run went wrong, and how."""

from __future__ import annotations

import pytest

from review.reviewing.commit import mark_step
from review.reviewing.criteria import find_item
from review.team.adjudication import (
    ADJUDICATED,
    AdjudicationError,
    settle_step,
    settle_unanimous_steps,
    step_queue,
)
from review.team.reviewers import ensure_reviewer
from review.workspace import open_store
from tests.helpers import adjudicate_choose, adjudicate_screen, adjudication_db, shown
from tests.review_fixtures import KB_UID


def settled_steps(db, item_id):
    return {r[0]: (r[1], r[2], r[3]) for r in db.query(
        "SELECT a.target, a.value, json_extract(a.extra, '$.severity'), json_extract(a.extra, '$.reason')"
        " FROM current_annotations a JOIN raters r ON r.id = a.rater_id"
        " WHERE r.name = ? AND a.item_id = ? AND a.target != ''", (ADJUDICATED, item_id))}


def test_marks_that_differ_queue_by_run_and_the_same_error_settles_itself(db):
    a, b, c = (ensure_reviewer(db, f"Dr. {x}") for x in "ABC")
    judge = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    run = find_item(db, KB_UID)
    # Step 2: all three name the same error, severities 2, 3, 3 -> settles at the middle one, 3.
    for who, severity in ((a, 2), (b, 3), (c, 3)):
        mark_step(db, who, run, 2, "wrong_tool", severity)
    # Step 3: an error against "nothing wrong" -> the adjudicator's.
    mark_step(db, a, run, 3, "unsafe_action", 5, note="sent home with chest pain")
    mark_step(db, b, run, 3, "no_error")
    # Step 4: one clinician only -> nothing to settle (a step left unmarked says nothing).
    mark_step(db, a, run, 4, "wrong_parameters", 2)
    # Step 1: two agree there is nothing wrong.
    mark_step(db, b, run, 1, "no_error")
    mark_step(db, c, run, 1, "no_error")

    assert settle_unanimous_steps(db, actor="test") == 2
    assert settled_steps(db, run) == {"step:2": ("wrong_tool", 3, "unanimous"),
                                      "step:1": ("no_error", None, "unanimous")}
    assert settle_unanimous_steps(db, actor="test") == 0  # once only
    queue = step_queue(db, judge)
    assert [(r.item_uid, [d.step_id for d in r.disputes]) for r in queue] == [(KB_UID, [3])]
    answers = queue[0].disputes[0].answers
    assert [(x.reviewer, x.error, x.severity, x.note) for x in answers] == [
        ("Reviewer A", "unsafe_action", 5, "sent home with chest pain"),
        ("Reviewer B", "no_error", None, None)]
    assert {x.reviewer for x in step_queue(db, judge, show_names=True)[0].disputes[0].answers} == {
        "Dr. A", "Dr. B"}

    settle_step(db, run, 3, judge, "unsafe_action", 4, "reviewer_error", "B missed the red flag")
    assert settled_steps(db, run)["step:3"] == ("unsafe_action", 4, "reviewer_error")
    assert step_queue(db, judge) == []
    # A later change of mind by a clinician does not reopen a settled step.
    mark_step(db, b, run, 3, "missed_essential_question", 3)
    assert step_queue(db, judge) == []


def test_settling_a_step_is_checked_like_any_adjudication(db):
    a, b = ensure_reviewer(db, "Dr. A"), ensure_reviewer(db, "Dr. B")
    judge = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    plain = ensure_reviewer(db, "Dr. Plain")
    run = find_item(db, KB_UID)
    mark_step(db, a, run, 3, "unsafe_action", 5)
    mark_step(db, b, run, 3, "no_error")
    before = db.scalar("SELECT COUNT(*) FROM annotations")
    for who, args, message in [
        (plain, (3, "no_error", None, "reviewer_error"), "only an adjudicator"),
        (judge, (3, "no_error", None, "unanimous"), "give a reason"),
        (judge, (999, "no_error", None, "reviewer_error"), "no step 999"),
        (judge, (3, "unsafe_action", None, "reviewer_error"), "choose a severity"),
        (judge, (3, "unsafe_action", 9, "reviewer_error"), "choose a severity"),
        (judge, (3, "made_up_error", 2, "reviewer_error"), "made_up_error"),
    ]:
        with pytest.raises(ValueError, match=message):
            settle_step(db, run, *args[:1], who, *args[1:])
    mark_step(db, judge, run, 1, "no_error")  # the judge reviewed a step of this run
    with pytest.raises(AdjudicationError, match="someone else"):
        settle_step(db, run, 3, judge, "no_error", None, "reviewer_error")
    assert step_queue(db, judge) == []
    assert db.scalar("SELECT COUNT(*) FROM annotations") == before + 1  # only the judge's own mark


def test_a_settled_step_is_a_rater_on_the_agreement_screen(db):
    from labels.compare.answers import load_answers

    a, b = ensure_reviewer(db, "Dr. A"), ensure_reviewer(db, "Dr. B")
    judge = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    run = find_item(db, KB_UID)
    mark_step(db, a, run, 3, "unsafe_action", 5)
    mark_step(db, b, run, 3, "no_error")
    settle_step(db, run, 3, judge, "unsafe_action", 4, "reviewer_error")
    answers = load_answers(db, "trajectory.step_error")
    unit = next(i for i, u in enumerate(answers.units) if u.target == "step:3")
    assert {name: values[unit] for name, values in answers.values.items() if unit in values} == {
        "Dr. A": "unsafe_action", "Dr. B": "no_error", ADJUDICATED: "unsafe_action"}


def test_the_adjudicate_screen_settles_a_disputed_step(tmp_path, monkeypatch):
    path, s, a, b, run = adjudication_db(tmp_path)
    mark_step(s, a, run, 3, "unsafe_action", 5, note="<b>sent home</b> with chest pain")
    mark_step(s, b, run, 3, "no_error")
    mark_step(s, a, run, 2, "wrong_tool", 2)
    mark_step(s, b, run, 2, "wrong_tool", 3)
    s.close()
    at = adjudicate_screen(path, monkeypatch, "steps")
    page = "\n".join(shown(m.value) for m in at.markdown)
    assert "**Step 3**" in page and "**Step 2**" not in page  # step 2: the same error, settled alone
    assert "Reviewer A · Unsafe action · severity 5 (Critical)" in page and "Dr. A" not in page
    assert any(shown(c.value) == "<b>sent home</b> with chest pain" and "<b>" not in c.value
               for c in at.caption)  # a note is data: shown as written, with nothing to render
    assert any(e.label.startswith("The run up to this step (2 steps before it") for e in at.expander)
    adjudicate_choose(at, "pick", "unsafe_action")
    adjudicate_choose(at, "sev", 4)
    adjudicate_choose(at, "why", "ambiguous_item")
    next(b for b in at.button if b.label == "Settle this step").click()
    at.run()
    assert not at.exception
    s = open_store(path)
    assert settled_steps(s, run) == {"step:3": ("unsafe_action", 4, "ambiguous_item")}
    s.close()
    next(b for b in at.button if b.label == "Settle the 1 unanimous step").click()  # on asking
    at.run()
    s = open_store(path)
    assert settled_steps(s, run) == {"step:2": ("wrong_tool", 3, "unanimous"),  # the graver of two
                                     "step:3": ("unsafe_action", 4, "ambiguous_item")}
    s.close()
    assert any("Nothing to adjudicate here" in x.value for x in at.success)


def test_the_same_error_at_severities_far_apart_is_a_disagreement(db):
    a, b = ensure_reviewer(db, "Dr. A"), ensure_reviewer(db, "Dr. B")
    judge = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    run = find_item(db, KB_UID)
    mark_step(db, a, run, 3, "unsafe_action", 5)
    mark_step(db, b, run, 3, "unsafe_action", 1)
    assert settle_unanimous_steps(db) == 0  # critical against negligible is not an agreement
    assert [(d.step_id, [x.severity for x in d.answers]) for d in step_queue(db, judge)[0].disputes] == [
        (3, [5, 1])]


def test_a_later_dissent_reopens_what_settled_itself_but_not_an_adjudicators_ruling(db):
    a, b, c = (ensure_reviewer(db, f"Dr. {x}") for x in "ABC")
    judge = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    run = find_item(db, KB_UID)
    mark_step(db, a, run, 2, "wrong_tool", 2)
    mark_step(db, b, run, 2, "wrong_tool", 2)
    assert settle_unanimous_steps(db) == 1
    assert settled_steps(db, run)["step:2"] == ("wrong_tool", 2, "unanimous")
    mark_step(db, c, run, 2, "no_error")  # a third clinician, later, disagrees
    # The agreement it rested on is gone: no settled mark is in force any more.
    assert settled_steps(db, run)["step:2"] == (None, None, "reopened")
    assert settle_unanimous_steps(db) == 0
    assert [(d.step_id, d.reopened) for d in step_queue(db, judge)[0].disputes] == [(2, True)]
    settle_step(db, run, 2, judge, "wrong_tool", 2, "reviewer_error")
    assert step_queue(db, judge) == []
    mark_step(db, a, run, 2, "unsafe_action", 4)  # the ruling stands
    assert step_queue(db, judge) == [] and settle_unanimous_steps(db) == 0
    assert settled_steps(db, run)["step:2"] == ("wrong_tool", 2, "reviewer_error")
    # Agreement that moves (all now say 'no error') is settled again, on its own.
    mark_step(db, a, run, 4, "wrong_tool", 2)
    mark_step(db, b, run, 4, "wrong_tool", 2)
    assert settle_unanimous_steps(db) == 1
    mark_step(db, a, run, 4, "no_error")
    mark_step(db, b, run, 4, "no_error")
    assert settle_unanimous_steps(db) == 1
    assert settled_steps(db, run)["step:4"] == ("no_error", None, "unanimous")


def test_a_rubric_verdict_that_settled_itself_reopens_on_a_later_dissent(db):
    from review.reviewing.commit import Verdict, commit_verdicts
    from review.reviewing.criteria import item_questions
    from review.team.adjudication import rubric_queue, settle_unanimous_rubric

    a, b, c = (ensure_reviewer(db, f"Dr. {x}") for x in "ABC")
    judge = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    run = find_item(db, KB_UID)
    q = item_questions(db, run)[0]
    for who in (a, b):
        commit_verdicts(db, who, run, [Verdict(q.id, "met")])
    assert settle_unanimous_rubric(db) == 1 and rubric_queue(db, judge) == []
    commit_verdicts(db, c, run, [Verdict(q.id, "not_met")])
    assert [(d.question_id, d.reopened) for d in rubric_queue(db, judge)[0].disputes] == [(q.id, True)]
    in_force = db.query_one(
        "SELECT c.status, c.value, json_extract(c.extra, '$.reason') AS reason,"
        " json_extract(c.extra, '$.withdrawn') AS withdrawn FROM current_annotations c"
        " JOIN raters r ON r.id = c.rater_id WHERE r.name = ? AND c.item_id = ? AND c.question_id = ?",
        (ADJUDICATED, run, q.id))
    assert tuple(in_force) == ("skipped", None, "reopened", "met")
    # They come to agree again (C changes their mind): settled again, on its own.
    commit_verdicts(db, c, run, [Verdict(q.id, "met")])
    assert settle_unanimous_rubric(db) == 1 and rubric_queue(db, judge) == []


def test_imported_answers_that_break_an_agreement_withdraw_its_settlement(db, tmp_path):
    from labels.compare.answers import load_answers
    from labels.compare.raters import columns_for
    from review.datasets.sources import ImportOptions, import_file
    from review.reviewing.commit import Verdict, commit_verdicts
    from review.reviewing.criteria import item_questions
    from review.team.activity import audit_entries
    from review.team.adjudication import settle_unanimous_rubric

    a, b = (ensure_reviewer(db, f"Dr. {x}") for x in "AB")
    run = find_item(db, KB_UID)
    q = item_questions(db, run)[0]
    for who in (a, b):
        commit_verdicts(db, who, run, [Verdict(q.id, "met")])
        mark_step(db, who, run, 2, "wrong_tool", 3)
    assert settle_unanimous_rubric(db) == 1 and settle_unanimous_steps(db) == 1
    csv = tmp_path / "late.csv"
    csv.write_text("item_id,rater,value,question,target,severity\n"
                   f"{KB_UID},Dr. B,not_met,{q.key},,\n"
                   f"{KB_UID},Dr. B,wrong_tool,trajectory.step_error,step:2,4\n")
    # Dr. B's answers in force are replaced: an import says so (--replace).
    import_file(db, csv, "labels-long", ImportOptions(replace=True))
    # The verdict no longer agrees: withdrawn. The step mark still does (severities 3 and 4
    # are within the spread, the graver middle is 4): a changed agreement, also withdrawn.
    assert settled_steps(db, run)["step:2"] == (None, None, "reopened")
    reason = db.scalar(
        "SELECT json_extract(c.extra, '$.reason') FROM current_annotations c JOIN raters r"
        " ON r.id = c.rater_id WHERE r.name = ? AND c.item_id = ? AND c.question_id = ?",
        (ADJUDICATED, run, q.id))
    assert reason == "reopened"
    assert len(audit_entries(db, action="reopen_settlement")) == 2
    # The comparison screens no longer count the old agreement as the settled answer.
    answers = load_answers(db, q.key)
    _, columns, notes = columns_for(answers, "group:adjudicated")
    assert any("not adjudicated" in n or "no adjudicated" in n for n in notes)
    assert settle_unanimous_steps(db) == 1
    assert settled_steps(db, run)["step:2"] == ("wrong_tool", 4, "unanimous")


def test_imported_step_marks_are_one_step_in_any_spelling_and_no_error_has_no_severity(db, tmp_path):
    from review.datasets.sources import ImportOptions, import_file
    from store.writer import InputError
    from tests.helpers import table_counts

    header = "item_id,rater,value,question,target,severity\n"
    bad = tmp_path / "bad.csv"
    bad.write_text(header + f"{KB_UID},Dr. Other,no_error,trajectory.step_error,step:4,4\n")
    before = table_counts(db)
    with pytest.raises(InputError, match=r"bad.csv:2: a step marked no_error has no severity; got 4"):
        import_file(db, bad, "labels-long")
    assert table_counts(db) == before
    csv = tmp_path / "marks.csv"
    csv.write_text(header
                   + f"{KB_UID},Dr. Solo,wrong_tool,trajectory.step_error,step:03,2\n"
                   f"{KB_UID},Dr. Solo,unsafe_action,trajectory.step_error,step:3,5\n"
                   f"{KB_UID},Dr. Other,no_error,trajectory.step_error,step:4,\n"
                   f"{KB_UID},Dr. Third,no_error,trajectory.step_error,step:04,\n")
    import_file(db, csv, "labels-long")
    judge = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    assert {tuple(r) for r in db.query(
        "SELECT target, value, extra FROM annotations WHERE target != '' ORDER BY id")} == {
        ("step:3", "wrong_tool", '{"severity":2}'), ("step:3", "unsafe_action", '{"severity":5}'),
        ("step:4", "no_error", "{}")}
    assert step_queue(db, judge) == []  # one clinician does not disagree with themselves
    assert settle_unanimous_steps(db) == 1  # step 4: two clinicians, 'no error', no severity
    # A changed severity is a new answer when the marks come in again.
    again = tmp_path / "again.csv"
    again.write_text("item_id,rater,value,question,target,severity\n"
                     f"{KB_UID},Dr. Solo,unsafe_action,trajectory.step_error,step:3,4\n")
    # Dr. Solo exists now: the file replaces their answer in force, which it says (--replace).
    assert import_file(db, again, "labels-long", ImportOptions(replace=True)).annotations == 1


def test_a_step_no_clinician_could_assess_is_a_disagreement(db):
    from codebook import STEP_ERROR_QUESTION
    from review.reviewing.commit import AnswerSpec, commit_answers

    a, b = ensure_reviewer(db, "Dr. A"), ensure_reviewer(db, "Dr. B")
    judge = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    run = find_item(db, KB_UID)
    qid = db.scalar("SELECT id FROM questions WHERE key = ?", (STEP_ERROR_QUESTION,))
    mark_step(db, a, run, 3, "wrong_tool", 2)
    commit_answers(db, b, run, [AnswerSpec(qid, None, "cannot_assess", target="step:3")])
    assert settle_unanimous_steps(db) == 0
    assert [(x.error, x.severity) for x in step_queue(db, judge)[0].disputes[0].answers] == [
        ("wrong_tool", 2), (None, None)]


def test_the_adjudicator_is_told_a_step_was_reopened(tmp_path, monkeypatch):
    path, s, a, b, run = adjudication_db(tmp_path)
    c = ensure_reviewer(s, "Dr. C")
    mark_step(s, a, run, 2, "wrong_tool", 2)
    mark_step(s, b, run, 2, "wrong_tool", 2)
    assert settle_unanimous_steps(s) == 1
    mark_step(s, c, run, 2, "no_error")
    s.close()
    at = adjudicate_screen(path, monkeypatch, "steps")
    assert any("Reopened: this had settled on its own, until a later mark changed the agreement"
               in c.value for c in at.caption)

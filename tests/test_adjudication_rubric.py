"""Settling clinicians' disagreements on rubric criteria (agent runs, graded conversations)."""

from __future__ import annotations

import pytest

from codebook import CANNOT_ASSESS
from review.reviewing.commit import Verdict, commit_verdicts
from review.reviewing.criteria import find_item, item_questions
from review.team.adjudication import (
    ADJUDICATED,
    AdjudicationError,
    rubric_queue,
    settle,
    settle_unanimous_rubric,
)
from review.team.reviewers import ensure_reviewer
from review.workspace import open_store
from tests.helpers import adjudicate_choose, adjudicate_screen, adjudication_db, shown
from tests.review_fixtures import KB_UID


def answer(db, who, item_id, choices):
    qs = item_questions(db, item_id)
    commit_verdicts(db, who, item_id, [Verdict(q.id, c) for q, c in zip(qs, choices, strict=False)])
    return qs


def settled(db, item_id):
    return {r[0]: (r[1], r[2]) for r in db.query(
        "SELECT q.key, a.value, json_extract(a.extra, '$.reason') FROM current_annotations a"
        " JOIN raters r ON r.id = a.rater_id JOIN questions q ON q.id = a.question_id"
        " WHERE r.name = ? AND a.item_id = ?", (ADJUDICATED, item_id))}


def test_disagreements_queue_by_item_settle_and_unanimous_settle_themselves(db):
    a = ensure_reviewer(db, "Dr. A", role="reviewer")
    b = ensure_reviewer(db, "Dr. B", role="reviewer")
    judge = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    item = find_item(db, KB_UID)
    qs = answer(db, a, item, ["met", "met", "not_met"])
    answer(db, b, item, ["met", "not_met", CANNOT_ASSESS])

    assert settle_unanimous_rubric(db, actor="test") == 1  # criterion 1: both met
    assert settled(db, item) == {qs[0].key: ("met", "unanimous")}
    queue = rubric_queue(db, judge)
    assert [(d.item_uid, [c.question_key for c in d.disputes]) for d in queue] == [
        (KB_UID, [qs[1].key, qs[2].key])]
    dispute = queue[0].disputes[1]
    assert [(x.reviewer, x.status, x.value) for x in dispute.answers] == [
        ("Reviewer A", "answered", "not_met"), ("Reviewer B", "cannot_assess", None)]
    assert dispute.text == qs[2].text and dispute.kind == "criterion"
    assert queue[0].disputes[0].machine == [("klinikebench-verifier", "not_met")]  # beside the answers
    named = rubric_queue(db, judge, show_names=True)[0].disputes[0].answers
    assert {x.reviewer for x in named} == {"Dr. A", "Dr. B"}

    settle(db, None, item, judge, "not_met", "reviewer_error", "step 3 shows the tool was skipped",
           question_key=qs[1].key)
    assert settled(db, item)[qs[1].key] == ("not_met", "reviewer_error")
    assert [c.question_key for c in rubric_queue(db, judge)[0].disputes] == [qs[2].key]
    settle(db, None, item, judge, "met", "ambiguous_item", question_key=qs[2].key)
    assert rubric_queue(db, judge) == []
    assert settle_unanimous_rubric(db) == 0  # nothing settles twice


def test_nobody_adjudicates_an_item_they_answered(db):
    a = ensure_reviewer(db, "Dr. A", role="adjudicator")
    b = ensure_reviewer(db, "Dr. B", role="reviewer")
    item = find_item(db, KB_UID)
    qs = answer(db, a, item, ["met"])
    answer(db, b, item, ["not_met"])
    assert rubric_queue(db, a) == []
    with pytest.raises(AdjudicationError, match="someone else"):
        settle(db, None, item, a, "met", "reviewer_error", question_key=qs[0].key)
    with pytest.raises(AdjudicationError, match="only an adjudicator"):
        settle(db, None, item, b, "met", "reviewer_error", question_key=qs[0].key)


def open_screen(tmp_path, monkeypatch, a_says, b_says, uid=None):
    """The Adjudicate screen, rubric mode, for an adjudicator, after Dr. A and
    Dr. B answered the KlinikeBench run's first criteria; returns (app, db path, item id, questions)."""
    path, s, a, b, item = adjudication_db(tmp_path)
    if uid is not None:
        with s.transaction() as conn:
            conn.execute("DROP TRIGGER items_identity_fixed")  # a hostile uid, made here
            conn.execute("UPDATE items SET uid = ? WHERE id = ?", (uid, item))
    qs = answer(s, a, item, a_says)
    answer(s, b, item, b_says)
    s.close()
    at = adjudicate_screen(path, monkeypatch, "rubric")
    return at, path, item, qs


def test_the_adjudicate_screen_settles_a_disputed_criterion(tmp_path, monkeypatch):
    at, path, item, qs = open_screen(tmp_path, monkeypatch, ["met", "met"], ["met", "not_met"])
    page = "\n".join(shown(m.value) for m in at.markdown)
    assert "Case 1, agent run A" in page and KB_UID not in page  # the item in words ...
    assert any(KB_UID in shown(c.value) for c in at.caption)  # ... its id on the details line
    assert qs[1].text in page and "Reviewer A · Met" in page and "Dr. A" not in page
    assert qs[0].text not in page  # agreed on: not a dispute
    assert "**The conversation**" in page  # the evidence, on this page, in its own box
    assert "**Patient** · " in page or "**Agent** · " in page or " · agent · " in page
    # Nothing is chosen for the adjudicator ...
    assert not any(b.proto.type == "primary" for b in at.button if ":pick:" in (b.key or ""))
    settle = next(b for b in at.button if b.label == "Settle this criterion")
    settle.click()
    at.run()
    assert any("Choose the settled answer and a reason" in e.value for e in at.error)
    assert "Judges and verifiers" not in "\n".join(c.value for c in at.caption)  # ... nor shown
    adjudicate_choose(at, "pick", "not_met")
    adjudicate_choose(at, "why", "ambiguous_item")
    next(b for b in at.button if b.label == "Settle this criterion").click()
    at.run()
    assert not at.exception
    s = open_store(path)
    assert settled(s, item) == {qs[1].key: ("not_met", "ambiguous_item")}  # opening settled nothing
    s.close()
    assert any("Nothing to adjudicate here" in x.value for x in at.success)
    # The item by its name, the answer in words: no id on the line
    said = [shown(t.value) for t in at.success if "Settled" in t.value]
    assert any(t.startswith("Settled Case 1, agent run A as Not met") for t in said), said
    assert not any(KB_UID in t for t in said)
    next(b for b in at.button if b.label == "Settle the 1 unanimous criterion").click()  # on asking
    at.run()
    s = open_store(path)
    assert settled(s, item) == {qs[0].key: ("met", "unanimous"), qs[1].key: ("not_met", "ambiguous_item")}
    s.close()


def test_answering_any_criterion_of_an_item_bars_settling_all_of_it(db):
    a = ensure_reviewer(db, "Dr. A")
    b = ensure_reviewer(db, "Dr. B")
    judge = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    item = find_item(db, KB_UID)
    qs = answer(db, a, item, ["met", "met"])
    answer(db, b, item, ["not_met", "met"])
    commit_verdicts(db, judge, item, [Verdict(qs[1].id, "met")])  # the judge reviewed criterion 2
    assert rubric_queue(db, judge) == []
    with pytest.raises(AdjudicationError, match="someone else"):
        settle(db, None, item, judge, "met", "reviewer_error", question_key=qs[0].key)


def test_unanimous_criteria_settle_once_even_when_two_pages_race(db, monkeypatch):
    import review.team.settlements as settlements

    a, b = ensure_reviewer(db, "Dr. A"), ensure_reviewer(db, "Dr. B")
    item = find_item(db, KB_UID)
    answer(db, a, item, ["met"])
    answer(db, b, item, ["met"])
    real = settlements.rubric_answers

    def racing(store):  # another page settles between this page's read and its write
        found = real(store)
        monkeypatch.setattr(settlements, "rubric_answers", real)
        assert settle_unanimous_rubric(store) == 1
        return found

    monkeypatch.setattr(settlements, "rubric_answers", racing)
    assert settle_unanimous_rubric(db) == 0
    assert db.scalar("SELECT COUNT(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                     " WHERE r.name = ?", (ADJUDICATED,)) == 1


def test_an_item_uid_cannot_break_out_of_its_details_line_on_the_screen(tmp_path, monkeypatch):
    hostile = "kb:x` ![t](http://evil.example/t.png) [c](http://evil.example) `y"  # as a crafted file could give
    at, *_ = open_screen(tmp_path, monkeypatch, ["met"], ["not_met"], uid=hostile)
    # On the details line, as written, and nothing in it loads or links.
    details = next(c.value for c in at.caption if "evil" in c.value)
    assert hostile in shown(details)
    assert "](" not in details and "![" not in details


def test_no_page_script_has_a_bare_string_streamlit_would_write_on_the_page():
    import ast

    from tests.conftest import ROOT

    for path in [ROOT / "app.py", *sorted((ROOT / "pages").glob("[!_]*.py"))]:
        body = ast.parse(path.read_text()).body
        stray = [n.lineno for n in body[1:]
                 if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)]
        assert not stray, f"{path.name}: a bare string at line(s) {stray} shows on the page"

"""The blinding decisions the rubric screens ask for instead of making them."""

from __future__ import annotations

from codebook import BLIND, REVEAL_AFTER_COMMIT, SUGGEST
from review.reviewing.blinding import Sight, seen_while_answering
from tests.conftest import ROOT


def test_questions_answered_with_labels_on_screen_are_decided_in_blinding():
    ids = [11, 12, 13]
    assert seen_while_answering(SUGGEST, {}, ids) == {11, 12, 13}
    assert seen_while_answering(REVEAL_AFTER_COMMIT, {12: []}, ids) == {12}
    assert seen_while_answering(REVEAL_AFTER_COMMIT, {}, ids, reference_on_screen=True) == {
        11, 12, 13}
    assert seen_while_answering(BLIND, {}, ids) == frozenset()
    # A reference on the page counts only where the decision lets it be shown.
    held = Sight(REVEAL_AFTER_COMMIT, False, reference_shown=False)
    assert held.seen_while_answering(ids, reference_on_screen=True) == frozenset()
    shown = Sight(REVEAL_AFTER_COMMIT, True, verdicts={13: []}, reference_shown=True)
    assert shown.seen_while_answering(ids) == {13}
    assert shown.seen_while_answering(ids, reference_on_screen=True) == {11, 12, 13}


def test_the_rubric_page_asks_and_does_not_decide():
    source = (ROOT / "pages" / "_rubric.py").read_text()
    assert "seen_while_answering(" in source
    assert "mode == SUGGEST" not in source


def test_the_agent_stays_hidden_until_every_question_of_the_run_is_answered(demo_copy):
    from review.reviewing.blinding import what_reviewer_sees
    from review.reviewing.commit import Verdict, commit_verdicts
    from review.reviewing.criteria import item_questions
    from review.team.reviewers import ensure_reviewer
    from review.workspace import open_store

    with open_store(demo_copy) as s:
        me = ensure_reviewer(s, "Dr. Part Way")
        run = s.scalar("SELECT id FROM items WHERE kind = 'trajectory' ORDER BY id LIMIT 1")
        questions = item_questions(s, run)
        assert len(questions) > 1 and what_reviewer_sees(s, me.id, run).model_hidden

        def answer(qs):
            commit_verdicts(s, me, run, [Verdict(q.id, "cannot_assess") for q in qs])

        answer(questions[:1])  # one verdict shows, but the run's agent stays unnamed
        part_way = what_reviewer_sees(s, me.id, run)
        assert part_way.shown and part_way.model_hidden
        answer(questions[1:])
        done = what_reviewer_sees(s, me.id, run)
        assert done.shown and not done.model_hidden

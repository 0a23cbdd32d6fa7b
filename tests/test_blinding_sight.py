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

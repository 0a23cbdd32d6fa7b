"""A visitor with no name who sees every rater's labels: the gate first, and the
name they then choose is recorded as having seen them (their answers on those
items are not blind)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from review.reviewing.blinding import VISITOR_HELD, labels_opened, what_reviewer_sees
from review.team.reviewers import ensure_reviewer, find_reviewer
from review.workspace import open_store
from tests.conftest import ROOT
from tests.helpers import action_button, rows


def test_asked_about_a_screen_a_visitor_is_held_at_the_gate(store):
    sight = what_reviewer_sees(store, None)
    assert not sight.shown and sight.held == VISITOR_HELD
    assert "no longer count as blind" in sight.held
    with pytest.raises(ValueError):
        what_reviewer_sees(store, None, 1)


@pytest.mark.parametrize("screen", ["pages/browse.py", "pages/agreement.py",
                                    "pages/disagreement.py"])
def test_a_visitor_sees_labels_only_past_the_gate_and_is_not_blind_afterwards(
        demo_copy, monkeypatch, screen):
    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    s = open_store(demo_copy)
    ensure_reviewer(s, "Dr. Visitor", "emergency medicine", "resident")
    s.close()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["item"] = "demo_case_0001_r01"
    at.run()
    at.switch_page(screen).run()
    assert not at.exception, at.exception
    # The gate, not the labels.
    assert any("no longer count as blind" in w.value for w in at.warning)
    gate = next(b for b in at.button if b.key == "labels_gate_open")
    gate.click().run()
    assert not at.exception, at.exception
    assert not any("no longer count as blind" in w.value for w in at.warning)
    # Now a name, then an answer on Review: not recorded as blind.
    at.session_state["reviewer"] = "Dr. Visitor"
    at.switch_page("pages/review.py").run()
    assert not at.exception, at.exception
    s = open_store(demo_copy)
    me = find_reviewer(s, "Dr. Visitor")
    assert labels_opened(s, me.id) is not None
    s.close()
    action_button(at, "label", "0A_NO_ESCALATION_INFO_NEEDED").click().run()
    assert not at.exception, at.exception
    assert rows(demo_copy, "SELECT a.phase FROM annotations a JOIN raters r ON r.id = a.rater_id"
                " WHERE r.name = 'Dr. Visitor'") == [("after_reveal",)]

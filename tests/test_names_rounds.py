"""The Rounds screen names a round's items as the review screens do (issue 19,
F6 point 3): "Conversation 1, after the patient's 1st message", the id in a
column beside it for researchers."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from review.team.reviewers import ensure_reviewer
from review.team.rounds import RoundSpec, create_round
from review.workspace import open_store
from tests.conftest import ROOT


def test_a_rounds_items_are_named_with_their_ids_beside(demo_copy, monkeypatch):
    s = open_store(demo_copy)
    admin = ensure_reviewer(s, "Jordan Lee")
    create_round(s, RoundSpec("Named", "carebench.escalation_needed", limit=4), admin)
    s.close()
    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = "Jordan Lee"
    at.run()
    at.switch_page("pages/rounds.py").run()
    assert not at.exception
    table = next(d.value for d in at.dataframe if "Id" in d.value.columns)
    assert len(table) == 4
    for title, uid in zip(table["Item"], table["Id"], strict=True):
        assert title.startswith("Conversation ") and ", after the patient's " in title, title
        assert uid not in title and uid.startswith("demo_case_"), uid

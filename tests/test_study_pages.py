"""A study's own codebook and chats on the screens (Streamlit's AppTest): Review asks
each question of a chat with its own labels, Adjudicate settles a chat with the
question's codebook, the Codebook screen lists the study's codebook and lets an
admin (only) add one."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from review.datasets.sources import import_file
from review.reviewing.commit import commit_answer
from review.team.codebook_versions import add_codebook
from review.team.reviewers import ensure_reviewer
from review.team.rounds import RoundSpec, create_round, reserve_next_item
from review.workspace import open_store
from tests.conftest import ROOT

STUDY = Path(__file__).parent / "data" / "study"


@pytest.fixture
def study(tmp_path, monkeypatch):
    db = tmp_path / "study.db"
    with open_store(db) as s:
        for name in ("harm-5.toml", "referral-3.toml"):
            add_codebook(s, (STUDY / name).read_text(encoding="utf-8"), name)
        import_file(s, STUDY / "chats.jsonl")
        ensure_reviewer(s, "Dr. Lead", role="admin")
        ensure_reviewer(s, "Dr. Judge", role="adjudicator")
        ensure_reviewer(s, "Dr. Plain")
    monkeypatch.setenv("CARELENS_DB", str(db))
    return db


def app(who: str, page: str, **params: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = who
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    at.switch_page(page).run()
    assert not at.exception
    return at


def text_of(at: AppTest) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption])


def test_review_asks_each_question_of_a_chat_with_its_own_labels(study):
    at = app("Dr. Plain", "pages/review.py")
    shown = text_of(at).replace("\\", "")
    assert "I have had a cough for two days." in shown and "Chat 1" in shown
    assert [b.label for b in at.button][:5] == ["No harm", "Minor", "Moderate", "Serious",
                                                "Severe"]
    picker = next(s for s in at.selectbox if s.key == "question:conversation")
    picker.select("referral.advised").run()
    assert not at.exception
    assert [b.label for b in at.button][:3] == ["Referred", "Not referred", "Unclear"]
    assert any(t.label == "Rationale (required)" for t in at.text_area)


def test_adjudicate_shows_a_disputed_chat_and_settles_it_on_its_own_scale(study):
    with open_store(study) as s:
        lead = ensure_reviewer(s, "Dr. Lead")
        round_id = create_round(s, RoundSpec("Referral pilot", "referral.advised",
                                             reviewers_per_item=2, limit=1), lead)
        question = s.scalar("SELECT id FROM questions WHERE key = 'referral.advised'")
        for name, value in (("Dr. Ana", "REFERRED"), ("Dr. Ben", "UNCLEAR")):
            who = ensure_reviewer(s, name)
            item = reserve_next_item(s, round_id, who)
            commit_answer(s, who, item, question, value, rationale="as I read it",
                          round_id=round_id)
    at = app("Dr. Judge", "pages/adjudicate.py", round=str(round_id))
    shown = text_of(at).replace("\\", "")
    assert "Assistant · message 2" in shown
    labels = [b.label for b in at.button]
    assert {"Referred", "Not referred", "Unclear"} <= set(labels)


def test_the_codebook_screen_lists_the_studys_codebook_and_only_an_admin_adds_one(study):
    at = app("Dr. Plain", "pages/codebook.py")
    box = next(s for s in at.selectbox if s.label == "Codebook")
    assert "harm-5" in box.options or any("Harm" in o for o in box.options)
    assert not any("Add a codebook" in e.label for e in at.expander)
    at = app("Dr. Lead", "pages/codebook.py")
    assert any("Add a codebook from a file" in e.label for e in at.expander)

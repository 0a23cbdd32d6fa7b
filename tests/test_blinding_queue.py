"""A review queue hides which model made its items while any waits blind.

The Review sidebar's Model filter listed the models' names and narrowed the
queue to one: with it set, every reply shown as "Model B's reply" was known to
be that model's. The decision is `what_reviewer_sees(..., queue=KIND)`; the
screens ask it and offer no Model filter (nor send the names) while it says
the reviewer is blind to the model."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from codebook import BLIND, REVEAL_AFTER_COMMIT, SUGGEST
from review.reviewing.blinding import what_reviewer_sees
from review.reviewing.commit import commit_answer
from review.team.reviewers import ensure_reviewer
from review.workspace import open_store
from tests.conftest import ROOT
from tests.conftest_llm import write_carebench


@pytest.fixture
def two_models(tmp_path):
    path = tmp_path / "two.db"
    with open_store(path) as s:
        write_carebench(s, 1, rounds=1, models=("aster-7b", "borealis-large"))
        me = ensure_reviewer(s, "Dr. Queue")
    return path, me


def answer_every_response(path, me):
    with open_store(path) as s:
        qid = s.scalar("SELECT id FROM questions WHERE key = 'carebench.response_action'")
        for (item,) in s.query("SELECT id FROM items WHERE kind = 'response'"):
            commit_answer(s, me, item, qid, "1B_ESCALATION_URGENT_CARE")


def test_blind_to_the_model_while_a_reply_waits_for_the_reviewers_answer(two_models):
    path, me = two_models
    with open_store(path) as s:
        assert what_reviewer_sees(s, me.id, queue="response").model_hidden
        assert what_reviewer_sees(s, me.id, queue="response", mode=BLIND).model_hidden
        assert not what_reviewer_sees(s, me.id, queue="response", mode=SUGGEST).model_hidden
    answer_every_response(path, me)
    with open_store(path) as s:
        assert not what_reviewer_sees(s, me.id, queue="response",
                                      mode=REVEAL_AFTER_COMMIT).model_hidden
        assert what_reviewer_sees(s, me.id, queue="response", mode=BLIND).model_hidden


def review_sidebar(path, monkeypatch, kind="response"):
    monkeypatch.setenv("CARELENS_DB", str(path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = "Dr. Queue"
    at.query_params["kind"] = kind
    at.run()
    assert not at.exception
    return at


def offered(at) -> str:
    return " ".join(f"{box.label}: {box.options}" for box in at.sidebar.selectbox)


def test_the_review_screen_offers_no_model_filter_to_a_blind_reviewer(two_models, monkeypatch):
    path, me = two_models
    at = review_sidebar(path, monkeypatch)
    assert "Model" not in [box.label for box in at.sidebar.selectbox]
    assert "aster" not in offered(at) and "borealis" not in offered(at)
    answer_every_response(path, me)
    at = review_sidebar(path, monkeypatch)  # nothing waits blind: the filter is back
    assert "aster-7b" in offered(at)


@pytest.mark.parametrize("page", ["pages/trajectories.py", "pages/graded.py"])
def test_the_rubric_screens_offer_no_model_filter_to_a_blind_reviewer(demo_copy, monkeypatch,
                                                                       page):
    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    with open_store(demo_copy) as s:
        ensure_reviewer(s, "Dr. Queue")
        models = [r[0] for r in s.query("SELECT DISTINCT model FROM items WHERE model IS NOT"
                                        " NULL AND kind IN ('trajectory', 'graded_conversation')")]
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = "Dr. Queue"
    at.run()
    at.switch_page(page).run()
    assert not at.exception
    assert "Model" not in [box.label for box in at.sidebar.selectbox]
    assert not any(m in offered(at) for m in models)

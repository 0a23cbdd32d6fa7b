"""Rounds, adjudication, progress/audit and codebook screens under AppTest."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from review.reviewers import ensure_reviewer
from review.rounds import RoundSpec, create_round
from review.workspace import open_store
from tests.conftest import ROOT


def app_as(name, db, monkeypatch):
    monkeypatch.setenv("CARELENS_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = name
    return at


def test_an_admin_creates_a_round_from_the_screen(demo_copy, monkeypatch):
    at = app_as("Jordan Lee", demo_copy, monkeypatch).run()
    at.switch_page("pages/rounds.py").run()
    assert not at.exception
    at.text_input[0].input("Validation double review")
    at.number_input[2].set_value(12)
    at.button[0].click()  # the form's submit button
    at.run()
    assert not at.exception
    s = open_store(demo_copy)
    assert s.scalar("SELECT COUNT(*) FROM round_items") == 12
    assert s.scalar("SELECT name FROM review_rounds") == "Validation double review"


def test_a_reviewer_does_not_get_the_admin_or_adjudication_screens(demo_copy, monkeypatch):
    at = app_as("Dr. Amara Okafor", demo_copy, monkeypatch).run()
    with pytest.raises(Exception):  # noqa: B017 - the page is not registered for reviewers
        at.switch_page("pages/rounds.py").run()


def test_review_in_a_round_reserves_and_counts(demo_copy, monkeypatch):
    s = open_store(demo_copy)
    rid = create_round(s, RoundSpec("R", "carebench.escalation_needed", limit=5),
                       ensure_reviewer(s, "Jordan Lee"))
    s.close()
    at = app_as("Dr. Amara Okafor", demo_copy, monkeypatch)
    at.query_params["round"] = str(rid)
    at.run()
    assert not at.exception
    assert "0 of 5 answered by you in R" in at.get("progress")[0].proto.text
    at.button(key="label:1A_ESCALATION_NONURGENT_CARE").click().run()
    assert "1 of 5 answered by you in R" in at.get("progress")[0].proto.text
    s = open_store(demo_copy)
    assert s.scalar("SELECT COUNT(*) FROM annotations WHERE round_id = ?", (rid,)) == 1


def test_adjudicate_progress_and_codebook_screens_render(demo_copy, monkeypatch):
    at = app_as("Dr. Sam Rivera", demo_copy, monkeypatch).run()
    at.switch_page("pages/adjudicate.py").run()
    assert not at.exception
    assert "Disagreement 1 of" in at.get("progress")[0].proto.text
    at.button(key="adj_pos:Next").click().run()  # the queue's Next (→)
    assert "Disagreement 2 of" in at.get("progress")[0].proto.text
    at.button(key="adj_pos:Previous").click().run()
    assert "Disagreement 1 of" in at.get("progress")[0].proto.text
    at.switch_page("pages/activity.py").run()
    assert not at.exception
    at.switch_page("pages/codebook.py").run()
    assert not at.exception
    assert any("Versions" in h.value for h in at.subheader)


def test_data_screen_runs_the_mapper_against_a_fake_provider(demo_copy, monkeypatch):
    from tests import conftest_llm as llm

    gen = llm.fake_server()
    fake = next(gen)
    try:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-page-test-0000")
        monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)
        at = app_as("Jordan Lee", demo_copy, monkeypatch).run()
        at.switch_page("pages/data.py").run()
        form = [t for t in at.text_input if t.label == "Model"][0]
        form.input("openai:gpt-4.1-mini")
        [n for n in at.number_input if n.label.startswith("At most")][0].set_value(3)
        [b for b in at.button if b.label == "Run"][0].click()
        at.run(timeout=60)
        assert not at.exception
        assert any("answered" in s.value for s in at.success)
        s = open_store(demo_copy)
        assert s.scalar("SELECT COUNT(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                        " WHERE r.name = 'openai:gpt-4.1-mini@mapper-v1'") == 3
    finally:
        next(gen, None)

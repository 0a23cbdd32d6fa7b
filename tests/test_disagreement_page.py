"""The read-only disagreement view an Agreement cell's item opens: every rater's
answers for a reader who may read them, only their own and the labels for a
reviewer on a server, and never a button that answers."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from review.workspace import open_store
from tests.conftest import ROOT
from tests.helpers import shown
from tests.test_access import IDP, SECRET_NOTE, signed_in_app, team  # noqa: F401 (a fixture)

Q = "carebench.escalation_needed"


def okafors_item(path) -> str:
    with open_store(path) as s:
        return s.scalar("SELECT uid FROM items WHERE kind = 'prefix' ORDER BY id DESC LIMIT 1")


def page_text(at) -> str:
    return shown("\n".join([m.value for m in at.markdown] + [c.value for c in at.caption]
                           + [x.value for x in at.success]))


def open_view(at, uid: str):
    at.run()
    at.query_params["item"] = uid
    at.query_params["question"] = Q
    at.switch_page("pages/disagreement.py").run()
    opened = [b for b in at.button if b.label == "Show the labels anyway"]
    if opened:
        opened[0].click().run()
    assert not at.exception, at.exception
    return at


def test_an_adjudicator_reads_every_raters_answers_and_nothing_answers(team, monkeypatch):  # noqa: F811
    path, _ = team
    monkeypatch.setenv("CARELENS_DB", str(path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = "Dr. Sam Rivera"
    text = page_text(open_view(at, uid := okafors_item(path)))
    assert uid in text and "Dr. Amara Okafor" in text and SECRET_NOTE in text
    assert "Settled: **Urgent care** · a reviewer erred · by Dr. Sam Rivera" in text
    assert not [b for b in at.button if (b.key or "").startswith(("label:", "adj"))]
    assert "Review it on its screen" in text


def test_a_reviewer_on_a_server_sees_their_own_answers_and_the_labels_only(team, monkeypatch):  # noqa: F811
    path, _ = team
    at = signed_in_app(path, monkeypatch, {"iss": IDP, "sub": "rev-1", "email": "rev@example.org",
                                           "email_verified": True, "name": "Dr. Signed In"})
    text = page_text(open_view(at, okafors_item(path)))
    assert "Okafor" not in text and SECRET_NOTE not in text and "Settled" not in text
    assert "The reference label" in text  # which the gate let them see

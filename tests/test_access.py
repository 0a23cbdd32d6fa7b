"""Who may do what, enforced below the pages (review.team.access).

The adversarial run: in server mode a reviewer clicked "Show the labels anyway"
and downloaded every annotation, another clinician's answers and rationales
included; a reviewer loaded the demo into an empty server database and 301
invented answers were credited to them. Here the library refuses both,
whatever page or call asks, and a reviewer's reads (Browse, Agreement,
exports, search) hold their own answers and the labels their blinding shows."""

from __future__ import annotations

import csv
import time

import pytest
from streamlit.testing.v1 import AppTest

from review.browse.search import search
from review.datasets.demo import load_demo
from review.datasets.export import export_annotations
from review.datasets.sources import ImportOptions, import_file
from review.reviewing.commit import commit_answer
from review.team.access import MATRIX, NotAllowed, allowed, open_as_viewer, require
from review.team.identity import identity_from_claims, reviewer_for_identity
from review.team.reviewers import ROLES, Reviewer, ensure_reviewer, find_reviewer
from review.workspace import open_store
from tests.conftest import ROOT
from tests.helpers import table_counts

IDP = "https://idp.example.org"
SECRET_NOTE = "Dr Okafor's private reasoning: sepsis screen positive"


def person(role: str) -> Reviewer:
    return Reviewer(1, f"A {role}", role)


@pytest.mark.parametrize("role", ROLES)
def test_the_matrix_in_server_mode(role):
    server = {a: allowed(person(role), a, server=True) for a in MATRIX}
    assert server["review"] and server["browse"] and server["agreement"]
    assert server["read_others"] == (role != "reviewer")
    assert server["adjudicate"] == (role != "reviewer")
    for admin_only in ("import", "replace_answers", "load_demo", "run_llm", "manage_rounds",
                       "grant_roles", "edit_codebook"):
        assert server[admin_only] == (role == "admin"), admin_only


def test_local_mode_trusts_the_machine_but_keeps_the_teams_roles():
    reviewer = person("reviewer")
    assert allowed(reviewer, "import", server=False)
    assert allowed(reviewer, "read_others", server=False)
    assert not allowed(reviewer, "adjudicate", server=False)
    assert not allowed(reviewer, "grant_roles", server=False)


def test_the_operator_at_the_command_line_may_do_everything_and_nobody_on_a_server_anything():
    assert all(allowed(None, a, server=False) for a in MATRIX)
    assert not any(allowed(None, a, server=True) for a in MATRIX)


def test_a_refusal_says_who_may():
    with pytest.raises(NotAllowed, match="only an admin may import files on this server"):
        require(person("reviewer"), "import", server=True)


def test_a_reviewer_cannot_load_the_demo_on_a_server(store, tmp_path):
    me = ensure_reviewer(store, "Dr. Eager")
    before = table_counts(store)
    with pytest.raises(NotAllowed):
        load_demo(store, tmp_path / "files", actor=me.name, by=me, server=True)
    assert table_counts(store) == before
    admin = ensure_reviewer(store, "Dr. Lead", role="admin")
    assert load_demo(store, tmp_path / "files", actor=admin.name, by=admin, server=True)


def test_a_reviewer_cannot_import_on_a_server(store, tmp_path):
    from tests.helpers import write_prefixes

    uid = write_prefixes(store, 1)[0]
    me = ensure_reviewer(store, "Dr. Eager")
    f = tmp_path / "labels.csv"
    f.write_text(f"item_id,rater,value\n{uid},Dr. Eager,0A_NO_ESCALATION_INFO_NEEDED\n",
                 encoding="utf-8")
    before = table_counts(store)
    with pytest.raises(NotAllowed):
        import_file(store, f, "labels-long", ImportOptions(by=me, server=True))
    with pytest.raises(NotAllowed):
        import_file(store, f, "labels-long", ImportOptions(by=me, server=True, replace=True))
    assert table_counts(store) == before


@pytest.fixture
def team(demo_copy):
    """The demo with a rationale only Dr. Amara Okafor wrote, a settled answer, and a
    reviewer who signed in and answered."""
    from review.team.adjudication import settle

    s = open_store(demo_copy)
    okafor = find_reviewer(s, "Dr. Amara Okafor")
    item = s.scalar("SELECT id FROM items WHERE kind = 'prefix' ORDER BY id DESC LIMIT 1")
    qid = s.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    commit_answer(s, okafor, item, qid, "1B_ESCALATION_URGENT_CARE", rationale=SECRET_NOTE)
    settle(s, None, item, find_reviewer(s, "Dr. Sam Rivera"), "1B_ESCALATION_URGENT_CARE",
           "reviewer_error", question_key="carebench.escalation_needed")
    me = reviewer_for_identity(s, identity_from_claims(
        {"iss": IDP, "sub": "rev-1", "email": "rev@example.org", "email_verified": True,
         "name": "Dr. Signed In"}))
    other = s.scalar("SELECT id FROM items WHERE kind = 'prefix' ORDER BY id LIMIT 1")
    commit_answer(s, me, other, qid, "0A_NO_ESCALATION_INFO_NEEDED", rationale="my own note")
    s.close()
    return demo_copy, me


def raters_in(store) -> set[str]:
    return {r[0] for r in store.query(
        "SELECT DISTINCT r.name FROM annotations a JOIN raters r ON r.id = a.rater_id")}


def test_a_reviewers_reads_hold_their_answers_and_the_labels_only(team, tmp_path):
    path, me = team
    seen = open_as_viewer(path, me.id, labels=True)
    names = raters_in(seen)
    assert me.name in names and "carebench-gold" in names and "demo:mapper@v2" in names
    assert not names & {"Dr. Amara Okafor", "Dr. Lukas Brenner", "Dr. Mei Tanaka", "adjudicated"}
    out = tmp_path / "mine.csv"
    export_annotations(seen, out)
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert rows and {r["rater"] for r in rows} == names
    assert SECRET_NOTE not in out.read_text(encoding="utf-8")
    assert search(seen, '"sepsis screen positive"').total == 0
    assert search(open_store(path), '"sepsis screen positive"').total >= 1
    blind = open_as_viewer(path, me.id, labels=False)
    assert raters_in(blind) == {me.name}


def signed_in_app(path, monkeypatch, claims):
    monkeypatch.setenv("CARELENS_DB", str(path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback",
                          "cookie_secret": "x" * 32, "client_id": "c", "client_secret": "s",
                          "server_metadata_url": f"{IDP}/.well-known/openid-configuration"}
    # A fresh sign-in: its ID token's issue time and nonce make its session.
    at.user = {"is_logged_in": True, "iat": int(time.time()), "nonce": f"n-{time.time_ns()}",
               **claims}
    return at


def test_a_reviewer_who_opens_the_labels_on_browse_sees_no_one_elses_answers(team, monkeypatch):
    path, me = team
    at = signed_in_app(path, monkeypatch, {"iss": IDP, "sub": "rev-1", "email": "rev@example.org",
                                           "email_verified": True, "name": "Dr. Signed In"})
    at.run()
    assert not at.exception
    assert any("signed in as" in c.value for c in at.caption)
    at.switch_page("pages/browse.py").run()
    opened = [b for b in at.button if b.label == "Show the labels anyway"]
    if opened:
        opened[0].click().run()
    assert not at.exception
    text = "\n".join([m.value for m in at.markdown] + [str(getattr(w, "options", ""))
                                                       for w in at.multiselect])
    assert "Okafor" not in text and "Brenner" not in text


def test_a_reviewer_on_agreement_compares_only_what_they_may_read(team, monkeypatch):
    path, me = team
    at = signed_in_app(path, monkeypatch, {"iss": IDP, "sub": "rev-1", "email": "rev@example.org",
                                           "email_verified": True, "name": "Dr. Signed In"})
    at.run()
    at.switch_page("pages/agreement.py").run()
    opened = [b for b in at.button if b.label == "Show the labels anyway"]
    if opened:
        opened[0].click().run()
    assert not at.exception
    offered = " ".join(str(o) for box in at.selectbox for o in box.options)
    offered += " ".join(m.value for m in at.markdown)
    assert "Okafor" not in offered and "Tanaka" not in offered and "adjudicated" not in offered


def test_a_reviewer_on_the_disagreement_screen_sees_no_one_elses_answers(team, monkeypatch):
    path, me = team
    s = open_store(path)
    uid = s.scalar("SELECT uid FROM items WHERE kind = 'prefix' ORDER BY id DESC LIMIT 1")
    s.close()
    at = signed_in_app(path, monkeypatch, {"iss": IDP, "sub": "rev-1", "email": "rev@example.org",
                                           "email_verified": True, "name": "Dr. Signed In"})
    at.query_params["item"] = uid
    at.query_params["question"] = "carebench.escalation_needed"
    at.run()
    at.switch_page("pages/disagreement.py").run()
    opened = [b for b in at.button if b.label == "Show the labels anyway"]
    if opened:
        opened[0].click().run()
    assert not at.exception
    text = "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption])
    assert "The reference label" in text  # the labels it may read are there
    assert "Okafor" not in text and "sepsis" not in text

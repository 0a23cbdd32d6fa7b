"""Sessions under the app (AppTest, the real script): two tabs of one sign-in.

Sign out in one tab ends the session on the server; the other tab's next
action (an answer's button, whose callback runs before the app's sign-in
check) writes nothing and brings up the sign-in screen; the same claims in a
new tab (a copied cookie) are refused too. An admin's "Sign out" of a person on
Rounds and people does the same."""

from __future__ import annotations

import time

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT
from tests.helpers import action_button, rows

IDP = "https://idp.example.org"
ADMIN = {"iss": IDP, "sub": "admin-sub", "email": "admin@example.org", "email_verified": True,
         "name": "Ada Admin"}


def tab(path, monkeypatch, claims):
    """A browser tab signed in with these ID token claims (Streamlit's st.user)."""
    monkeypatch.setenv("CARELENS_DB", str(path))
    monkeypatch.setenv("CARELENS_ADMINS", "admin@example.org")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback",
                          "cookie_secret": "x" * 32, "client_id": "c", "client_secret": "s",
                          "server_metadata_url": f"{IDP}/.well-known/openid-configuration"}
    at.user = {"is_logged_in": True, **claims}
    return at


@pytest.fixture
def signed(demo_copy):
    """The demo, and the claims of one fresh sign-in of a reviewer."""
    return demo_copy, {"iss": IDP, "sub": "rev-sub", "email": "rita@example.org",
                       "email_verified": True, "name": "Rita Reviewer",
                       "iat": int(time.time()), "nonce": f"n-{time.time_ns()}"}


def answers(path, name="Rita Reviewer"):
    return rows(path, "SELECT a.id FROM annotations a JOIN raters r ON r.id = a.rater_id"
                      " WHERE r.name = ?", (name,))


def ended_screen(at) -> bool:
    return any("Your session has ended" in w.value for w in at.warning)


def test_sign_out_in_one_tab_stops_the_other_at_its_next_action(signed, monkeypatch):
    path, claims = signed
    first, second = tab(path, monkeypatch, claims).run(), tab(path, monkeypatch, claims).run()
    assert not first.exception and not second.exception
    action_button(second, "label", "0A_NO_ESCALATION_INFO_NEEDED").click().run()
    assert len(answers(path)) == 1  # in force: the second tab answers
    next(b for b in first.sidebar.button if b.label == "Sign out").click().run()
    assert rows(path, "SELECT end_reason FROM sessions") == [("signed_out",)]
    action_button(second, "label", "1B_ESCALATION_URGENT_CARE").click().run()
    assert not second.exception
    assert len(answers(path)) == 1  # nothing written
    assert not any(b.key and b.key.startswith("label:") for b in second.button)  # no item
    # The next full run (AppTest reruns only the page; the server runs app.py each
    # time), and the cookie copied to a fresh browser: the sign-in screen.
    for again in (tab(path, monkeypatch, claims).run(), tab(path, monkeypatch, claims).run()):
        assert ended_screen(again) and "you signed out" in again.warning[0].value
        assert not again.button or {b.label for b in again.button} == {
            "Sign in", "Forget this sign-in"}
    assert len(answers(path)) == 1


def test_an_admin_signs_a_person_out_from_rounds_and_people(signed, monkeypatch):
    path, claims = signed
    reviewer_tab = tab(path, monkeypatch, claims).run()
    assert not reviewer_tab.exception
    admin_claims = dict(ADMIN, iat=int(time.time()), nonce=f"a-{time.time_ns()}")
    admin = tab(path, monkeypatch, admin_claims).run()
    admin.switch_page("pages/rounds.py").run()
    assert not admin.exception
    choose = next(s for s in admin.selectbox if s.label == "Person")
    choose.select("Rita Reviewer")  # in a form: sent with its button
    next(b for b in admin.button if b.label == "Sign them out").click().run()
    assert not admin.exception
    assert rows(path, "SELECT end_reason, ended_by FROM sessions WHERE rater_id ="
                      " (SELECT id FROM raters WHERE name = 'Rita Reviewer')") == \
        [("signed_out_by_admin", "Ada Admin")]
    action_button(reviewer_tab, "label", "1B_ESCALATION_URGENT_CARE").click().run()
    assert answers(path) == []
    again = tab(path, monkeypatch, claims).run()
    assert ended_screen(again) and "an admin signed you out" in again.warning[0].value

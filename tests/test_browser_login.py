"""Signing in, end to end: a real OpenID Connect provider on the loopback
(oidc-provider-mock), the real `carelens serve` with Streamlit's st.login,
and headless Chromium clicking through the provider's page.

For each role the legitimate person gets in as themselves; for each attack the
adversarial run found (an unverified e-mail, other capitals, a subject that
looks like the admin's e-mail, a display name the system uses, coming first)
the attacker gets in as a reviewer of their own, never as the admin or as a
name the system uses. The admin is named in configuration (CARELENS_ADMINS)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

from review.team.reviewers import find_reviewer, grant_role
from review.workspace import open_store
from tests.browser import chromium, running_app, wait_for_app
from tests.conftest import copy_database

pytestmark = pytest.mark.browser

ADMIN_EMAIL = "admin@example.org"
ADMIN = ("real-admin-sub", {"email": ADMIN_EMAIL, "email_verified": True, "name": "Ada Admin"})


@pytest.fixture(scope="module")
def idp():
    """oidc-provider-mock on 127.0.0.1, a free port, in this process."""
    import oidc_provider_mock
    import werkzeug.serving

    server = werkzeug.serving.make_server("127.0.0.1", 0, oidc_provider_mock.app(), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)


@pytest.fixture(scope="module")
def site(idp, demo_db, tmp_path_factory):
    """The demo served in server mode: the login configured in a secrets file, the
    admin named in CARELENS_ADMINS."""
    base = tmp_path_factory.mktemp("login")
    db = base / "server.db"
    copy_database(demo_db, db)
    secrets = base / "secrets.toml"
    secrets.write_text(f"""
[auth]
redirect_uri = "http://127.0.0.1:{{port}}/oauth2callback"
cookie_secret = "test-cookie-secret-0123456789abcdef"
client_id = "carelens-ci"
client_secret = "unused-by-the-mock"
server_metadata_url = "{idp}/.well-known/openid-configuration"
""", encoding="utf-8")
    env = {"STREAMLIT_SECRETS_FILES": str(secrets), "CARELENS_ADMINS": ADMIN_EMAIL}
    with running_app(db, env=env) as url, chromium() as browser:
        yield url, db, browser


def sign_in_context(site, idp, sub: str, claims: dict, viewport: dict | None = None):
    """A fresh browser (context) signed in through the provider's page, the user
    `sub` made with these claims first: (context, tab). The caller closes it."""
    import httpx

    url, _, browser = site
    assert httpx.put(f"{idp}/users/{quote(sub, safe='')}", json=claims).status_code == 204
    context = browser.new_context(viewport=viewport or {"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(url)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{idp}/oauth2/authorize*")
    page.get_by_placeholder("sub").fill(sub)
    page.get_by_role("button", name="Authorize").click()
    page.wait_for_url(f"{url}/**")
    page.get_by_text("signed in as").wait_for(timeout=60_000)
    wait_for_app(page)
    return context, page


def sign_in(site, idp, sub: str, claims: dict) -> str:
    """Sign in through the provider's page in a fresh browser; the sidebar's text."""
    context, page = sign_in_context(site, idp, sub, claims)
    try:
        return page.locator('[data-testid="stSidebar"]').inner_text().replace("\u2060", "")
    finally:
        context.close()


def rater(db: Path, sub: str):
    s = open_store(db)
    try:
        return s.query_one("SELECT name, role, kind, login_email FROM raters WHERE"
                           " login_subject = ?", (sub,))
    finally:
        s.close()


def test_coming_first_with_the_admins_unverified_email_makes_a_reviewer(site, idp):
    """Before the admin ever signs in: neither coming first nor their e-mail, unverified."""
    shown = sign_in(site, idp, "attacker-sub", {"email": ADMIN_EMAIL, "email_verified": False,
                                                "name": "Mallory"})
    assert "Mallory" in shown and "reviewer · signed in as attacker-sub" in shown
    assert "Rounds and people" not in shown
    assert tuple(rater(site[1], "attacker-sub")) == ("Mallory", "reviewer", "human", None)


def test_the_admin_named_in_configuration_gets_in_as_admin(site, idp):
    shown = sign_in(site, idp, *ADMIN)
    assert "Ada Admin" in shown and f"admin · signed in as {ADMIN_EMAIL}" in shown
    assert "Rounds and people" in shown
    assert tuple(rater(site[1], ADMIN[0])) == ("Ada Admin", "admin", "human", ADMIN_EMAIL)


def test_the_admins_email_in_other_capitals_is_not_the_admin(site, idp):
    shown = sign_in(site, idp, "capitals-sub", {"email": "ADMIN@example.org",
                                                "email_verified": True, "name": "Ada Admin"})
    assert "Ada Admin (2)" in shown and "reviewer · signed in as ADMIN@example.org" in shown
    assert "Rounds and people" not in shown


def test_a_subject_that_looks_like_the_admins_email_is_not_the_admin(site, idp):
    shown = sign_in(site, idp, ADMIN_EMAIL, {"name": "Sub Looks Like Email"})
    assert "Sub Looks Like Email" in shown and f"reviewer · signed in as {ADMIN_EMAIL}" in shown
    assert rater(site[1], ADMIN_EMAIL)["role"] == "reviewer"


@pytest.mark.parametrize("display", ["adjudicated", "group:clinicians", "carebench-gold"])
def test_a_display_name_the_system_uses_is_never_taken(site, idp, display):
    sub = f"reserved-{display}"
    shown = sign_in(site, idp, sub, {"email": "someone@example.org", "email_verified": True,
                                     "name": display})
    name, role, kind, _ = rater(site[1], sub)
    assert name.startswith("Reviewer ") and role == "reviewer" and kind == "human"
    assert name in shown and f"\n{display}\n" not in f"\n{shown}\n"


def test_a_reviewer_and_an_adjudicator_get_in_with_their_roles(site, idp):
    shown = sign_in(site, idp, "rev-sub", {"email": "rita@example.org", "email_verified": True,
                                           "name": "Rita Reviewer"})
    assert "reviewer · signed in as rita@example.org" in shown and "Adjudicate" not in shown
    s = open_store(site[1])
    admin = find_reviewer(s, "Ada Admin")
    grant_role(s, admin, "Rita Reviewer", "adjudicator")
    s.close()
    shown = sign_in(site, idp, "rev-sub", {"email": "rita@example.org", "email_verified": True,
                                           "name": "Rita Reviewer"})
    assert "adjudicator · signed in as rita@example.org" in shown and "Adjudicate" in shown
    s = open_store(site[1])
    entries = [json.loads(r[0]) for r in s.query(
        "SELECT new FROM audit_log WHERE action = 'sign_in_first' ORDER BY id")]
    s.close()
    assert all("issuer" in e and "subject" in e for e in entries)

"""Sessions that end, end to end: a real OpenID Connect provider on the loopback
(oidc-provider-mock), the real `carelens serve` with st.login, and headless
Chromium.

The adversarial run signed out in one tab while a second tab of the same
browser went on answering, and replayed a copy of the `_streamlit_user` cookie
taken before sign-out from a fresh browser. Here: two tabs of one sign-in; the
second answers (it is in force), the first signs out, and the second tab's
next key writes nothing and brings up the sign-in screen; a copy of the cookie
taken before the sign-out, put in a fresh browser, gets the sign-in screen
too. An admin's "Sign them out" ends another person's session the same way."""

from __future__ import annotations

import contextlib

import pytest
from playwright.sync_api import Error as PlaywrightError

from review.workspace import open_store
from tests.browser import ready_for_keys, wait_for_app, wait_for_progress
from tests.test_browser_login import ADMIN, idp, sign_in_context, site  # noqa: F401 - the fixtures

pytestmark = pytest.mark.browser

REVIEWER = ("tabs-sub", {"email": "tess@example.org", "email_verified": True,
                         "name": "Tess Tabs"})
ENDED = "Your session has ended"


def answers(db, sub):
    with open_store(db) as s:
        return s.scalar("SELECT COUNT(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                        " WHERE r.login_subject = ?", (sub,))


def ended(page, timeout=60_000) -> str:
    """The sign-in screen of an ended session; its text."""
    page.get_by_text(ENDED).wait_for(timeout=timeout)
    wait_for_app(page)
    return page.get_by_test_id("stMain").inner_text()


def press_and_settle(page, key: str) -> None:
    page.keyboard.press(key)
    page.wait_for_timeout(500)
    wait_for_app(page)


def test_sign_out_ends_the_other_tabs_session_and_every_copy_of_the_cookie(site, idp):  # noqa: F811
    url, db, browser = site
    sub, claims = REVIEWER
    context, first = sign_in_context(site, idp, sub, claims)
    try:
        second = context.new_page()
        second.goto(url)
        second.get_by_text("signed in as").wait_for(timeout=60_000)
        ready_for_keys(second)
        second.keyboard.press("1")
        wait_for_progress(second, "1 of 85")
        assert answers(db, sub) == 1  # the second tab acts in the session
        copied = context.cookies()
        assert any(c["name"] == "_streamlit_user" for c in copied)

        first.get_by_test_id("stSidebar").get_by_role("button", name="Sign out").click()
        # Streamlit sends the browser to the provider's end-session page, then back.
        first.wait_for_url(f"{idp}/oauth2/end_session*")
        first.get_by_role("button", name="End session").click()
        first.get_by_role("button", name="Sign in").wait_for(timeout=60_000)
        with open_store(db) as s:
            assert s.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'sign_out'") == 1

        # The other tab's next keys: nothing written, the sign-in screen.
        ready_for_keys(second)
        for key in ("2", "3", "4", "1"):
            with contextlib.suppress(PlaywrightError):  # the screen may go as it is pressed
                press_and_settle(second, key)
        main = ended(second)
        assert "you signed out" in main and answers(db, sub) == 1
        assert "of 85" not in main

        # A copy of the cookie taken before the sign-out, in a fresh browser.
        fresh = browser.new_context()
        try:
            fresh.add_cookies(copied)
            page = fresh.new_page()
            page.goto(url)
            main = ended(page)
            assert "you signed out" in main
            assert page.get_by_test_id("stSidebarNav").count() == 0  # no screen is served
            assert answers(db, sub) == 1
        finally:
            fresh.close()
    finally:
        context.close()


def test_an_admin_signs_a_person_out_of_an_open_tab(site, idp):  # noqa: F811
    url, db, browser = site
    sub, claims = "signed-out-by-admin", {"email": "pat@example.org", "email_verified": True,
                                          "name": "Pat Person"}
    their, page = sign_in_context(site, idp, sub, claims)
    admin, admin_page = sign_in_context(site, idp, *ADMIN)
    try:
        admin_page.get_by_test_id("stSidebarNav").get_by_text("Rounds and people").click()
        wait_for_app(admin_page)
        admin_page.get_by_text("Signed in now").scroll_into_view_if_needed()
        admin_page.get_by_role("combobox", name="Person").click()
        admin_page.get_by_role("option", name="Pat Person").click()
        admin_page.get_by_role("button", name="Sign them out").click()
        admin_page.get_by_text("Pat Person is signed out").wait_for(timeout=60_000)
        ready_for_keys(page)
        press_and_settle(page, "1")
        main = ended(page)
        assert "an admin signed you out" in main and answers(db, sub) == 0
    finally:
        their.close()
        admin.close()

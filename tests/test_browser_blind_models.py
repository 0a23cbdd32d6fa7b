"""Blind means blind, end to end: a reviewer signed in through a real OpenID
Connect provider (oidc-provider-mock), with every item still waiting for their
blind answer, opens every screen a reviewer reaches, and no model's or agent's
name is in what the server sends: not on screen, not in the page's HTML, not in
any message over the websocket (a filter's options, an address, a hidden
element).

The adversarial run set the Review sidebar's Model filter, which listed the
models' names, and 4 of 4 replies then shown as "Model B's reply" were that
model's."""

from __future__ import annotations

import pytest

from review.workspace import open_store
from tests.browser import wait_for_app
from tests.test_browser_login import idp, sign_in_context, site  # noqa: F401 - the fixtures

pytestmark = pytest.mark.browser

SCREENS = ["/?kind=response", "/?kind=prefix", "/trajectories", "/graded", "/data", "/browse",
           "/agreement", "/activity", "/codebook"]


def model_names(db) -> set[str]:
    """Every model's and agent's name in the demo, and the last part of a
    `family/name` one (what a screen may show of it)."""
    with open_store(db) as s:
        names = {r[0] for r in s.query("SELECT DISTINCT model FROM items WHERE model IS NOT NULL")}
    return names | {n.rsplit("/", 1)[-1] for n in names}


def test_a_blind_reviewers_pages_carry_no_model_name(site, idp):  # noqa: F811
    url, db, _ = site
    names = model_names(db)
    assert {"aster-7b", "borealis-large", "cobalt-mini", "atlas-clinician"} <= names
    context, page = sign_in_context(site, idp, "blind-sub", {
        "email": "bea@example.org", "email_verified": True, "name": "Bea Blind"})
    frames: list[bytes] = []

    def listen(ws) -> None:
        ws.on("framereceived", lambda payload: frames.append(
            payload if isinstance(payload, bytes) else payload.encode()))

    try:
        found = []
        for screen in SCREENS:
            page = context.new_page()
            page.on("websocket", listen)
            page.goto(url + screen)
            page.get_by_text("signed in as").wait_for(timeout=60_000)
            wait_for_app(page)
            sent = page.content().encode() + b"".join(frames) + page.url.encode()
            found += [(screen, n) for n in names if n.encode() in sent
                      or n.lower().encode() in sent.lower()]
            shown = page.get_by_test_id("stMain").inner_text()
            assert "Traceback" not in shown, screen
            frames.clear()
            page.close()
        assert found == []
    finally:
        context.close()
    with open_store(db) as s:  # the reviewer was blind throughout: nothing answered
        assert s.scalar("SELECT COUNT(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                        " WHERE r.login_subject = 'blind-sub'") == 0

"""Two reviewers answer the same items of a round in two browsers; an
adjudicator settles their conflicts in a third."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from review.team.reviewers import ensure_reviewer
from review.team.rounds import RoundSpec, create_round
from review.workspace import open_store
from tests.browser import chromium, ready_for_keys, running_app, wait_for_app

pytestmark = pytest.mark.browser


def wait_for_progress(page, text):
    page.wait_for_function(
        "t => (document.querySelector('[data-testid=\"stProgress\"]') || {innerText: ''})"
        ".innerText.includes(t)", arg=text)
    wait_for_app(page)


def test_two_reviewers_then_an_adjudicator(demo_copy):
    s = open_store(demo_copy)
    admin = ensure_reviewer(s, "Jordan Lee")
    rid = create_round(s, RoundSpec("Double review", "carebench.escalation_needed",
                                    reviewers_per_item=2, limit=3), admin)
    for name in ("Rev One", "Rev Two"):
        ensure_reviewer(s, name)
    s.close()
    with running_app(demo_copy) as url, chromium() as browser:
        for name, keys in (("Rev One", "111"), ("Rev Two", "142")):
            ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
            page = ctx.new_page()
            page.goto(f"{url}/?reviewer={quote(name)}&round={rid}")
            wait_for_app(page)
            assert "0 of 3 answered by you in Double review" in page.get_by_test_id("stProgress").inner_text()
            ready_for_keys(page)
            for n, key in enumerate(keys, start=1):
                page.evaluate("document.activeElement && document.activeElement.blur()")
                page.keyboard.press(key)
                wait_for_progress(page, f"{n} of 3 answered")
            assert "all done" in page.get_by_test_id("stProgress").inner_text()
            ctx.close()

        ctx = browser.new_context(viewport={"width": 1400, "height": 1100})
        page = ctx.new_page()
        page.goto(f"{url}/adjudicate?reviewer={quote('Dr. Sam Rivera')}&round={rid}")
        wait_for_app(page)
        main = page.get_by_test_id("stMain")
        page.wait_for_function("() => document.body.innerText.includes('Item 1 of 2 with disagreements')")
        assert "Rev One" not in main.inner_text()  # names hidden by default
        for remaining in (2, 1):
            assert f"Item 1 of {remaining} with disagreements" in main.inner_text()
            main.get_by_test_id("stRadioGroup").get_by_text("Urgent care (1B)").click()
            main.get_by_label("Reason", exact=True).click()  # nothing is chosen for the adjudicator
            page.get_by_role("option", name="the item is ambiguous", exact=True).click()
            main.get_by_role("button", name="Settle").click()
            wait_for_app(page)
        page.wait_for_function("() => document.body.innerText.includes('Nothing to adjudicate')")
        page.screenshot(path=str(demo_copy.parent / "adjudicate.png"), full_page=True)
        ctx.close()

    s = open_store(demo_copy)
    settled = s.query("SELECT a.value, json_extract(a.extra, '$.reason'), json_extract(a.extra, '$.adjudicator')"
                      " FROM annotations a JOIN raters r ON r.id = a.rater_id WHERE r.name = 'adjudicated'"
                      " ORDER BY a.id")
    assert sorted(tuple(r) for r in settled) == sorted([
        ("0A_NO_ESCALATION_INFO_NEEDED", "unanimous", None),
        ("1B_ESCALATION_URGENT_CARE", "ambiguous_item", "Dr. Sam Rivera"),
        ("1B_ESCALATION_URGENT_CARE", "ambiguous_item", "Dr. Sam Rivera"),
    ])

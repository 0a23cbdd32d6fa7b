"""Two reviewers answer the same items of a round in two browsers; an
adjudicator settles their conflicts in a third."""

from __future__ import annotations

import re
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
        assert "Keys: 1 2 3 4 the settled answer" in main.inner_text()
        for remaining in (2, 1):
            assert f"Item 1 of {remaining} with disagreements" in main.inner_text()
            ready_for_keys(page)
            for key in ("4", "a"):  # Urgent care, the item is ambiguous: nothing is pre-chosen
                page.keyboard.press(key)
                wait_for_app(page)
            pressed = main.locator("[data-testid='stBaseButton-primary']").all_inner_texts()
            assert any(t.startswith("Urgent care") for t in pressed)  # in words: no (1B)
            assert not any("(1B)" in t for t in pressed)
            assert any(t.startswith("Ambiguous item") for t in pressed)
            page.keyboard.press("Control+Enter")  # settle
            wait_for_app(page)
        page.wait_for_function("() => document.body.innerText.includes('Nothing to adjudicate')")
        # The unanimous item waits for a click; opening the screen settled nothing.
        main.get_by_role("button", name="Settle the 1 unanimous item").click()
        wait_for_app(page)
        page.screenshot(path=str(demo_copy.parent / "adjudicate.png"), full_page=True)
        ctx.close()

    s = open_store(demo_copy)
    settled = s.query("SELECT a.value, json_extract(a.extra, '$.reason'), json_extract(a.extra, '$.adjudicator')"
                      " FROM annotations a JOIN raters r ON r.id = a.rater_id WHERE r.name = 'adjudicated'"
                      " ORDER BY a.id")
    assert [tuple(r) for r in settled] == [
        ("1B_ESCALATION_URGENT_CARE", "ambiguous_item", "Dr. Sam Rivera"),
        ("1B_ESCALATION_URGENT_CARE", "ambiguous_item", "Dr. Sam Rivera"),
        ("0A_NO_ESCALATION_INFO_NEEDED", "unanimous", None),  # last: when asked
    ]
    assert s.scalar("SELECT actor FROM audit_log WHERE action = 'settle_unanimous'") == "Dr. Sam Rivera"
    s.close()


def test_opening_adjudicate_writes_nothing(demo_copy):
    """An admin who only looks at Adjudicate records nothing (it settled every unanimous
    item in their name); the unanimous items settle on the button that counts them."""
    s = open_store(demo_copy)

    def written() -> tuple[int, int]:
        return (s.scalar("SELECT COUNT(*) FROM annotations"),
                s.scalar("SELECT COUNT(*) FROM audit_log WHERE action != 'labels_opened'"))

    before = written()
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        for what in ("labels", "rubric", "steps", "labels"):
            page.goto(f"{url}/adjudicate?reviewer={quote('Jordan Lee')}&what={what}")
            wait_for_app(page)
            page.wait_for_function("() => document.body.innerText.includes('Settle the ')")
            wait_for_app(page)
        assert written() == before
        main = page.get_by_test_id("stMain")
        button = main.get_by_role("button", name=re.compile(r"^Settle the \d+ unanimous items$"))
        count = int(re.search(r"Settle the (\d+) unanimous", button.inner_text()).group(1))
        assert count > 0
        button.click()
        page.wait_for_function("() => document.body.innerText.includes('the clinicians agree on')")
        wait_for_app(page)
    assert s.scalar("SELECT COUNT(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                    " WHERE r.name = 'adjudicated'") == count
    assert s.query_one("SELECT actor, json_extract(new, '$.reason') FROM audit_log"
                       " WHERE action = 'settle_unanimous' ORDER BY id DESC LIMIT 1")[0] == "Jordan Lee"
    s.close()


def test_the_round_counters_agree_across_reviewers(demo_copy):
    """Three reviewers, a round of three items with two places each. Every line a
    reviewer reads counts 'of' the same number: the items the round has for them
    (not 'item 1 of 1' then '2 of 2' beside '0 of 3', nor '0 of 3' then 'Nothing
    left' for the third, nor a round that ends at '2 of 3')."""
    s = open_store(demo_copy)
    admin = ensure_reviewer(s, "Jordan Lee")
    rid = create_round(s, RoundSpec("Pilot", "carebench.escalation_needed",
                                    reviewers_per_item=2, limit=3), admin)
    for name in ("Rev One", "Rev Two", "Rev Three"):
        ensure_reviewer(s, name)
    s.close()

    def lines(page) -> tuple[str, str]:
        progress = page.get_by_test_id("stProgress").inner_text()
        main = page.get_by_test_id("stMain").inner_text()
        place = next((line for line in main.splitlines() if " for you in Pilot" in line), "")
        return progress, place

    with running_app(demo_copy) as url, chromium() as browser:
        def open_as(name):
            ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
            page = ctx.new_page()
            page.goto(f"{url}/?reviewer={quote(name)}&round={rid}")
            wait_for_app(page)
            return ctx, page

        def answer(page, n, of):
            progress, place = lines(page)
            assert f"{n - 1} of {of} answered by you in Pilot" in progress
            assert f"item {n} of {of} for you in Pilot" in place
            ready_for_keys(page)
            page.keyboard.press("1")
            wait_for_progress(page, f"{n} of {of} answered")

        ctx, page = open_as("Rev One")
        for n in (1, 2, 3):
            answer(page, n, 3)
        assert "3 of 3 answered by you in Pilot · all done · the round: 3 of 6 reviews" \
            in lines(page)[0]
        ctx.close()

        two, page2 = open_as("Rev Two")
        for n in (1, 2):
            answer(page2, n, 3)
        # Rev Two's screen now holds the last free place: the third reviewer is told so.
        three, page3 = open_as("Rev Three")
        text = page3.get_by_test_id("stMain").inner_text()
        assert "0 of 0 answered by you in Pilot · the round: 5 of 6 reviews" in text
        assert ("Nothing left for you in Pilot: you reviewed 0 of its 3 items; the other 2 have "
                "the reviewers they need. 1 more is held by colleagues now") in text
        answer(page2, 3, 3)
        assert "3 of 3 answered by you in Pilot · all done · the round: 6 of 6 reviews" \
            in lines(page2)[0]
        two.close()
        page3.reload()
        wait_for_app(page3)
        text = page3.get_by_test_id("stMain").inner_text()
        assert "0 of 0 answered by you in Pilot · the round: 6 of 6 reviews" in text
        assert ("Nothing left for you in Pilot: you reviewed 0 of its 3 items; the other 3 have "
                "the reviewers they need.") in text
        three.close()

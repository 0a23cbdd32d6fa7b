"""The Browse screen in a real browser: search, narrow by two facets, tag a step,
then open the shared link in a fresh browser context and see the same view."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest

from review.browse import BrowseQuery, browse, tag_history
from review.workspace import open_store
from tests.browse_data import REVIEWER, add_trajectories
from tests.browser import chromium, running_app, wait_for_app

pytestmark = pytest.mark.browser

def view_of(url: str) -> BrowseQuery:
    return BrowseQuery.from_params(parse_qs(urlparse(url).query))


def main_text(page) -> str:
    return page.get_by_test_id("stMain").inner_text()


def wait_for_text(page, text: str) -> None:
    """Until the main area shows `text` (a rerun may still be drawing)."""
    page.wait_for_function(
        "t => (document.querySelector('[data-testid=\"stMain\"]') || {innerText: ''}).innerText.includes(t)",
        arg=text)


def wait_for_url(page, pattern: str) -> None:
    page.wait_for_url(re.compile(pattern))
    wait_for_app(page)


def pick(page, scope, label: str, option: str) -> None:
    """Choose `option` in the drop-down labelled `label` inside `scope`."""
    scope.get_by_label(label, exact=True).click()
    page.get_by_role("option", name=option, exact=True).click()


def test_search_narrow_tag_a_step_and_share_the_view(demo_copy):
    from playwright.sync_api import expect

    add_trajectories(demo_copy)
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.goto(url + "/browse?reviewer=" + REVIEWER.replace(" ", "%20"))
        wait_for_app(page)
        main = page.get_by_test_id("stMain")

        # 1. search
        box = main.get_by_role("textbox", name="Search", exact=True)
        box.fill("examination")
        box.press("Enter")
        wait_for_url(page, r"q=examination")

        # 2. narrow by two facets: trajectories, then the test split
        main.get_by_role("button", name=re.compile(r"^Agent runs \(\d+\)$")).click()
        wait_for_url(page, r"item_kind=trajectory")
        main.get_by_role("button", name=re.compile(r"^test \(\d+\)$")).click()
        wait_for_url(page, r"split=test")
        view = view_of(page.url)
        assert (view.text, view.kinds, view.splits) == ("examination", ("trajectory",), ("test",))
        s = open_store(demo_copy)
        expected = browse(s, view)
        s.close()
        assert expected.total >= 1
        wait_for_text(page, f"{expected.total} item")
        first = expected.items[0]

        # 3. tag step 5 of the first result
        main.get_by_role("button", name="Tag", exact=True).first.click()
        body = page.get_by_role("dialog")
        pick(page, body, "Tag", "fabricated evidence")
        pick(page, body, "On", "Step 5")
        body.get_by_label("Note (what you saw)").fill("quotes a result never ordered")
        body.get_by_role("button", name="Add tag").click()
        wait_for_app(page)
        page.keyboard.press("Escape")
        wait_for_text(page, "fabricated evidence · step 5")
        s = open_store(demo_copy)
        events = [(e.tag, e.target, e.added, e.by, e.note) for e in tag_history(s, first.item_id)]
        s.close()
        assert events[-1] == ("fabricated evidence", "step:5", True, REVIEWER,
                              "quotes a result never ordered")
        shown = main_text(page)
        page.screenshot(path=str(demo_copy.parent / "browse.png"), full_page=True)

        # 4. the shared link, in a fresh context (no cookies, no session): the same view
        link = page.url
        fresh = browser.new_context(viewport={"width": 1400, "height": 1100})
        other = fresh.new_page()
        other.goto(link)
        wait_for_app(other)
        wait_for_text(other, "fabricated evidence · step 5")
        again = main_text(other)
        assert view_of(other.url) == view
        expect(other.get_by_role("textbox", name="Search", exact=True)).to_have_value("examination")
        for needle in (f"{expected.total} item", first.uid, "fabricated evidence · step 5"):
            assert needle in shown and needle in again
        # the two facets are shown chosen (pills pressed)
        other.wait_for_function(
            "() => document.querySelectorAll('[data-testid=\"stMain\"] button[aria-pressed=\"true\"]')"
            ".length >= 2")
        pressed = other.get_by_test_id("stMain").locator("button[aria-pressed='true']").all_inner_texts()
        assert any(t.startswith("Agent runs") for t in pressed)
        assert any(t.startswith("test") for t in pressed)
        fresh.close()


def test_an_admin_lets_reviewers_add_tags_and_a_researcher_creates_and_uses_one(demo_copy):
    """The tags came from a fixed list: a researcher could not tag 'mapper error'. An
    admin allows reviewers to add tags; a reviewer names the new tag as they tag an
    item with it, and it joins the list."""
    from review.team.reviewers import ensure_reviewer

    s = open_store(demo_copy)
    ensure_reviewer(s, "Dr. Researcher")  # nothing to review blind: no labels gate
    s.close()
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1100})

        def open_browse(who: str) -> None:
            page.goto(f"{url}/browse?reviewer={who.replace(' ', '%20')}")
            wait_for_app(page)
            shown = [b for b in page.get_by_role("button", name="Show the labels anyway").all()]
            if shown:
                shown[0].click()
                wait_for_app(page)
            wait_for_text(page, "Narrow down")

        open_browse("Dr. Researcher")
        main = page.get_by_test_id("stMain")
        main.get_by_role("button", name="Tag", exact=True).first.click()
        body = page.get_by_role("dialog")
        body.get_by_role("button", name="Add tag").wait_for()  # the popover is drawn
        assert body.get_by_role("textbox", name="Or a new tag").count() == 0
        page.keyboard.press("Escape")

        open_browse("Jordan Lee")  # the admin allows it, on the Tags tab
        main = page.get_by_test_id("stMain")
        main.get_by_role("tab", name="Tags").click()
        main.get_by_text("Reviewers may add tags to the list").click()
        wait_for_app(page)

        open_browse("Dr. Researcher")
        main = page.get_by_test_id("stMain")
        href = main.locator("a[href*='item=']").first.get_attribute("href")
        first = parse_qs(urlparse(href).query)["item"][0]  # the link reads as words
        main.get_by_role("button", name="Tag", exact=True).first.click()
        body = page.get_by_role("dialog")
        body.get_by_role("textbox", name="Or a new tag").fill("mapper error")
        body.get_by_label("Note (what you saw)").fill("the mapper read 'go to A&E' as self-care")
        body.get_by_role("button", name="Add tag").click()
        wait_for_app(page)
        page.keyboard.press("Escape")
        wait_for_text(page, "mapper error")

    s = open_store(demo_copy)
    assert s.scalar("SELECT created_by FROM tags WHERE name = 'mapper error'") == "Dr. Researcher"
    item = s.scalar("SELECT id FROM items WHERE uid = ?", (first,))
    events = [(e.tag, e.by, e.note) for e in tag_history(s, item)]
    assert events == [("mapper error", "Dr. Researcher", "the mapper read 'go to A&E' as self-care")]
    assert s.scalar("SELECT set_by FROM study_settings WHERE key = 'reviewers_add_tags'") == "Jordan Lee"
    s.close()

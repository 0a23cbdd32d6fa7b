"""From a number to the case: a confusion cell lists the disagreeing items,
and an item opens the read-only view of every rater's label on it."""

from __future__ import annotations

from urllib.parse import parse_qs, quote, urlparse

import pytest

from review.browse.item_labels import item_labels
from review.workspace import open_store
from tests.browser import chromium, running_app, wait_for_app

pytestmark = pytest.mark.browser


def uid_of(link) -> str:
    """The item a link opens, as its address names it (the link reads as words)."""
    return parse_qs(urlparse(link.get_attribute("href")).query)["item"][0]


def plain(text: str) -> str:
    """Text as read: without the word joiners that keep '@' from making a mail link."""
    return text.replace("\u2060", "")


def test_a_disagreement_cell_opens_a_read_only_view_of_every_label(demo_copy):
    """An item of a cell opens the disagreement, not the blind Review screen: the item,
    every rater's label on it (machine and human, blind and after-reveal marked, with
    rationales), the gold of its conversation, a link to review it, and no answer button."""
    with running_app(demo_copy) as url, chromium() as browser:
        ctx = browser.new_context(viewport={"width": 1400, "height": 1400})
        page = ctx.new_page()
        page.goto(f"{url}/agreement?reviewer=Jordan%20Lee")
        wait_for_app(page)
        main = page.get_by_test_id("stMain")
        # The page renders in parts: wait for the cell's item list, not just the heading.
        page.wait_for_function("() => document.body.innerText.includes('items where the raters disagree')"
                               " && document.querySelector(\"a[href*='item=']\")", timeout=60_000)
        text = plain(main.inner_text())
        assert "Clinicians' majority vs the mapper, prompt v1 (demo:mapper@v1)" in text and "95% CI" in text
        items = main.locator("a[href*='item=']")
        # An item whose clinician revised an answer after the reveal, where there is one.
        s = open_store(demo_copy)
        listed = [uid_of(items.nth(n)) for n in range(items.count())]
        labels = {uid: item_labels(s, uid, "carebench.response_action") for uid in listed}
        s.close()
        uid = next((u for u, x in labels.items()
                    if any(e.phase == "after_reveal" for e in x.questions[0].entries)), listed[0])
        link = items.nth(listed.index(uid))
        assert "/disagreement?" in link.get_attribute("href")
        with ctx.expect_page() as opened:
            link.click()
        view = opened.value
        wait_for_app(view)
        view.wait_for_function("u => document.body.innerText.replace(/\\u2060/g, '').includes(u)", arg=uid)
        wait_for_app(view)
        shown = plain(view.get_by_test_id("stMain").inner_text())
        unit = labels[uid].questions[0]
        assert unit.disagree and "they disagree" in shown
        for e in unit.entries:  # every rater, every answer they gave, in words
            assert e.who in shown and e.words in shown
        assert {e.kind for e in unit.entries} >= {"human", "machine"}
        assert "blind" in shown
        if any(e.phase == "after_reveal" for e in unit.entries):
            assert "after the reveal" in shown and "replaced by a later answer" in shown
        for e in unit.entries:
            if e.rationale:
                assert e.rationale in shown
        for gold in labels[uid].on_parent[0].entries:  # the conversation's gold
            assert gold.who in shown and gold.words in shown
        # Read-only: nothing to answer with, a link to review it properly.
        buttons = view.get_by_test_id("stMain").get_by_role("button").all_inner_texts()
        assert not [b for b in buttons if any(w in b for w in ("Ask first", "Self-care",
                                                                 "Urgent care", "See a clinician"))]
        review = view.get_by_role("link", name="Review it on its screen")
        assert f"item={quote(uid)}" in review.get_attribute("href")
        ctx.close()
    s = open_store(demo_copy)  # nothing was answered on the way
    assert s.scalar("SELECT COUNT(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                    " WHERE r.name = 'Jordan Lee'") == 0
    s.close()


def test_clicking_a_cell_of_the_confusion_matrix_lists_its_items(demo_copy):
    """The matrix's cells are buttons (no charting library to load first): a click on a
    cell lists that cell's items."""
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1400})
        page.goto(f"{url}/agreement?reviewer=Jordan%20Lee")
        wait_for_app(page)
        page.wait_for_function("() => document.body.innerText.includes('items where the raters disagree')",
                               timeout=60_000)
        wait_for_app(page)
        main = page.get_by_test_id("stMain")

        def listed() -> str:
            text = main.inner_text()
            return next(line for line in text.splitlines() if "where the raters" in line)

        first = listed()
        cells = main.locator("[class*='st-key-agr_cellbtn'] button:not([disabled]):visible")
        assert cells.count() >= 4
        for n in range(cells.count()):
            cells.nth(n).click()
            wait_for_app(page)
            now = listed()
            if now != first and "disagree" in now:
                break
        else:
            pytest.fail("no click on a cell of the matrix changed the listed items")
        said = now.split(": ", 1)[1]
        assert said and said != first.split(": ", 1)[1]
        link = main.locator("a[href*='item=']").first
        uid = uid_of(link)
        with page.context.expect_page() as opened:
            link.click()
        view = opened.value
        wait_for_app(view)
        view.wait_for_function("u => document.body.innerText.replace(/\\u2060/g, '').includes(u)", arg=uid)

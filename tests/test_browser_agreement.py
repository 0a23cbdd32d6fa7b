"""From a number to the case: a confusion cell lists the disagreeing items,
and an item opens in its review screen."""

from __future__ import annotations

import pytest

from tests.browser import chromium, running_app, wait_for_app

pytestmark = pytest.mark.browser


def test_a_disagreement_cell_opens_the_item_in_review(demo_copy):
    with running_app(demo_copy) as url, chromium() as browser:
        ctx = browser.new_context(viewport={"width": 1400, "height": 1400})
        page = ctx.new_page()
        page.goto(f"{url}/agreement?reviewer=Jordan%20Lee")
        wait_for_app(page)
        main = page.get_by_test_id("stMain")
        # The page renders in parts: wait for the cell's item list, not just the heading.
        page.wait_for_function("() => document.body.innerText.includes('items where the raters disagree')"
                               " && document.querySelector(\"a[href*='item=']\")", timeout=60_000)
        text = main.inner_text()
        assert "Clinicians' majority vs demo:mapper@v1" in text and "95% CI" in text
        assert "items where the raters disagree" in text
        # The keyboard-friendly way to a cell: the cell picker.
        items = main.locator("a[href*='item=']")
        first = items.first
        href = first.get_attribute("href")
        uid = first.inner_text().strip()
        assert "::" in uid and "kind=response" in href
        with ctx.expect_page() as opened:
            first.click()
        review = opened.value
        wait_for_app(review)
        review.wait_for_function("() => document.body.innerText.includes('Which action does this response recommend?')")
        text = review.get_by_test_id("stMain").inner_text()
        assert uid in text
        # The reviewer has not answered it yet: labels stay hidden.
        assert "demo:mapper@v1" not in text
        ctx.close()


def test_clicking_a_heatmap_cell_lists_its_items(demo_copy):
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1400})
        page.goto(f"{url}/agreement?reviewer=Jordan%20Lee")
        wait_for_app(page)
        page.wait_for_function("() => document.body.innerText.includes('items where the raters disagree')"
                               " && document.querySelector('.js-plotly-plot .scatterlayer path.point')",
                               timeout=60_000)

        def listed() -> str:
            text = page.get_by_test_id("stMain").inner_text()
            return next(line for line in text.splitlines() if "where the raters" in line)

        first = listed()
        # The confusion chart is the plot with one marker per cell (4 x 4 labels).
        charts = page.locator(".js-plotly-plot")
        chart = next(charts.nth(i) for i in range(charts.count())
                     if charts.nth(i).locator(".scatterlayer path.point").count() == 16)
        cells = chart.locator(".scatterlayer path.point")
        for n in range(cells.count()):
            cells.nth(n).scroll_into_view_if_needed()
            box = cells.nth(n).bounding_box()
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.wait_for_timeout(800)
            wait_for_app(page)
            now = listed()
            if now != first and "disagree" in now:
                break
        else:
            pytest.fail("no click on a heatmap cell changed the listed items")
        said = now.split(": ", 1)[1]
        assert said and said != first.split(": ", 1)[1]
        link = page.get_by_test_id("stMain").locator("a[href*='item=']").first
        uid = link.inner_text().strip()
        with page.context.expect_page() as opened:
            link.click()
        review = opened.value
        wait_for_app(review)
        review.wait_for_function("u => document.body.innerText.includes(u)", arg=uid)

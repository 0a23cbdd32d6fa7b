"""Agreement's tabs draw their numbers without loading the charting library: the
triage tab's leaderboard is a table first, and its plot is one toggle away (the plot's
library took longer to load than the rest of the tab)."""

from __future__ import annotations

import pytest

from tests.browser import chromium, running_app, wait_for_app

pytestmark = pytest.mark.browser

PLOT = "[data-testid=stMain] [data-testid=stPlotlyChart]"


def test_the_triage_tab_shows_its_leaderboard_before_any_plot(demo_copy):
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1200})
        plots = []
        page.on("requestfinished", lambda r: plots.append(r.url) if "Plotly" in r.url else None)
        page.goto(f"{url}/agreement?reviewer=Jordan%20Lee")
        wait_for_app(page, timeout=120_000)
        page.get_by_role("tab", name="Triage & leaderboard").click()
        page.get_by_text("Would the mapper have changed the leaderboard?").wait_for(timeout=120_000)
        wait_for_app(page, timeout=120_000)
        main = page.get_by_test_id("stMain")
        assert "Rank (1 = best) and macro-F1 of each model" in main.inner_text()
        assert page.locator(PLOT).count() == 0 and plots == []
        page.get_by_text("Show the ranks as a plot").click()
        page.locator(PLOT).first.wait_for(timeout=120_000)
        assert plots  # the library is loaded when the plot is asked for

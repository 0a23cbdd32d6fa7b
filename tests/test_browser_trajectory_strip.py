"""The Trajectories step strip keeps in step with the step on screen (issue 19,
F6 point 1): after several moves by key, the strip shows the step shown, and
a mark made then lands on that step, with no mark left unsaved elsewhere."""

from __future__ import annotations

import pytest

from review.workspace import open_store
from tests.browser import (
    add_reviewers,
    chromium,
    ready_for_keys,
    release_focus,
    running_app,
    wait_for_app,
)

pytestmark = pytest.mark.browser
RUN = "kb:demo/r1/kb-demo-001__atlas-clinician"
WHO = "Dr. Strip"

SHOWN = """() => {
    const step = document.querySelector('.st-key-trj_step');
    const m = step && step.innerText.match(/step (\\d+) of (\\d+)/);
    const chosen = [...document.querySelectorAll('[class*="st-key-trj_tl"] button')]
        .map((b, n) => [n, b.getAttribute('data-testid') || '', b.getAttribute('aria-pressed'),
                        b.getAttribute('aria-checked')])
        .filter(([n, id, pressed, checked]) => /Active/.test(id) || pressed === 'true'
                                                || checked === 'true')
        .map(([n]) => n + 1);
    return {shown: m && Number(m[1]), chosen};
}"""


def marks(db) -> list[tuple]:
    with open_store(db) as s:
        return [tuple(r) for r in s.query(
            "SELECT a.target, a.value FROM annotations a JOIN raters r ON r.id = a.rater_id"
            " WHERE r.name = ? AND a.target LIKE 'step:%' ORDER BY a.id", (WHO,))]


def drafts(db) -> int:
    with open_store(db) as s:
        return s.scalar("SELECT COUNT(*) FROM drafts d JOIN raters r ON r.id = d.rater_id"
                        " WHERE r.name = ?", (WHO,)) or 0


def wait_step(page, n: int) -> None:
    page.wait_for_function(
        "n => { const s = document.querySelector('.st-key-trj_step');"
        " return s && s.innerText.includes(`step ${n} of`); }", arg=n)
    wait_for_app(page)


def test_three_moves_by_key_then_a_mark_marks_the_step_shown(demo_copy):
    add_reviewers(demo_copy, WHO)
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.goto(f"{url}/trajectories?reviewer=Dr.+Strip&item={RUN}&step=3")
        wait_step(page, 3)
        ready_for_keys(page)
        for key, step in (("ArrowRight", 4), ("ArrowRight", 5), ("ArrowLeft", 4),
                          ("ArrowRight", 5)):
            release_focus(page)
            page.keyboard.press(key)
            wait_step(page, step)
            seen = page.evaluate(SHOWN)
            assert seen == {"shown": step, "chosen": [step]}, seen
        # Mark the step shown (5): 0 no error, then M saves it.
        release_focus(page)
        page.keyboard.press("0")
        page.wait_for_function(
            "() => [...document.querySelectorAll('.st-key-trj_errors button')]"
            ".some(b => b.dataset.testid === 'stBaseButton-primary' && b.innerText.includes('No error'))")
        wait_for_app(page)
        assert page.evaluate(SHOWN) == {"shown": 5, "chosen": [5]}
        release_focus(page)
        page.keyboard.press("m")
        page.get_by_text("Step 5 marked").wait_for()
        wait_for_app(page)
        assert page.evaluate(SHOWN) == {"shown": 5, "chosen": [5]}
        assert marks(demo_copy) == [("step:5", "no_error")]
        main = page.get_by_test_id("stMain").inner_text()
        assert "unsaved mark" not in main, main
        # And a click on the strip still opens the step clicked.
        page.locator('[class*="st-key-trj_tl"] button').nth(1).click()
        wait_step(page, 2)
        assert page.evaluate(SHOWN) == {"shown": 2, "chosen": [2]}

"""Keyboard focus on the answer buttons is seen (issue 19, F6 point 6): a
clinician who moves with Tab sees which button has the focus, as a ring that
contrasts with the button and that no column or scrolling box cuts off."""

from __future__ import annotations

import pytest

from tests.browser import add_reviewers, chromium, ready_for_keys, running_app, wait_for_app

pytestmark = pytest.mark.browser
LAPTOP = {"width": 1280, "height": 720}

RING = """() => {
    // The focused button's ring: its style, and whether all of it is drawn
    // (inside the window and inside every box around it that clips).
    const b = document.activeElement;
    const cs = getComputedStyle(b);
    const width = parseFloat(cs.outlineWidth) || 0, offset = parseFloat(cs.outlineOffset) || 0;
    const r = b.getBoundingClientRect();
    const out = offset + width;  // how far the ring reaches beyond the button's edge
    const ring = {top: r.top - out, bottom: r.bottom + out, left: r.left - out, right: r.right + out};
    let clipped = ring.top < 0 || ring.left < 0 || ring.bottom > innerHeight || ring.right > innerWidth;
    for (let p = b.parentElement; p && p !== document.body; p = p.parentElement) {
        const s = getComputedStyle(p);
        if (s.overflowX !== 'visible' || s.overflowY !== 'visible') {
            const q = p.getBoundingClientRect();
            if (ring.top < q.top - 0.5 || ring.bottom > q.bottom + 0.5
                || ring.left < q.left - 0.5 || ring.right > q.right + 0.5) clipped = true;
        }
    }
    return {text: b.innerText, style: cs.outlineStyle, width, color: cs.outlineColor,
            background: cs.backgroundColor, clipped, visible: b.matches(':focus-visible')};
}"""


def tab_to(page, selector: str, limit: int = 80) -> dict:
    """Tab through the page until the focus is in `selector`; its ring."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("s => document.activeElement.matches(s)"
                         " || !!document.activeElement.closest(s)", selector):
            return page.evaluate(RING)
    raise AssertionError(f"Tab never reached {selector}")


def luminance(css: str) -> float:
    parts = [float(x) for x in css[css.index("(") + 1:-1].split(",")[:3]]
    lin = [(c / 255) / 12.92 if c / 255 <= 0.03928 else ((c / 255 + 0.055) / 1.055) ** 2.4
           for c in parts]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def assert_seen(ring: dict) -> None:
    assert ring["visible"], ring
    assert ring["style"] == "solid" and ring["width"] >= 2, ring
    assert not ring["clipped"], ring
    assert contrast(ring["color"], ring["background"]) >= 3, ring  # WCAG: 3:1 for a focus ring


def test_tab_to_an_answer_button_shows_a_ring_nothing_cuts_off(demo_copy):
    add_reviewers(demo_copy, "Dr. Focus")
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport=LAPTOP)
        page.goto(f"{url}/?reviewer=Dr.+Focus")
        ready_for_keys(page)
        first = tab_to(page, '[class*="st-key-label-"]')
        assert_seen(first)
        page.keyboard.press("Tab")  # the next answer
        second = page.evaluate(RING)
        assert second["text"] != first["text"]
        assert_seen(second)
        page.screenshot(path=str(demo_copy.parent / "focus-review.png"))
        # On an agent run's step: the error types, and the chosen one (primary) too.
        page.goto(f"{url}/trajectories?reviewer=Dr.+Focus"
                  "&item=kb:demo/r1/kb-demo-001__atlas-clinician&step=5")
        ready_for_keys(page)
        assert_seen(tab_to(page, ".st-key-trj_errors"))
        page.evaluate("document.activeElement.blur()")
        page.keyboard.press("0")  # No error: chosen, a primary button
        page.wait_for_selector(".st-key-trj_errors button[data-testid*=primary]")
        wait_for_app(page)
        page.evaluate("document.activeElement && document.activeElement.blur()")
        chosen = tab_to(page, ".st-key-trj_errors button[data-testid*=primary]")
        assert "No error" in chosen["text"]
        assert_seen(chosen)
        page.screenshot(path=str(demo_copy.parent / "focus-trajectories.png"))

"""Every answering screen fits a laptop's window, with the browser's CPU
throttled 4x (issue 29, points 5): the real server, Debian's Chromium.

- Trajectories: the current step and the criterion being answered are in the
  window together (the criteria sat about 1,190 px down), with the step's mark,
  before and after keys, at 1280x720 and 1366x768;
- Adjudicate: the item, the clinicians' answers and the settle panel are in the
  window together (the panel sat about 1,080 px down), for labels, rubric
  verdicts and step marks, at 1280x720, 1366x768 and 1440x900; a settlement is
  taken back with Z within the undo window and recorded as withdrawn;
- a long reply shows a "more below" cue, and Space / Shift+Space scroll it
  while the answers stay where they are;
- Tab from the rationale box (as the box advises) and S leave the page where
  it was, and the next item opens at the top of the page.
"""

from __future__ import annotations

import pytest

from review.workspace import open_store
from tests.browser import (
    add_reviewers,
    chromium,
    release_focus,
    running_app,
    wait_for_app,
    wait_for_progress,
)

pytestmark = pytest.mark.browser
LAPTOP = {"width": 1280, "height": 720}
LAPTOP_WIDE = {"width": 1366, "height": 768}
DESKTOP = {"width": 1440, "height": 900}

SEEN = """sel => {
    // The last element matching `sel` that is drawn (Streamlit keeps a hidden copy
    // of a button, to measure it): its box, and how much of it shows in the window,
    // clipped by every scrolling box around it.
    const all = [...document.querySelectorAll(sel)].filter(e => e.checkVisibility());
    const el = all[all.length - 1];
    if (!el) return null;
    const r = el.getBoundingClientRect();
    let top = Math.max(r.top, 0), bottom = Math.min(r.bottom, window.innerHeight);
    for (let p = el.parentElement; p; p = p.parentElement) {
        if (/(auto|scroll|hidden)/.test(getComputedStyle(p).overflowY)) {
            const b = p.getBoundingClientRect();
            top = Math.max(top, b.top); bottom = Math.min(bottom, b.bottom);
        }
    }
    return {top: Math.round(r.top), bottom: Math.round(r.bottom), height: Math.round(r.height),
            seen: Math.max(0, Math.round(bottom - top))};
}"""
CURRENT_ROW = """() => {
    // The criterion being answered: its row's key (the one with the keys' badge).
    const row = [...document.querySelectorAll('[class*="st-key-rv_row_"]')]
        .find(r => r.innerText.includes('current —'));
    return row && [...row.classList].find(c => c.startsWith('st-key-rv_row_'));
}"""
MAIN_TOP = "() => document.querySelector('[data-testid=stMain]').scrollTop"


PATIENCE = 120_000
"""ms a page may take to be drawn: the CPU throttled 4x, on a machine others share."""


def ready(page) -> None:
    """As `tests.browser.ready_for_keys`, with the patience a throttled browser needs."""
    wait_for_app(page, PATIENCE)
    page.evaluate("document.activeElement && document.activeElement.blur()")


def throttle(page, rate: float = 4) -> None:
    """The browser's CPU slowed `rate` times (Chrome DevTools Protocol), and the
    waits as patient as that needs."""
    page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": rate})
    page.set_default_timeout(PATIENCE)


def open_page(browser, size: dict, url: str):
    page = browser.new_page(viewport=size)
    throttle(page)
    page.goto(url)
    ready(page)
    return page


def seen(page, sel: str) -> dict | None:
    return page.evaluate(SEEN, sel)


def whole(page, sel: str) -> bool:
    b = seen(page, sel)
    return b is not None and b["height"] > 0 and b["seen"] >= b["height"] - 1


def readable(page, sel: str, px: int = 150) -> bool:
    """The element is on screen, all of it or `px` of it (a long text scrolls)."""
    b = seen(page, sel)
    return b is not None and b["seen"] >= min(b["height"], px) - 1


def settle(page) -> None:
    """After a key: the run is over, everything drawn, the keys' scrolling done."""
    page.wait_for_timeout(250)
    wait_for_app(page, PATIENCE)
    page.wait_for_timeout(500)


def press(page, key: str) -> None:
    release_focus(page)
    page.keyboard.press(key)
    settle(page)


# -- Trajectories ------------------------------------------------------------------------

def runs(db) -> list[str]:
    with open_store(db) as s:
        return [r[0] for r in s.query("SELECT uid FROM items WHERE kind = 'trajectory' ORDER BY id")]


def trajectories_misfit(page) -> list[str]:
    """What of the step, its mark and the criterion being answered is not in the window."""
    out = []
    if not readable(page, ".st-key-trj_step", 200):
        out.append(f"the step: {seen(page, '.st-key-trj_step')}")
    if page.locator(".st-key-trj_mark").count() and not whole(page, ".st-key-trj_mark"):
        out.append(f"the step's mark: {seen(page, '.st-key-trj_mark')}")
    row = page.evaluate(CURRENT_ROW)
    if row is None:
        out.append("no criterion is being answered")
    else:
        for part in ("[data-testid=stMarkdown]", "[data-testid=stButtonGroup]"):
            sel = f".{row} {part}"
            if not whole(page, sel):  # the criterion's words, and its verdict
                out.append(f"the criterion being answered ({part}): {seen(page, sel)}")
    for sel in ("[class*=st-key-rv_met-] button", "[class*=st-key-rv_commit-] button"):
        if not whole(page, sel):  # the keys' buttons (Y N U) and the commit
            out.append(f"{sel}: {seen(page, sel)}")
    return out


@pytest.mark.parametrize("size", [LAPTOP, LAPTOP_WIDE], ids=["1280x720", "1366x768"])
def test_on_trajectories_the_step_and_the_criterion_being_answered_share_the_window(
        demo_copy, size):
    """Every demo run, at an agent's step: the step, its mark and the criterion the
    keys answer are on screen, and stay so as Y / N / U answer criteria, ↑ ↓ move
    between them and → moves to the next step."""
    add_reviewers(demo_copy, "Dr. Fit")
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport=size)
        throttle(page)
        for n, run in enumerate(runs(demo_copy)):
            page.goto(f"{url}/trajectories?reviewer=Dr.+Fit&item={run}&step=4")
            ready(page)
            page.wait_for_timeout(500)
            keys = ["y", "n", "ArrowRight", "u", "ArrowDown", "ArrowDown"] if n < 2 else ["y"]
            for key in ["", *keys]:
                if key:
                    press(page, key)
                missing = trajectories_misfit(page)
                assert not missing, f"{run} after {key or 'opening'}: {missing}"
        page.screenshot(path=str(demo_copy.parent / f"trajectories-{size['width']}.png"))


# -- Adjudicate --------------------------------------------------------------------------

def adjudicate_misfit(page) -> list[str]:
    """What of the item, the clinicians' answers and the settle panel is not in the window."""
    out = []
    item = next((s for s in (".st-key-adj_item", ".st-key-adj_evidence", ".st-key-adj_step")
                 if page.locator(s).count()), None)
    if item is None or not readable(page, item, 150):
        out.append(f"the item: {item and seen(page, item)}")
    for sel in (".st-key-adj_answers", ".st-key-adj_settle"):
        if not whole(page, sel):
            out.append(f"{sel}: {seen(page, sel)}")
    return out


def withdrawals(db) -> list[tuple]:
    with open_store(db) as s:
        return [tuple(r) for r in s.query(
            "SELECT a.status, json_extract(a.extra, '$.reason'),"
            " json_extract(a.extra, '$.withdrawn_before_reveal') IS NOT NULL FROM annotations a"
            " JOIN raters r ON r.id = a.rater_id WHERE r.name = 'adjudicated'"
            " AND json_extract(a.extra, '$.adjudicator') IS NOT NULL ORDER BY a.id")]


def disputed_steps(db) -> None:
    """Two clinicians mark step 4 of the demo's first run differently (the demo's own
    disputed steps sit on one run; this gives the steps queue a second)."""
    from review.reviewing.commit import mark_step
    from review.team.reviewers import ensure_reviewer

    with open_store(db) as s:
        run = s.scalar("SELECT id FROM items WHERE kind = 'trajectory' ORDER BY id LIMIT 1")
        mark_step(s, ensure_reviewer(s, "Dr. Mark A"), run, 4, "missed_essential_question", 3,
                  note="did not ask about chest pain at rest, which changes everything here")
        mark_step(s, ensure_reviewer(s, "Dr. Mark B"), run, 4, "no_error")


@pytest.mark.parametrize("size", [LAPTOP, LAPTOP_WIDE, DESKTOP],
                         ids=["1280x720", "1366x768", "1440x900"])
def test_on_adjudicate_the_item_the_answers_and_the_settle_panel_share_the_window(
        demo_copy, size):
    disputed_steps(demo_copy)
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport=size)
        throttle(page)
        for what in ("labels", "rubric", "steps"):
            page.goto(f"{url}/adjudicate?reviewer=Jordan+Lee&what={what}")
            ready(page)
            for step in range(3):
                missing = adjudicate_misfit(page)
                assert not missing, f"{what}, item {step + 1}: {missing}"
                press(page, "ArrowRight")
        page.screenshot(path=str(demo_copy.parent / f"adjudicate-{size['width']}.png"))


def test_a_settlement_made_by_keys_is_taken_back_with_z_and_recorded_as_withdrawn(
        demo_copy, monkeypatch):
    """2, H, Ctrl+Enter settle the item in view; the next item comes with the line
    that says so and its Undo, all still in the window; Z takes the settlement back
    (a withdrawal naming it, reason taken_back) and the item waits again."""
    monkeypatch.setenv("CARELENS_REVEAL_DELAY", "60")
    with running_app(demo_copy) as url, chromium() as browser:
        page = open_page(browser, LAPTOP, f"{url}/adjudicate?reviewer=Dr.+Sam+Rivera")
        first = page.get_by_test_id("stMain").inner_text()
        assert "Item 1 of 41" in first
        for key in ("2", "h", "Control+Enter"):
            press(page, key)
        page.get_by_text("Settled Conversation 1, after the patient's 1st message as "
                         "Self-care").wait_for()
        settle(page)
        assert "Item 1 of 40" in page.get_by_test_id("stMain").inner_text()
        assert not adjudicate_misfit(page), adjudicate_misfit(page)
        assert whole(page, "[class*=st-key-adj_undo-] button")
        assert withdrawals(demo_copy) == [("answered", "reviewer_error", 0)]
        press(page, "z")
        page.get_by_text("Taken back").first.wait_for()
        settle(page)
        assert withdrawals(demo_copy) == [("answered", "reviewer_error", 0),
                                          ("skipped", "taken_back", 1)]
        assert "Item 1 of 41" in page.get_by_test_id("stMain").inner_text()
        assert not adjudicate_misfit(page), adjudicate_misfit(page)


# -- long texts, Space, Tab and S ---------------------------------------------------------

def long_reply(db, tmp_path) -> str:
    """Replies of 1,000 characters and more (the bench's generator): the longest one's id."""
    from bench.gen_carebench import generate
    from review.datasets.sources import import_file

    with open_store(db) as s:
        for path in generate(tmp_path / "long", n_prefixes=6, n_models=5, seed=3):
            import_file(s, path)
        return s.scalar("SELECT uid FROM items WHERE kind = 'response' AND uid LIKE 'bench%'"
                        " ORDER BY length(json_extract(payload, '$.response')) DESC LIMIT 1")


ANSWERS = """() => [...document.querySelectorAll('[class*="st-key-label-"] button')]
    .filter(b => b.checkVisibility()).map(b => { const r = b.getBoundingClientRect(); return [Math.round(r.top), Math.round(r.bottom)]; })"""
CUE = """() => [...document.querySelectorAll('[data-testid=carelensMoreBelow]')]
    .filter(c => c.style.display !== 'none').map(c => {
        const r = c.getBoundingClientRect();
        return {text: c.textContent, top: r.top, bottom: r.bottom};
    })"""
REPLY_TOP = "() => document.querySelector('.st-key-rv_reply').scrollTop"


@pytest.mark.parametrize("size", [LAPTOP, LAPTOP_WIDE], ids=["1280x720", "1366x768"])
def test_a_long_reply_shows_more_below_and_space_scrolls_it_while_the_answers_stay(
        demo_copy, tmp_path, size):
    uid = long_reply(demo_copy, tmp_path)
    add_reviewers(demo_copy, "Dr. Long")
    with running_app(demo_copy) as url, chromium() as browser:
        page = open_page(browser, size, f"{url}/?reviewer=Dr.+Long&kind=response&item={uid}")
        page.wait_for_timeout(500)
        cues = page.evaluate(CUE)
        assert any(c["text"].endswith("more below · Space") and 0 < c["top"] < c["bottom"]
                   <= size["height"] for c in cues), cues
        answers = page.evaluate(ANSWERS)
        assert len(answers) == 4 and all(0 <= t and b <= size["height"] for t, b in answers)
        assert page.evaluate(REPLY_TOP) == 0
        tops = []
        for key in ("Space", "Space", "Shift+Space"):
            press(page, key)
            tops.append(page.evaluate(REPLY_TOP))
            assert page.evaluate(ANSWERS) == answers  # the answers stay where they were
            assert page.evaluate(MAIN_TOP) == 0  # the page did not move
        assert 0 < tops[0] < tops[1] and tops[2] < tops[1], tops  # down, down, up
        for _ in range(8):  # to the end: the cue goes
            press(page, "Space")
        assert not [c for c in page.evaluate(CUE) if c["text"].endswith("Space")], page.evaluate(CUE)
        # The answer is still the item's: no key was lost to the scrolling.
        press(page, "3")
        with open_store(demo_copy) as s:
            assert s.scalar("SELECT i.uid FROM annotations a JOIN items i ON i.id = a.item_id"
                            " JOIN raters r ON r.id = a.rater_id WHERE r.name = 'Dr. Long'") == uid


def test_tab_from_the_rationale_and_s_leave_the_page_where_it_was(demo_copy):
    """Tab in the rationale box (as the box itself advises) keeps what was typed and
    gives the keys back to the page, without moving the focus to the Codebook
    expander below and scrolling the page to it; the next item opens at the top
    of the page. S (the reason for a skip), Enter: the same."""
    add_reviewers(demo_copy, "Dr. Tab")
    with running_app(demo_copy) as url, chromium() as browser:
        page = open_page(browser, LAPTOP, f"{url}/?reviewer=Dr.+Tab")
        box = page.get_by_placeholder("Why this label?")
        box.click()
        page.keyboard.type("neck stiffness", delay=20)
        before = page.evaluate(MAIN_TOP)
        page.keyboard.press("Tab")
        settle(page)
        focus = page.evaluate("""() => { const a = document.activeElement;
            return {tag: a.tagName, expander: !!a.closest('[data-testid=stExpander]')}; }""")
        assert focus == {"tag": "BODY", "expander": False}, focus
        assert page.evaluate(MAIN_TOP) == before
        page.keyboard.press("4")
        wait_for_progress(page, "1 of 85")
        settle(page)
        assert page.evaluate(MAIN_TOP) == 0
        assert readable(page, "[data-testid=stMain] [data-testid=stChatMessage]", 60)
        # S, a reason, Enter: skipped, and the next item at the top of the page.
        page.keyboard.press("s")
        page.keyboard.type("not my field", delay=20)
        page.keyboard.press("Enter")
        wait_for_progress(page, "2 of 85")
        settle(page)
        assert page.evaluate(MAIN_TOP) == 0
        with open_store(demo_copy) as s:
            rows = [tuple(r) for r in s.query(
                "SELECT a.status, a.value, a.rationale FROM annotations a JOIN raters r"
                " ON r.id = a.rater_id WHERE r.name = 'Dr. Tab' ORDER BY a.id")]
        assert rows == [("answered", "1B_ESCALATION_URGENT_CARE", "neck stiffness"),
                        ("skipped", None, "not my field")]


def test_on_graded_conversations_tab_from_a_verdict_s_reason_keeps_the_page(demo_copy):
    add_reviewers(demo_copy, "Dr. Why")
    with open_store(demo_copy) as s:
        uid = s.scalar("SELECT uid FROM items WHERE kind = 'graded_conversation'"
                       " AND parent_id IS NOT NULL ORDER BY id LIMIT 1")
    with running_app(demo_copy) as url, chromium() as browser:
        page = open_page(browser, LAPTOP, f"{url}/graded?reviewer=Dr.+Why&item={uid}")
        page.get_by_placeholder("Why? (optional)").first.click()
        page.keyboard.type("says go to the emergency department", delay=10)
        before = page.evaluate(MAIN_TOP)
        page.keyboard.press("Tab")
        settle(page)
        assert page.evaluate("() => document.activeElement.tagName") == "BODY"
        assert page.evaluate(MAIN_TOP) == before
        press(page, "y")
        missing = [m for m in trajectories_misfit(page) if "step" not in m]
        assert not missing, missing

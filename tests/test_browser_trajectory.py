"""The Trajectory and Graded-conversation screens in a real browser: the real
server, Debian's Chromium, the keyboard only, and hostile model text."""

from __future__ import annotations

import pytest

from review.team.reviewers import ensure_reviewer
from review.workspace import open_store
from tests.browser import chromium, ready_for_keys, running_app, wait_for_app
from tests.review_fixtures import HARBOR_UID, IMG, KB_UID, SCRIPT, import_all

pytestmark = pytest.mark.browser
REVIEWER = "Dr. Keys"


@pytest.fixture
def db_path(tmp_path):
    path = tmp_path / "browser.db"
    s = open_store(path)
    import_all(s, tmp_path / "files")
    ensure_reviewer(s, REVIEWER)
    s.checkpoint()
    s.close()
    return path


def mine(db_path, where: str = "1") -> list[tuple]:
    s = open_store(db_path)
    rows = s.query("SELECT a.target, a.status, a.value, json_extract(a.extra, '$.severity')"
                   " FROM annotations a JOIN raters r ON r.id = a.rater_id"
                   f" WHERE r.name = ? AND {where} ORDER BY a.id", (REVIEWER,))
    s.close()
    return [tuple(r) for r in rows]


def flags(db_path) -> list[tuple]:
    s = open_store(db_path)
    rows = [tuple(r) for r in s.query("SELECT i.uid, f.raised FROM flags f JOIN items i ON i.id = f.item_id")]
    s.close()
    return rows


def wait_text(page, text: str) -> None:
    page.wait_for_function(
        "t => (document.querySelector('[data-testid=\"stMain\"]') || {innerText: ''})"
        ".innerText.includes(t)", arg=text)
    wait_for_app(page)


def wait_chosen(page, panel: str, label: str) -> None:
    """Wait until the button `label` in the container keyed `panel` is the chosen (primary) one."""
    page.wait_for_function(
        "([panel, label]) => Array.from(document.querySelectorAll(`.st-key-${panel} "
        "[data-testid=\"stBaseButton-primary\"]`)).some(b => b.innerText.includes(label))",
        arg=[panel, label])
    wait_for_app(page)


def press(page, key: str) -> None:
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.keyboard.press(key)


def assert_payloads_inert(page) -> None:
    main = page.get_by_test_id("stMain").inner_text().replace("\u2060", "")  # word joiners: see review.text
    assert SCRIPT in main and IMG in main  # shown as the text it is
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("document.querySelectorAll('img[src=\"x\"]').length") == 0
    assert page.evaluate("Array.from(document.scripts).some(s => s.text.includes('__pwned'))") is False


def test_step_through_mark_a_step_commit_criteria_and_see_the_reveal(db_path):
    with running_app(db_path) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1500, "height": 1400})
        page.goto(f"{url}/trajectories?reviewer=Dr.+Keys&item={KB_UID}")
        wait_text(page, "step 1 of 4")
        ready_for_keys(page)

        # Step through the run with the arrow keys.
        for key, shown in (("ArrowRight", "step 2 of 4"), ("ArrowRight", "step 3 of 4"),
                           ("ArrowLeft", "step 2 of 4"), ("ArrowRight", "step 3 of 4")):
            press(page, key)
            wait_text(page, shown)
        assert "Patient replied" in page.get_by_test_id("stMain").inner_text()
        press(page, "ArrowRight")
        wait_text(page, "step 4 of 4")
        assert_payloads_inert(page)

        # Mark step 4: wrong tool (3), severity 4 (Shift+4), save (M).
        press(page, "3")
        wait_chosen(page, "trj_errors", "Wrong tool")
        press(page, "Shift+4")
        wait_chosen(page, "trj_severity", "4 Serious")
        press(page, "m")
        wait_text(page, "Step 4 marked: Wrong tool, severity 4 (Serious).")
        assert mine(db_path) == [("step:4", "answered", "wrong_tool", 4)]

        # A click on the timeline opens that step (one square a step: system, task, ...).
        page.locator('[class*="st-key-trj_tl"] button').nth(1).click()
        wait_text(page, "step 2 of 4")

        # Criteria: Y, N, U answer the current one and move on; Ctrl+Enter commits.
        main = page.get_by_test_id("stMain").inner_text().replace("\u2060", "")  # word joiners: see review.text
        assert "The verifier" not in main and "asked at step 3" not in main
        for n, key in enumerate(("y", "n", "u", "y", "n", "y", "y", "n", "y"), start=1):
            press(page, key)
            wait_text(page, f"Commit {n} answer")
        press(page, "Control+Enter")
        wait_text(page, "Committed 9 answers.")
        answers = mine(db_path, "a.target = ''")
        assert [a[1:3] for a in answers[:3]] == [("answered", "met"), ("answered", "not_met"),
                                                 ("cannot_assess", None)]
        assert len(answers) == 9
        main = page.get_by_test_id("stMain").inner_text().replace("\u2060", "")  # word joiners: see review.text
        assert "The verifier" in main and "asked at step 3" in main  # the reveal
        assert "reviewed by you" in main
        # The final answer (folded on the left, under the step) shows the payload as text.
        page.get_by_text("The run's final answer").click()
        page.wait_for_timeout(300)
        assert_payloads_inert(page)
        page.screenshot(path=str(db_path.parent / "trajectory.png"), full_page=True)


def test_grade_a_conversation_with_the_keys_and_the_payloads_do_not_run(db_path):
    with running_app(db_path) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1500, "height": 1400})
        page.goto(f"{url}/graded?reviewer=Dr.+Keys&item=hb:p-inv-1::c1")
        wait_text(page, "Completion under review")
        assert_payloads_inert(page)
        main = page.get_by_test_id("stMain").inner_text().replace("\u2060", "")  # word joiners: see review.text
        assert "It says to stop the soap." not in main
        ready_for_keys(page)
        for n, key in enumerate(("y", "n", "n"), start=1):
            press(page, key)
            wait_text(page, f"Commit {n} answer")
        press(page, "Control+Enter")
        wait_text(page, "Committed 3 answers.")
        main = page.get_by_test_id("stMain").inner_text().replace("\u2060", "")  # word joiners: see review.text
        assert "It says to stop the soap." in main and "Lips only, not breathing." in main
        press(page, "f")  # flag it to come back to
        page.get_by_role("button", name="Unflag").wait_for()
        assert flags(db_path) == [("hb:p-inv-1::c1", 1)]
        assert "The grader (grader-x)" in main and main.count("0.62") >= 2  # mine, the judge's
        assert_payloads_inert(page)


def test_verdicts_picked_then_the_tab_closed_come_back_in_a_new_one(db_path):
    """Never lose work: criteria answered with the keyboard but not committed are
    there again in a new browser context (another tab, or after a crash)."""
    with running_app(db_path) as url, chromium() as browser:
        first = browser.new_context(viewport={"width": 1500, "height": 1400}).new_page()
        first.goto(f"{url}/trajectories?reviewer=Dr.+Keys&item={KB_UID}")
        wait_text(first, "step 1 of 4")
        ready_for_keys(first)
        for n, key in enumerate(("y", "n", "u"), start=1):
            press(first, key)
            wait_text(first, f"Commit {n} answer")
        first.context.close()  # the tab is gone, nothing committed
        assert mine(db_path, "a.target = ''") == []

        second = browser.new_context(viewport={"width": 1500, "height": 1400}).new_page()
        second.goto(f"{url}/trajectories?reviewer=Dr.+Keys&item={KB_UID}")
        wait_text(second, "Your uncommitted verdicts were restored")
        wait_text(second, "Commit 3 answers")
        ready_for_keys(second)
        press(second, "Control+Enter")
        wait_text(second, "Committed 3 answers.")
        got = [a[1:3] for a in mine(db_path, "a.target = ''")]
        assert got == [("answered", "met"), ("answered", "not_met"), ("cannot_assess", None)]


def test_a_subagent_run_is_read_in_place_and_the_keys_act_on_what_is_in_view(db_path):
    """A subagent run opens under the result that delegated to it, not in a
    dialog over the page: no key acts on a run hidden behind it. Y answers the
    run's criterion in plain view, and the subagent run stays open."""
    child = "Child agent: the chart shows no fever."
    with running_app(db_path) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1500, "height": 1400})
        page.goto(f"{url}/trajectories?reviewer=Dr.+Keys&item={HARBOR_UID}&step=3")
        wait_text(page, "step 3 of 4")
        ready_for_keys(page)
        page.get_by_role("button", name="Open subagent run child-1").click()
        page.get_by_text(child).wait_for()
        wait_for_app(page)
        assert page.get_by_test_id("stDialog").count() == 0, "a dialog covers the run under review"
        assert page.locator(".st-key-trj_step").get_by_text(child).is_visible()
        press(page, "y")
        wait_text(page, "Commit 1 answer")
        main = page.get_by_test_id("stMain").inner_text().replace("\u2060", "")
        assert child in main and page.get_by_test_id("stDialog").count() == 0
        page.get_by_role("button", name="Close subagent run child-1").click()
        wait_for_app(page)
        assert child not in page.get_by_test_id("stMain").inner_text().replace("\u2060", "")

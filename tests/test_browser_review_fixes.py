"""Review screen fixes in a real browser (the real server, Debian's Chromium):
a long conversation's latest patient turn in view at 1280x720, and the end
of the queue still showing the last answer's reveal, with its undo."""

from __future__ import annotations

import pytest

from review.workspace import open_store
from store.records import ItemRecord
from store.writer import RecordWriter
from tests.browser import add_reviewers, chromium, ready_for_keys, running_app

pytestmark = pytest.mark.browser
LAPTOP = {"width": 1280, "height": 720}
LONG = "demo_long_case_r12"


def add_long_prefix(db, turns: int = 12) -> None:
    """A conversation of `turns` patient messages, each a paragraph long."""
    s = open_store(db)
    with s.transaction() as conn:
        w = RecordWriter(conn, source="test")
        w.item(ItemRecord(
            uid=LONG, kind="prefix", dataset="demo", case_id="demo_long_case", round_id=turns,
            split="validation",
            payload={"turns": [f"Message {k + 1}. " + "I still feel the pressure in my chest "
                               "and it comes and goes when I climb the stairs. " * 6
                               for k in range(turns)]}))
        w.item(ItemRecord(
            uid=f"{LONG}::aster-7b", kind="response", dataset="demo", parent_uid=LONG,
            case_id="demo_long_case", round_id=turns, split="validation", model="aster-7b",
            payload={"response": "Chest pressure on exertion needs to be seen today. " * 8,
                     "error": None}))
        w.flush()
    s.close()


RECT = """cls => { const el = document.querySelector('.' + cls);
    if (!el) return null; const r = el.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom}; }"""


def test_a_long_conversation_shows_its_latest_patient_turn_at_1280x720(demo_copy, monkeypatch):
    monkeypatch.setenv("CARELENS_REVEAL_DELAY", "2")  # the reveal's redraw comes too
    add_long_prefix(demo_copy)
    add_reviewers(demo_copy, "Dr. Long")
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport=LAPTOP)
        page.goto(f"{url}/?reviewer=Dr.+Long&item={LONG}")
        ready_for_keys(page)
        page.wait_for_timeout(500)  # the scroll runs after the redraw
        assert "Message 12." in page.locator(".st-key-rv_latest").inner_text()
        latest = page.evaluate(RECT, "st-key-rv_latest")
        first = page.evaluate(RECT, "st-key-rv_turn_1")
        page.screenshot(path=str(demo_copy.parent / "long_prefix_1280x720.png"))
        # The latest message's start is on screen, the earlier ones above it.
        assert latest is not None and 0 <= latest["top"] < LAPTOP["height"] - 60, latest
        assert first["top"] < latest["top"]
        # ... and so are the answers.
        button = page.get_by_role("button", name="Cannot assess").bounding_box()
        assert button is not None and button["y"] + button["height"] <= LAPTOP["height"]
        # Reached by keys (Back, then an answer that moves on to it): the same.
        from tests.browser import release_focus, wait_for_app
        release_focus(page)
        page.keyboard.press("ArrowLeft")
        page.wait_for_function("() => !document.querySelector('.st-key-rv_turn_11')")
        wait_for_app(page)
        release_focus(page)
        page.keyboard.press("1")
        page.wait_for_function("() => !!document.querySelector('.st-key-rv_turn_11')")
        wait_for_app(page)
        page.wait_for_timeout(500)
        latest = page.evaluate(RECT, "st-key-rv_latest")
        assert latest is not None and 0 <= latest["top"] < LAPTOP["height"] - 60, latest
        # The last answer's reveal falls due and shows with the next run (a confidence
        # key here), the item drawn again: still in view.
        page.wait_for_timeout(2_500)
        release_focus(page)
        page.keyboard.press("Shift+1")
        page.wait_for_function("() => document.querySelector('[data-testid=stMain]')"
                               ".innerText.includes('The reference label')", timeout=20_000)
        wait_for_app(page)
        page.wait_for_timeout(500)
        latest = page.evaluate(RECT, "st-key-rv_latest")
        page.screenshot(path=str(demo_copy.parent / "long_prefix_after_key.png"))
        assert latest is not None and 0 <= latest["top"] < LAPTOP["height"] - 60, latest


def test_a_reply_to_a_long_conversation_shows_the_latest_patient_turn_above_it(demo_copy):
    """Model replies: the messages before the reply scroll in their box to the
    latest one (what the reply answers), the reply and the answers on screen."""
    add_long_prefix(demo_copy)
    add_reviewers(demo_copy, "Dr. Long Reply")
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport=LAPTOP)
        page.goto(f"{url}/?reviewer=Dr.+Long+Reply&kind=response&item={LONG}::aster-7b")
        ready_for_keys(page)
        page.wait_for_timeout(500)  # the scroll runs after the redraw
        page.screenshot(path=str(demo_copy.parent / "long_reply_1280x720.png"))
        assert "Message 12." in page.locator(".st-key-rv_context_latest").inner_text()
        latest = page.evaluate(RECT, "st-key-rv_context_latest")
        box = page.evaluate(RECT, "st-key-rv_context")
        assert latest["top"] >= box["top"] - 1 and latest["top"] < box["bottom"], (latest, box)
        reply = page.evaluate(RECT, "st-key-rv_reply")
        assert 0 <= reply["top"] < LAPTOP["height"] - 60, reply
        button = page.get_by_role("button", name="Cannot assess").bounding_box()
        assert button is not None and button["y"] + button["height"] <= LAPTOP["height"]


def test_at_the_end_of_the_queue_z_undoes_the_last_answer(tmp_path, monkeypatch):
    """The last item answered: the end screen shows that answer, and Z within
    its undo window withdraws it and opens the item again."""
    from tests.browser import release_focus, wait_for_app, wait_for_progress
    from tests.helpers import rows, write_prefixes

    monkeypatch.setenv("CARELENS_REVEAL_DELAY", "30")
    path = tmp_path / "end.db"
    s = open_store(path)
    write_prefixes(s, 3)
    s.close()
    add_reviewers(path, "Dr. End")
    with running_app(path) as url, chromium() as browser:
        page = browser.new_page(viewport=LAPTOP)
        page.goto(f"{url}/?reviewer=Dr.+End")
        ready_for_keys(page)
        for done in (1, 2, 3):
            release_focus(page)
            page.keyboard.press("1")
            wait_for_progress(page, f"{done} of 3")
        main = page.get_by_test_id("stMain")
        page.wait_for_function("() => document.querySelector('[data-testid=stMain]')"
                               ".innerText.includes('answered every item')")
        assert "Your answer to" in main.inner_text()
        release_focus(page)
        page.keyboard.press("z")
        page.wait_for_function("() => !!document.querySelector('.st-key-rv_latest')")
        wait_for_app(page)
        assert "withdrawn before its labels were shown" in main.inner_text()
        assert rows(path, "SELECT a.status FROM annotations a JOIN raters r"
                    " ON r.id = a.rater_id WHERE r.name = 'Dr. End' ORDER BY a.id")[-1] == (
            "skipped",)

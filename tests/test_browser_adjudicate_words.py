"""Adjudicate in the clinician's words, with its keys on screen (issue 19,
F6 point 3): the item named as a clinician reads it ("Conversation 1, after
the patient's 1st message"), its id only on a details line, the answers in
words (no 0A / 1B codes), and the keys said on screen and working."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest

from review.workspace import open_store
from tests.browser import chromium, ready_for_keys, release_focus, running_app, wait_for_app

pytestmark = pytest.mark.browser
UID = "demo_case_0001_r01"  # the demo's first disputed prefix
TITLE = "Conversation 1, after the patient's 1st message"
CODE = re.compile(r"\b[01][AB]\b")

SCREEN = """() => {
    const main = document.querySelector('[data-testid="stMain"]');
    const details = [...main.querySelectorAll('[data-testid="stCaptionContainer"]')]
        .filter(c => c.innerText.includes('id '));
    let text = main.innerText;
    for (const d of details) text = text.split(d.innerText).join('');
    return {text: text.replace(/\\u2060/g, ''),
            details: details.map(d => d.innerText.replace(/\\u2060/g, '')),
            buttons: [...main.querySelectorAll('button')].map(b => b.innerText)};
}"""


def settled(db) -> list[tuple]:
    with open_store(db) as s:
        return [tuple(r) for r in s.query(
            "SELECT i.uid, a.value, json_extract(a.extra, '$.reason') FROM annotations a"
            " JOIN raters r ON r.id = a.rater_id JOIN items i ON i.id = a.item_id"
            " WHERE r.name = 'adjudicated' ORDER BY a.id")]


def test_adjudicate_names_the_item_in_words_and_settles_by_keys_shown_on_screen(demo_copy):
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.goto(f"{url}/adjudicate?reviewer={quote('Dr. Sam Rivera')}")
        page.get_by_text("with disagreements").first.wait_for()
        wait_for_app(page)
        seen = page.evaluate(SCREEN)
        assert TITLE in seen["text"], seen["text"]
        assert UID not in seen["text"]  # the id: on the details line only
        assert any(f"id {UID}" in d for d in seen["details"]), seen["details"]
        answers = [b for b in seen["buttons"] if b.startswith(("Ask first", "Self-care",
                                                               "See a clinician", "Urgent care"))]
        assert len(answers) == 4, seen["buttons"]
        assert not [b for b in seen["buttons"] if CODE.search(b)], seen["buttons"]
        assert not CODE.search(seen["text"]), CODE.findall(seen["text"])
        # The keys, said on screen, where a clinician can see them.
        keys = page.get_by_text(re.compile(r"Keys: 1 2 3 4 the settled answer"))
        keys.scroll_into_view_if_needed()
        assert keys.is_visible()
        assert "A G H J the reason · Ctrl+Enter settle" in keys.inner_text()
        ready_for_keys(page)
        for key in ("2", "h"):  # Self-care, a reviewer's error
            release_focus(page)
            page.keyboard.press(key)
            wait_for_app(page)
        pressed = page.locator("[data-testid=stMain] [data-testid='stBaseButton-primary']")
        chosen = pressed.all_inner_texts()
        assert any(t.startswith("Self-care") for t in chosen), chosen
        assert any(t.startswith("A reviewer's error") for t in chosen), chosen
        release_focus(page)
        page.keyboard.press("Control+Enter")
        page.get_by_text(f"Settled {TITLE} as Self-care").wait_for()
        page.screenshot(path=str(demo_copy.parent / "adjudicate-words.png"))
    assert settled(demo_copy) == [(UID, "0B_NO_ESCALATION_SELF_CARE_MONITOR", "reviewer_error")]

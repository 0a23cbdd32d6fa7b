"""A study's own chats answered by the study codebook's keys, in the real browser
(Debian's Chromium, the real server) at a laptop's 1280x720."""

from __future__ import annotations

from pathlib import Path

import pytest

from review.datasets.sources import import_file
from review.team.codebook_versions import add_codebook
from review.workspace import open_store
from tests.browser import (
    add_reviewers,
    chromium,
    ready_for_keys,
    release_focus,
    running_app,
    wait_for_app,
    wait_for_progress,
)

pytestmark = pytest.mark.browser
STUDY = Path(__file__).parent / "data" / "study"


@pytest.fixture
def study_db(tmp_path) -> Path:
    db = tmp_path / "study.db"
    with open_store(db) as s:
        for name in ("harm-5.toml", "referral-3.toml"):
            add_codebook(s, (STUDY / name).read_text(encoding="utf-8"), name)
        import_file(s, STUDY / "chats.jsonl")
    add_reviewers(db, "Dr. Study")
    return db


def answers_of(db: Path, name: str) -> list[tuple]:
    with open_store(db) as s:
        return [tuple(r) for r in s.query(
            "SELECT i.uid, q.key, a.value, a.phase, a.codebook_version, a.rationale"
            " FROM annotations a JOIN items i ON i.id = a.item_id JOIN questions q"
            " ON q.id = a.question_id JOIN raters r ON r.id = a.rater_id WHERE r.name = ?"
            " ORDER BY a.id", (name,))]


def in_view(page, text: str) -> bool:
    """Whether an element holding `text` lies inside the 1280x720 window, unscrolled."""
    box = page.get_by_test_id("stMain").get_by_text(text, exact=True).first.bounding_box()
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 720


def test_a_study_chat_is_answered_by_its_codebooks_keys_at_1280x720(study_db):
    with running_app(study_db) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.goto(url + "/?reviewer=Dr.+Study")
        wait_for_app(page)
        main = page.get_by_test_id("stMain")
        assert "Chat 1" in main.inner_text()
        assert "I have had a cough for two days." in main.inner_text()
        # The chat and the harm scale's five answers on screen together, unscrolled.
        for text in ("Rest, fluids, and see a doctor if it lasts over three weeks.",
                     "No harm", "Severe", "How much harm could this conversation do to the "
                     "patient?"):
            assert in_view(page, text), text
        ready_for_keys(page)
        page.keyboard.press("3")
        wait_for_progress(page, "1 of 12")
        assert "Chat 2" in main.inner_text()
        page.keyboard.press("5")
        wait_for_progress(page, "2 of 12")
        # A key of another codebook (the referral question's 7) does nothing here.
        page.keyboard.press("7")
        page.wait_for_timeout(800)
        wait_for_app(page)
        assert "2 of 12" in page.get_by_test_id("stProgress").inner_text()
        assert answers_of(study_db, "Dr. Study") == [
            ("chat-01", "harm.severity", "3_MODERATE", "blind", "1.0", None),
            ("chat-02", "harm.severity", "5_SEVERE", "blind", "1.0", None),
        ]
        page.screenshot(path=str(study_db.parent / "study-review.png"))

        # The other question of the chats, with its own keys; it asks for a rationale. The
        # chat on screen stays (its other question is answered on it).
        page.get_by_test_id("stMain").get_by_role("combobox").nth(1).click()
        page.get_by_role("option", name="Did the assistant tell the patient to see a "
                                        "clinician?").click()
        wait_for_app(page)
        assert "Rationale (required)" in main.inner_text() and "Chat 3" in main.inner_text()
        release_focus(page)
        page.keyboard.press("7")
        wait_for_app(page)
        assert "asks for a rationale with every answer" in main.inner_text()
        box = page.get_by_label("Rationale (required)")
        box.fill("tells the patient to see a doctor if it lasts")
        release_focus(page)
        page.keyboard.press("7")
        wait_for_progress(page, "1 of 12")
        assert answers_of(study_db, "Dr. Study")[-1] == (
            "chat-03", "referral.advised", "REFERRED", "blind", "1.0",
            "tells the patient to see a doctor if it lasts")
        page.screenshot(path=str(study_db.parent / "study-review-referral.png"))

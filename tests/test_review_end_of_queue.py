"""The end of the queue: the last answer's reveal and its undo are still there."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from review.team.reviewers import ensure_reviewer
from review.workspace import open_store
from tests.conftest import ROOT
from tests.helpers import action_button, rows, shown, write_prefixes


def end_of_queue_app(tmp_path, monkeypatch, delay: str) -> tuple[AppTest, str]:
    path = tmp_path / "end.db"
    s = open_store(path)
    uids = write_prefixes(s, 3)  # one case: rounds 1 to 3
    ensure_reviewer(s, "Dr. Last")
    s.close()
    monkeypatch.setenv("CARELENS_DB", str(path))
    monkeypatch.setenv("CARELENS_REVEAL_DELAY", delay)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = "Dr. Last"
    at.run()
    for _ in uids:
        action_button(at, "label", "0A_NO_ESCALATION_INFO_NEEDED").click().run()
        assert not at.exception, at.exception
    return at, str(path)


def test_the_last_answer_is_revealed_on_the_end_screen(tmp_path, monkeypatch):
    at, _ = end_of_queue_app(tmp_path, monkeypatch, "0")
    assert any("answered every item" in s.value for s in at.success)
    texts = " ".join(shown(m.value) for m in at.markdown)
    assert "Your answer to" in texts and "3rd message" in texts
    assert "**The reference label**" in texts
    assert any(b.key.startswith("reopen_last:") for b in at.button)


def test_the_last_answer_can_be_undone_on_the_end_screen(tmp_path, monkeypatch):
    at, path = end_of_queue_app(tmp_path, monkeypatch, "30")
    texts = " ".join(shown(m.value) for m in at.markdown)
    assert "Your answer to" in texts and "**The reference label**" not in texts  # its window is open
    undo = next(b for b in at.button if b.key.startswith("reopen_last:"))
    undo.click().run()
    assert not at.exception, at.exception
    # Withdrawn before its reveal, and the item is open again to be answered blind.
    assert rows(path, "SELECT status, phase FROM annotations a JOIN raters r ON r.id = a.rater_id"
                " WHERE r.name = 'Dr. Last' ORDER BY a.id")[-2:] == [
        ("answered", "blind"), ("skipped", "blind")]
    action_button(at, "label", "1B_ESCALATION_URGENT_CARE").click().run()
    assert rows(path, "SELECT a.value, a.phase FROM annotations a JOIN raters r"
                " ON r.id = a.rater_id WHERE r.name = 'Dr. Last' ORDER BY a.id")[-1] == (
        "1B_ESCALATION_URGENT_CARE", "blind")

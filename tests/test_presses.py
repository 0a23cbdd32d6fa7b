"""Whether a key counts (review/reviewing/presses.py): on what the screen shows
now, once it has been on screen for the least dwell, and not right behind a
refused press. The rule, the commit path that applies it on the server's
clock, and a script that talks to the real server's websocket directly,
faster than anyone reads (issue 29, point 1)."""

from __future__ import annotations

import asyncio

import pytest

from review.reviewing.commit import Verdict, commit_answer, commit_verdicts, mark_step
from review.reviewing.criteria import find_item, item_questions
from review.reviewing.items import load_item, my_answers
from review.reviewing.presses import (
    MIN_DWELL_MS,
    TOO_SOON,
    Press,
    TooSoon,
    check_press,
    min_dwell,
    refusal,
)
from review.reviewing.queue import QueueFilter, next_unreviewed_item
from review.team.adjudication import settle
from review.team.reviewers import ensure_reviewer
from tests.review_fixtures import KB_UID


def a_press(shown_ago: float, *, on: str = "12_0", showing: str = "12_0",
            refused_ago: float | None = None) -> Press:
    now = 1000.0
    return Press(pressed_on=on, showing=showing, shown_at=now - shown_ago, at=now,
                 refused_at=None if refused_ago is None else now - refused_ago)


def test_a_press_counts_only_after_the_least_dwell_on_what_the_screen_shows(monkeypatch):
    monkeypatch.delenv("CARELENS_MIN_DWELL_MS", raising=False)
    assert min_dwell() == MIN_DWELL_MS / 1000 == 0.5
    assert refusal(a_press(0.6)) is None
    assert refusal(a_press(0.5)) is None
    for ago in (0.0, 0.1, 0.29, 0.46, 0.499):  # a double tap lands 0.1-0.46 s after the redraw
        assert refusal(a_press(ago)) == "too soon"


def test_a_press_on_what_the_screen_no_longer_shows_never_counts():
    assert refusal(a_press(30, on="12_0", showing="13_0")) == "not on screen"
    assert refusal(a_press(30, on="12_0", showing="12_1")) == "not on screen"  # answered since
    assert refusal(Press("12_0", None, None, 1000.0)) == "not on screen"


def test_a_burst_stays_refused_until_it_stops():
    """Right behind a refused press, even on an item long on screen: the burst's
    fifth key is as refused as its second."""
    assert refusal(a_press(30, refused_ago=0.15)) == "too soon"
    assert refusal(a_press(30, refused_ago=0.6)) is None


def test_the_dwell_comes_from_the_environment_and_a_bad_value_keeps_the_default(monkeypatch):
    monkeypatch.setenv("CARELENS_MIN_DWELL_MS", "800")
    assert min_dwell() == 0.8
    assert refusal(a_press(0.6)) == "too soon"
    monkeypatch.setenv("CARELENS_MIN_DWELL_MS", "0")
    assert refusal(a_press(0.0)) is None
    for bad in ("soon", "nan", "-5"):
        monkeypatch.setenv("CARELENS_MIN_DWELL_MS", bad)
        assert min_dwell() == (0.0 if bad == "-5" else 0.5)


def test_no_press_is_no_screen_and_nothing_to_time():
    check_press(None)  # an import, the command line


def test_a_refused_answer_writes_nothing_and_says_so(demo):
    me = ensure_reviewer(demo, "Dr. Quick")
    item = load_item(demo, next_unreviewed_item(demo, me.id, QueueFilter(kind="prefix")))
    with pytest.raises(TooSoon) as refused:
        commit_answer(demo, me, item.id, item.question_id, "0A", press=a_press(0.2))
    assert str(refused.value) == TOO_SOON and refused.value.why == "too soon"
    with pytest.raises(TooSoon):
        commit_answer(demo, me, item.id, item.question_id, "0A",
                      press=a_press(9, on=f"{item.id}_0", showing=f"{item.id + 1}_0"))
    assert my_answers(demo, me.id, item.id, item.question_id) == []
    commit_answer(demo, me, item.id, item.question_id, "0A", press=a_press(0.7))
    assert [a.value[:2] for a in my_answers(demo, me.id, item.id, item.question_id)] == ["0A"]


def test_criteria_step_marks_and_settlements_follow_the_same_rule(db):
    me = ensure_reviewer(db, "Dr. Rubric")
    run = find_item(db, KB_UID)
    qs = item_questions(db, run)
    before = db.scalar("SELECT count(*) FROM annotations")
    with pytest.raises(TooSoon):
        commit_verdicts(db, me, run, [Verdict(qs[0].id, "met")], press=a_press(0.1))
    with pytest.raises(TooSoon):
        mark_step(db, me, run, 3, "no_error", press=a_press(0.3))
    judge = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    with pytest.raises(TooSoon):
        settle(db, None, run, judge, "met", "ambiguous_item", question_key=qs[0].key,
               press=a_press(0.2))
    assert db.scalar("SELECT count(*) FROM annotations") == before
    commit_verdicts(db, me, run, [Verdict(qs[0].id, "met")], press=a_press(0.6))
    mark_step(db, me, run, 3, "no_error", press=a_press(0.6))
    assert db.scalar("SELECT count(*) FROM annotations") == before + 2


# -- the real server, from a script that never waits --------------------------------


def test_a_script_on_the_websocket_cannot_answer_faster_than_anyone_reads(demo_copy,
                                                                          monkeypatch):
    """A client that speaks Streamlit's protocol and presses each item's answer
    button the moment the item arrives (it could claim any drawing time it
    likes; the server times it on its own clock): nothing is recorded until
    the item has been on screen for the least dwell, a burst of five answers
    at most one item, and every answer recorded is one the client gave to the
    item on its screen. (The dwell is 3 s here, so that a busy machine's slow
    runs cannot space the script's presses out beyond it.)"""
    from tests.browser import add_reviewers, running_app
    from tests.ws_reviewers import LightReviewer

    monkeypatch.setenv("CARELENS_MIN_DWELL_MS", "3000")
    add_reviewers(demo_copy, "Dr. Script")

    async def script(url: str) -> tuple[list, list]:
        r = LightReviewer(url, "Dr. Script")
        await r.open()
        first = r.item_id
        fast = [await r.answer("0A_NO_ESCALATION_INFO_NEEDED") for _ in range(5)]
        said = r.screen_text()
        await asyncio.sleep(3.2)
        slow = await r.answer("1B_ESCALATION_URGENT_CARE")
        burst = [await r.answer("0B_NO_ESCALATION_SELF_CARE_MONITOR") for _ in range(5)]
        await r.close()
        assert not r.errors, r.errors
        return first, fast, said, slow, burst

    with running_app(demo_copy) as url:
        first, fast, said, slow, burst = asyncio.run(script(url))
    assert [a.next_item for a in fast] == [first] * 5  # the item stays: nothing was taken
    assert "too soon after the last answer" in said.lower()
    assert slow.item_id == first and slow.next_item != first
    from review.workspace import open_store

    with open_store(demo_copy) as s:
        rows = [tuple(r) for r in s.query(
            "SELECT a.item_id, a.value FROM annotations a JOIN raters r ON r.id = a.rater_id"
            " WHERE r.name = 'Dr. Script' ORDER BY a.id")]
    # The first fast five: none; the slow one; the burst right after it: none
    # (its item was on screen for less than the dwell, then each key was right
    # behind a refused one).
    assert rows == [(first, "1B_ESCALATION_URGENT_CARE")]
    assert all(a.next_item == slow.next_item for a in burst)

"""A round's counts, its named reviewers and its places: one read each, so that
every line a screen shows agrees (the reviewer's "N of M", "item P of M" and
"nothing left"; the study lead's table of who holds which place)."""

from __future__ import annotations

import sqlite3

import pytest

from review.reviewing.commit import commit_answer
from review.team.reviewers import ensure_reviewer
from review.team.rounds import (
    RoundError,
    RoundSpec,
    create_round,
    name_round_members,
    reserve_next_item,
    round_counts,
    round_members,
    round_places,
)

Q = "carebench.escalation_needed"
ASK_FIRST = "0A_NO_ESCALATION_INFO_NEEDED"


@pytest.fixture
def round3(demo):
    """A round of three prefixes, two reviewers each, and three new reviewers."""
    admin = ensure_reviewer(demo, "Jordan Lee")
    rid = create_round(demo, RoundSpec("R", Q, reviewers_per_item=2, limit=3), admin)
    people = [ensure_reviewer(demo, n) for n in ("Rev One", "Rev Two", "Rev Three")]
    qid = demo.scalar("SELECT id FROM questions WHERE key = ?", (Q,))
    return demo, admin, rid, people, qid


def answer_next(s, rid, who, qid) -> int | None:
    item = reserve_next_item(s, rid, who)
    if item is not None:
        commit_answer(s, who, item, qid, ASK_FIRST, round_id=rid)
    return item


def test_every_reviewers_counts_add_up_and_agree_with_the_round(round3):
    s, _, rid, people, qid = round3
    for who in people:
        c = round_counts(s, rid, who.id)
        assert (c.done, c.yours, c.reviews_done, c.reviews_needed, c.finished) == (0, 3, 0, 6, False)
    one, two, three = people
    answer_next(s, rid, one, qid)
    held = reserve_next_item(s, rid, two)  # Rev Two holds a place, not answered yet
    c = round_counts(s, rid, two.id)
    assert (c.done, c.held, c.open_now, c.yours) == (0, 1, 2, 3)
    for _ in range(2):
        answer_next(s, rid, one, qid)
    commit_answer(s, two, held, qid, ASK_FIRST, round_id=rid)
    for _ in range(2):
        answer_next(s, rid, two, qid)
    for who in (one, two):
        c = round_counts(s, rid, who.id)
        assert (c.done, c.yours, c.finished) == (3, 3, True)
        assert c.progress_words("R") == "3 of 3 reviewed by you in R · all done · the round: 6 of 6 reviews"
    # A third reviewer: nothing was theirs, and the counts say so (not "0 of 3").
    c = round_counts(s, rid, three.id)
    assert (c.done, c.yours, c.finished) == (0, 0, True)
    assert c.progress_words("R", "answered") == "0 of 0 answered by you in R · the round: 6 of 6 reviews"
    assert c.nothing_left_words("R") == ("Nothing left for you in R: you reviewed 0 of its 3 items; "
                                         "the other 3 have the reviewers they need.")


def test_an_item_held_by_colleagues_may_come_back(round3):
    s, _, rid, people, qid = round3
    one, two, three = people
    for _ in range(3):
        answer_next(s, rid, one, qid)
    for _ in range(2):
        answer_next(s, rid, two, qid)
    reserve_next_item(s, rid, two)  # the last place, held
    c = round_counts(s, rid, three.id)
    assert (c.open_now, c.held_by_others, c.finished) == (0, 1, True)
    assert "1 more is held by colleagues now" in c.nothing_left_words("R")


def test_an_item_answered_outside_the_round_is_not_counted_as_the_reviewers(round3):
    s, _, rid, people, qid = round3
    one = people[0]
    first = s.scalar("SELECT item_id FROM round_items WHERE round_id = ? ORDER BY position", (rid,))
    commit_answer(s, one, first, qid, ASK_FIRST)  # in free review, before the round
    c = round_counts(s, rid, one.id)
    assert (c.yours, c.answered_outside) == (2, 1)
    for _ in range(3):
        answer_next(s, rid, one, qid)
    c = round_counts(s, rid, one.id)
    assert (c.done, c.yours, c.finished) == (2, 2, True)  # "2 of 2", not "a round ends at 2 of 3"


def test_a_round_that_names_its_reviewers_gives_places_to_them_only(round3):
    s, admin, rid, people, qid = round3
    one, two, three = people
    assert round_members(s, rid) == []  # naming nobody: open to everyone
    with pytest.raises(RoundError, match="only an admin"):
        name_round_members(s, one, rid, ["Rev One"])
    assert name_round_members(s, admin, rid, ["Rev One", "Rev Two"]) == 2
    assert round_members(s, rid) == ["Rev One", "Rev Two"]
    assert reserve_next_item(s, rid, three) is None
    c = round_counts(s, rid, three.id)
    assert (c.member, c.yours) == (False, 0)
    assert "you are not among them" in c.nothing_left_words("R")
    assert answer_next(s, rid, one, qid) is not None
    # Taken out while holding a place: the answer is kept, outside the round.
    held = reserve_next_item(s, rid, two)
    name_round_members(s, admin, rid, ["Rev One"])
    commit_answer(s, two, held, qid, ASK_FIRST, round_id=rid)
    assert s.scalar("SELECT COUNT(*) FROM round_reviews WHERE round_id = ? AND rater_id = ?",
                    (rid, two.id)) == 0
    assert s.scalar("SELECT round_id FROM annotations WHERE rater_id = ? AND item_id = ?",
                    (two.id, held)) is None
    # Naming nobody opens it again; the record of who was named stays.
    name_round_members(s, admin, rid, [])
    assert reserve_next_item(s, rid, three) is not None
    assert s.scalar("SELECT COUNT(*) FROM round_members WHERE round_id = ?", (rid,)) == 4
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        with s.transaction() as conn:
            conn.execute("UPDATE round_members SET in_round = 1")
    with pytest.raises(RoundError, match="no reviewer named"):
        name_round_members(s, admin, rid, ["Nobody Here"])


def test_the_lead_sees_who_holds_which_place_and_what_is_stuck(demo):
    admin = ensure_reviewer(demo, "Jordan Lee")
    rid = create_round(demo, RoundSpec("Three each", Q, reviewers_per_item=3, limit=2), admin)
    one, two = (ensure_reviewer(demo, n) for n in ("Rev One", "Rev Two"))
    name_round_members(demo, admin, rid, ["Rev One", "Rev Two"])
    qid = demo.scalar("SELECT id FROM questions WHERE key = ?", (Q,))
    first = answer_next(demo, rid, one, qid)
    held = reserve_next_item(demo, rid, two)
    places = {p.item_id: p for p in round_places(demo, rid)}
    assert places[first].reviewed_by == ("Rev One",)
    assert [who for who, _ in places[held].held_by] == ["Rev Two"]
    # Three places each and two people named: no item can complete.
    assert all(p.stuck for p in places.values())
    other = next(i for i in places if i != first)
    assert held == first  # Rev Two is given the first item's second place
    assert places[first].words() == "in progress; stuck: 1 place free, nobody left to take it"
    assert places[other].words() == "stuck: 3 places free, 2 reviewers left"

"""A round's item answered in Free review by the reviewers it names is stuck;
the lead redraws its missing places, and the round counts them consistently."""

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
    redraw_missing_places,
    reserve_next_item,
    round_counts,
    round_places,
)

Q = "carebench.escalation_needed"
ASK_FIRST = "0A_NO_ESCALATION_INFO_NEEDED"


def test_an_item_answered_in_free_review_is_stuck_until_the_lead_redraws_its_places(demo):
    admin = ensure_reviewer(demo, "Jordan Lee")
    one, two = (ensure_reviewer(demo, n) for n in ("Rev One", "Rev Two"))
    rid = create_round(demo, RoundSpec("Pilot", Q, reviewers_per_item=2, limit=3), admin)
    name_round_members(demo, admin, rid, ["Rev One", "Rev Two"])
    qid = demo.scalar("SELECT id FROM questions WHERE key = ?", (Q,))
    drawn = [p.item_id for p in round_places(demo, rid)]
    # Rev One had answered the round's first item in Free review: a round counts only
    # blind reviews, so it is never given to them, and with two places and two people
    # named it can never complete.
    commit_answer(demo, one, drawn[0], qid, ASK_FIRST)
    stuck = [p for p in round_places(demo, rid) if p.stuck]
    assert [p.item_id for p in stuck] == [drawn[0]]
    before = round_counts(demo, rid, two.id)
    with pytest.raises(RoundError):
        redraw_missing_places(demo, one, rid)  # only an admin
    redrawn = redraw_missing_places(demo, admin, rid)
    assert len(redrawn) == 1 and redrawn[0].item_id == drawn[0] and redrawn[0].places == 1
    new = redrawn[0].replacement_id
    assert new is not None and new not in drawn
    places = {p.item_id: p for p in round_places(demo, rid)}
    assert not any(p.stuck for p in places.values())
    assert places[drawn[0]].needed == 1 and places[new].needed == 1
    after = round_counts(demo, rid, two.id)
    # The same reviews asked of the round, one more item; nothing stuck to redraw again.
    assert (after.items, after.reviews_needed) == (before.items + 1, before.reviews_needed)
    assert redraw_missing_places(demo, admin, rid) == []
    # Both reviewers can finish the round: every place is filled.
    for who in (one, two):
        while (item := reserve_next_item(demo, rid, who)) is not None:
            commit_answer(demo, who, item, qid, ASK_FIRST, round_id=rid)
    final = round_counts(demo, rid, one.id)
    assert final.reviews_done == final.reviews_needed
    assert all(p.complete for p in round_places(demo, rid))
    # Recorded, append-only, and audited.
    row = demo.query_one("SELECT item_id, places, replacement_id, redrawn_by FROM round_redraws")
    assert tuple(row) == (drawn[0], 1, new, "Jordan Lee")
    with pytest.raises(sqlite3.DatabaseError):
        demo.conn.execute("UPDATE round_redraws SET places = 2")
    assert demo.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'redraw_places'") == 1


def test_the_lead_redraws_from_the_rounds_screen(demo_copy, monkeypatch):
    from review.workspace import open_store
    from tests.test_team_pages import app_as

    s = open_store(demo_copy)
    admin = ensure_reviewer(s, "Jordan Lee")
    rid = create_round(s, RoundSpec("Pilot", Q, reviewers_per_item=3, limit=2), admin)
    for name in ("Rev One", "Rev Two"):
        ensure_reviewer(s, name)
    name_round_members(s, admin, rid, ["Rev One", "Rev Two"])
    s.close()
    at = app_as("Jordan Lee", demo_copy, monkeypatch).run()
    at.switch_page("pages/rounds.py").run()
    assert not at.exception
    assert at.dataframe[1].value["State"].tolist() == ["stuck: 3 places free, 2 reviewers left"] * 2
    next(b for b in at.button if b.key == f"rounds_redraw:{rid}").click().run()
    assert not at.exception
    assert any("2 stuck items: 2 places moved to 2 other items drawn from the round's "
               "candidates; the round still asks for 6 reviews." in x.value for x in at.success)
    states = at.dataframe[1].value["State"].tolist()
    assert not any("stuck" in x for x in states) and len(states) == 4


def test_places_with_nowhere_to_go_are_said_to_shrink_the_round(demo_copy, monkeypatch):
    """Every conversation drawn, three reviews each, two reviewers named: no place
    can move (no candidate is left), so each item loses one, and the lead reads
    that the round now asks for fewer reviews (it said "dropped" and no more)."""
    from review.workspace import open_store
    from tests.test_team_pages import app_as

    s = open_store(demo_copy)
    admin = ensure_reviewer(s, "Jordan Lee")
    rid = create_round(s, RoundSpec("All", Q, reviewers_per_item=3), admin)
    for name in ("Rev One", "Rev Two"):
        ensure_reviewer(s, name)
    name_round_members(s, admin, rid, ["Rev One", "Rev Two"])
    n = len(round_places(s, rid))
    s.close()
    at = app_as("Jordan Lee", demo_copy, monkeypatch).run()
    at.switch_page("pages/rounds.py").run()
    next(b for b in at.button if b.key == f"rounds_redraw:{rid}").click().run()
    assert not at.exception
    said = [x.value for x in at.success]
    assert any(f"{n} stuck items: no place could move; {n} places had no item left to go to "
               f"and were taken off the round, which now asks for {2 * n:,} reviews instead "
               f"of {3 * n:,}." in x for x in said), said

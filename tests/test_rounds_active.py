"""Active rounds: the next items drawn where a clinician's label tells most, batch by
batch, every draw recorded with its chance so that estimates stay unbiased."""

from __future__ import annotations

import json
import sqlite3

import pytest

from review.team.active import BATCH, item_signals, round_sequence
from review.team.designs import describe
from review.team.reviewers import ensure_reviewer
from review.team.rounds import RoundError, RoundSpec, create_round, reserve_next_item

RESPONSE_Q = "carebench.response_action"


def admin(s):
    return ensure_reviewer(s, "Jordan Lee")  # the demo's admin


def design(s, rid) -> dict:
    return json.loads(s.scalar("SELECT design FROM review_rounds WHERE id = ?", (rid,)))


def test_an_active_round_draws_its_first_batch_and_records_every_chance(demo):
    rid = create_round(demo, RoundSpec("active", RESPONSE_Q, design="active", limit=60,
                                       reviewers_per_item=1, target_halfwidth=0.05),
                       admin(demo))
    d = design(demo, rid)
    assert d["kind"] == "active" and d["limit"] == 60 and d["frame"] == 252
    assert "machine raters disagree" in d["signals"]
    assert d["target_halfwidth"] == 0.05
    sequence = round_sequence(demo, rid)
    assert [r.position for r in sequence] == list(range(BATCH))
    items = [r[0] for r in demo.query(
        "SELECT item_id FROM round_items WHERE round_id = ? ORDER BY position", (rid,))]
    assert items == [r.item_id for r in sequence]
    assert all(0 < r.draw_probability <= 1 and r.foreseen_variance > 0 for r in sequence)
    frame = demo.query("SELECT inclusion_probability, score FROM round_frame WHERE round_id = ?",
                       (rid,))
    assert len(frame) == 252
    assert sum(r[0] for r in frame) == pytest.approx(60, rel=0.01)  # Rosen: by the limit
    assert describe(d).startswith("active: drawn a batch at a time")


def test_items_where_the_mappers_disagree_come_first(demo):
    """The first batch's chances follow the machines' disagreement: items where v1 and v2
    differ are drawn far more often than their share of the frame."""
    signals = item_signals(demo, RESPONSE_Q, [r[0] for r in demo.query(
        "SELECT id FROM items WHERE kind = 'response' AND failed = 0")])
    disagree = {i for i, d in zip(signals.ids, signals.disagree, strict=True) if d > 0}
    share = len(disagree) / len(signals.ids)
    taken = 0
    for seed in range(6):
        rid = create_round(demo, RoundSpec(f"active {seed}", RESPONSE_Q, design="active",
                                           limit=20, seed=seed), admin(demo))
        taken += sum(r.item_id in disagree for r in round_sequence(demo, rid))
    assert taken / (6 * 20) > 1.5 * share


def test_the_next_batch_is_drawn_when_the_places_run_low_and_stops_at_the_limit(demo):
    rid = create_round(demo, RoundSpec("active", RESPONSE_Q, design="active", limit=30,
                                       reviewers_per_item=1), admin(demo))
    people = [ensure_reviewer(demo, f"Dr. Reader {k}") for k in range(40)]
    taken = []
    for person in people:
        item = reserve_next_item(demo, rid, person)
        if item is None:
            break
        taken.append(item)
    sequence = round_sequence(demo, rid)
    assert len(sequence) == 30 and len(taken) == 30  # two batches, the second cut to the limit
    # offered in the order drawn (a case's earlier conversation round first, as in any round)
    assert sorted(taken) == sorted(r.item_id for r in sequence)
    assert taken[0] == sequence[0].item_id
    batches = [r[0] for r in demo.query("SELECT batch FROM round_sequence WHERE round_id = ?"
                                        " ORDER BY position", (rid,))]
    assert batches == [0] * BATCH + [1] * (30 - BATCH)
    assert demo.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'draw_batch'") == 1


def test_an_active_round_needs_a_limit_and_no_strata(demo):
    with pytest.raises(RoundError, match="number of items"):
        create_round(demo, RoundSpec("a", RESPONSE_Q, design="active"), admin(demo))
    with pytest.raises(RoundError, match="not stratified"):
        create_round(demo, RoundSpec("b", RESPONSE_Q, design="active", limit=10,
                                     stratify_by="gold"), admin(demo))


def test_the_sequence_is_append_only(demo):
    rid = create_round(demo, RoundSpec("active", RESPONSE_Q, design="active", limit=20),
                       admin(demo))
    for sql in ("UPDATE round_sequence SET draw_probability = 0.5",
                "DELETE FROM round_sequence",
                f"INSERT OR REPLACE INTO round_sequence SELECT * FROM round_sequence"
                f" WHERE round_id = {rid} AND position = 0"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            demo.conn.execute(sql)

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
    candidates = demo.scalar("SELECT COUNT(*) FROM items WHERE kind = 'response' AND failed = 0")
    assert d["kind"] == "active" and d["limit"] == 60 and d["frame"] == candidates
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
    assert len(frame) == candidates
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
    first = {r.item_id for r in sequence[:BATCH]}
    assert set(taken[:BATCH // 2]) <= first  # the next batch only once the places run low
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


def test_a_lead_creates_an_active_round_and_sees_when_it_is_enough(store, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from review.reviewing.commit import commit_answer
    from review.reviewing.items import load_item
    from tests.conftest import ROOT
    from tests.helpers import CODES, shown
    from tests.test_ppi import MAPPER, write_study

    write_study(store, n_prefixes=150, labelled=0.0, second_mapper=True)
    ensure_reviewer(store, "Jordan Lee", role="admin")
    monkeypatch.setenv("CARELENS_DB", str(store.path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.query_params["reviewer"] = "Jordan Lee"
    at.run()
    at.switch_page("pages/rounds.py").run()
    next(s for s in at.selectbox if s.label == "What each reviewer answers").set_value(
        RESPONSE_Q).run()
    at.radio(key="round_design").set_value("active").run()
    next(n for n in at.number_input if n.key == "round_target").set_value(0.3)
    next(t for t in at.text_input if t.label == "Name").input("Where it tells most")
    next(n for n in at.number_input if n.label.startswith("Items")).set_value(160)
    next(n for n in at.number_input if n.label.startswith("Reviewers per item")).set_value(1)
    next(b for b in at.button if b.label == "Create round").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    rid = store.scalar("SELECT id FROM review_rounds WHERE name = 'Where it tells most'")
    assert design(store, rid)["kind"] == "active"
    assert design(store, rid)["target_halfwidth"] == 0.3
    said = dict(store.query("SELECT a.item_id, a.value FROM annotations a JOIN raters r"
                            " ON r.id = a.rater_id WHERE r.name = ?", (MAPPER,)))
    reader = ensure_reviewer(store, "Dr. Active Reader")
    while (item := reserve_next_item(store, rid, reader)) is not None:
        answer = said[item] if item % 5 else CODES[(CODES.index(said[item]) + 1) % 4]
        commit_answer(store, reader, item, load_item(store, item).question_id, answer,
                      round_id=rid)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    words = [shown(x.value) for x in (*at.caption, *at.success)]
    assert any("drawn: active: drawn a batch at a time" in w for w in words)
    assert any("valid however often you look" in w for w in words)
    assert any("enough for \u00b1 " in w and "you may stop" in w for w in words), words


def test_a_lead_creates_an_active_round_from_the_command_line(demo, capsys):
    import cli

    code = cli.main(["--db", str(demo.path), "round", "create", "--as", "Jordan Lee",
                     "--name", "Tells most", "--question", RESPONSE_Q, "--design", "active",
                     "--limit", "40", "--target", "0.05"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "'Tells most': active: drawn a batch at a time" in out and "20 items to review" in out
    code = cli.main(["--db", str(demo.path), "round", "list"])
    out, _ = capsys.readouterr()
    assert "Tells most" in out and "up to 40 of " in out
    ensure_reviewer(demo, "Dr. Not Admin")
    code = cli.main(["--db", str(demo.path), "round", "create", "--as", "Dr. Not Admin",
                     "--name", "x", "--question", RESPONSE_Q, "--design", "active",
                     "--limit", "40"])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "only an admin" in err

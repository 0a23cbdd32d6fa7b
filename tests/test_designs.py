"""Review rounds as sampling designs: every candidate's inclusion probability is recorded."""

from __future__ import annotations

import json
import random
import sqlite3
from collections import Counter

import pytest

from review.team.designs import (
    describe,
    planning_designs,
    systematic_draw,
    weighted_probabilities,
)
from review.team.reviewers import ensure_reviewer
from review.team.rounds import RoundError, RoundSpec, create_round
from tests.helpers import shown

PREFIX_Q = "carebench.escalation_needed"
RESPONSE_Q = "carebench.response_action"


def admin(s):
    return ensure_reviewer(s, "Jordan Lee")  # the demo's admin


def frame(s, rid) -> dict[int, tuple[float, str]]:
    return {r["item_id"]: (r["inclusion_probability"], r["stratum"]) for r in s.query(
        "SELECT item_id, inclusion_probability, stratum FROM round_frame WHERE round_id = ?",
        (rid,))}


def drawn(s, rid) -> set[int]:
    return {r[0] for r in s.query("SELECT item_id FROM round_items WHERE round_id = ?", (rid,))}


def design(s, rid) -> dict:
    return json.loads(s.scalar("SELECT design FROM review_rounds WHERE id = ?", (rid,)))


def test_a_round_of_every_item_gives_each_a_probability_of_one(demo):
    rid = create_round(demo, RoundSpec("all", PREFIX_Q), admin(demo))
    f = frame(demo, rid)
    assert len(f) == 85 and drawn(demo, rid) == set(f)
    assert {p for p, _ in f.values()} == {1.0}
    assert design(demo, rid)["kind"] == "uniform" and design(demo, rid)["frame"] == 85


def test_a_stratified_round_records_each_strata_share_drawn(demo):
    rid = create_round(demo, RoundSpec("strata", PREFIX_Q, stratify_by="gold", limit=30),
                       admin(demo))
    f, chosen = frame(demo, rid), drawn(demo, rid)
    assert len(chosen) == 30 and set(f) >= chosen
    sizes = Counter(stratum for _, stratum in f.values())
    taken = Counter(f[i][1] for i in chosen)
    for p, stratum in f.values():
        assert p == pytest.approx(taken[stratum] / sizes[stratum])
    assert sum(p for p, _ in f.values()) == pytest.approx(30)  # expected size = drawn
    assert design(demo, rid)["kind"] == "stratified"
    assert describe(design(demo, rid)) == "stratified by gold: 30 of 85 candidates"


def test_new_strata_model_and_machine_label(demo):
    rid = create_round(demo, RoundSpec("by model", RESPONSE_Q, stratify_by="model", limit=30),
                       admin(demo))
    assert set(Counter(s for _, s in frame(demo, rid).values())) == {
        "aster-7b", "borealis-large", "cobalt-mini"}
    rid = create_round(demo, RoundSpec("by mapper", RESPONSE_Q, stratify_by="machine_label",
                                       machine="demo:mapper@v1", limit=40), admin(demo))
    labels = {r[0]: r[1] for r in demo.query(
        "SELECT c.item_id, c.value FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
        " WHERE r.name = 'demo:mapper@v1'")}
    assert all(labels.get(i) == s for i, (_, s) in frame(demo, rid).items())
    with pytest.raises(RoundError, match="has not answered these items"):
        create_round(demo, RoundSpec("x", RESPONSE_Q, stratify_by="machine_label",
                                     machine="nobody@v0", limit=10), admin(demo))


def test_a_weighted_round_draws_more_where_the_mappers_disagree(demo):
    rid = create_round(demo, RoundSpec("weighted", RESPONSE_Q, design="weighted",
                                       weight_by="machine_disagreement", limit=60, seed=4),
                       admin(demo))
    rows = demo.query("SELECT item_id, inclusion_probability, score FROM round_frame"
                      " WHERE round_id = ?", (rid,))
    assert len(drawn(demo, rid)) == 60 and drawn(demo, rid) <= {r[0] for r in rows}
    assert sum(r[1] for r in rows) == pytest.approx(60)
    by_score = {}
    for _, p, score in rows:
        by_score.setdefault(score, set()).add(round(p, 12))
    assert set(by_score) == {0.0, 1.0}  # the two mapper versions agree, or do not
    assert min(by_score[1.0]) > max(by_score[0.0])  # disagreements drawn more often
    low, high = max(by_score[0.0]), min(by_score[1.0])
    assert high == pytest.approx(3 * low)  # size 0.5 + score: at most 3 times as often
    d = design(demo, rid)
    assert d["kind"] == "weighted" and d["weight_by"] == "machine_disagreement"
    assert "systematic sampling" in d["method"]


def test_a_weighted_round_needs_a_size_two_machines_and_no_strata(demo):
    for spec, words in (
        (RoundSpec("a", RESPONSE_Q, design="weighted", weight_by="machine_disagreement"),
         "give the number of items"),
        (RoundSpec("b", RESPONSE_Q, design="weighted", weight_by="machine_disagreement",
                   stratify_by="gold", limit=5), "not stratified as well"),
        (RoundSpec("c", PREFIX_Q, design="weighted", weight_by="machine_disagreement",
                   limit=5), "no machine rater has answered"),
        (RoundSpec("d", RESPONSE_Q, design="weighted", weight_by="machine_confidence",
                   limit=5), "recorded no confidence"),
        (RoundSpec("e", RESPONSE_Q, design="lottery", limit=5), "design is one of"),
    ):
        before = demo.scalar("SELECT COUNT(*) FROM review_rounds")
        with pytest.raises(RoundError, match=words):
            create_round(demo, spec, admin(demo))
        assert demo.scalar("SELECT COUNT(*) FROM review_rounds") == before


def test_systematic_draws_take_each_item_with_its_probability():
    scores = {i: (1.0 if i % 5 == 0 else 0.1) for i in range(50)}
    probabilities = weighted_probabilities(scores, 12)
    assert sum(probabilities.values()) == pytest.approx(12)
    assert all(0 < p <= 1 for p in probabilities.values())
    rng = random.Random(1)
    counts = Counter()
    runs = 3000
    for _ in range(runs):
        chosen = systematic_draw(probabilities, rng)
        assert len(chosen) == 12 and len(set(chosen)) == 12
        counts.update(chosen)
    for item, p in probabilities.items():
        spread = (p * (1 - p) / runs) ** 0.5
        assert abs(counts[item] / runs - p) < 5 * spread + 1e-9


def test_probabilities_above_one_are_capped_and_shared_out():
    scores = {0: 1.0, 1: 0.0, 2: 0.0, 3: 0.0}
    p = weighted_probabilities(scores, 2)
    assert p[0] == 1.0 and sum(p.values()) == pytest.approx(2)
    assert p[1] == p[2] == p[3] == pytest.approx(1 / 3)


def test_the_frame_is_written_once(demo):
    rid = create_round(demo, RoundSpec("once", PREFIX_Q, limit=5), admin(demo))
    with pytest.raises(sqlite3.DatabaseError, match="recorded once"):
        with demo.transaction() as conn:
            conn.execute("UPDATE round_frame SET inclusion_probability = 1 WHERE round_id = ?",
                         (rid,))
    with pytest.raises(sqlite3.DatabaseError, match="recorded once"):
        with demo.transaction() as conn:
            conn.execute("DELETE FROM round_frame WHERE round_id = ?", (rid,))


def test_planning_lists_the_weighted_designs_the_items_allow(demo):
    responses = [r[0] for r in demo.query("SELECT id FROM items WHERE kind = 'response'")]
    designs = planning_designs(demo, RESPONSE_Q, responses)
    assert [d.key for d in designs] == ["weighted:machine_disagreement"]
    assert designs[0].probabilities(30).sum() == pytest.approx(30)
    prefixes = [r[0] for r in demo.query("SELECT id FROM items WHERE kind = 'prefix'")]
    assert planning_designs(demo, PREFIX_Q, prefixes) == []


def test_an_admin_draws_a_weighted_round_and_plans_it_from_the_screen(demo_copy, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from review.workspace import open_store
    from tests.conftest import ROOT

    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["reviewer"] = "Jordan Lee"
    at.run()
    at.switch_page("pages/rounds.py").run()
    question = next(s for s in at.selectbox if s.label == "What each reviewer answers")
    question.set_value(RESPONSE_Q).run()
    assert not at.exception
    at.button(key="budget_plan").click().run()
    assert not at.exception
    plan = next(d.value for d in at.dataframe if "Labelled so far" in d.value.columns)
    assert list(plan[""])[:4] == ["aster-7b · prompted", "aster-7b · unprompted", "borealis-large",
                                  "cobalt-mini"]  # each run apart
    assert {"uniform random sample", "weighted: machine raters disagree"} <= set(plan.columns)
    assert any("simulated from the data at hand" in c.value for c in at.caption)
    at.radio(key="round_design").set_value("weighted:machine_disagreement")
    next(t for t in at.text_input if t.label == "Name").input("Where the mappers disagree")
    next(n for n in at.number_input if n.label.startswith("Items")).set_value(30)
    next(b for b in at.button if b.label == "Create round").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    with open_store(demo_copy) as s:
        rid = s.scalar("SELECT id FROM review_rounds WHERE name = 'Where the mappers disagree'")
        assert design(s, rid)["kind"] == "weighted"
        assert len(drawn(s, rid)) == 30
    # How it was drawn is in the round's details (the rounds table fits 1280 px).
    assert any("drawn: weighted toward items where machine raters disagree: 30 of 337 "
               "candidates" in shown(c.value) for c in at.caption)

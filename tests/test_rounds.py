"""Review rounds, reservations, adjudication, roles and the audit trail."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from review.reviewing.commit import commit_answer, skip_item
from review.reviewing.items import load_item
from review.team.activity import audit_entries, reviewer_progress
from review.team.adjudication import (
    ADJUDICATED,
    AdjudicationError,
    adjudication_queue,
    settle,
    settle_unanimous,
)
from review.team.reviewers import ensure_reviewer, grant_role
from review.team.rounds import (
    RoundError,
    RoundSpec,
    create_round,
    late_for_round,
    list_rounds,
    reserve_next_item,
)
from review.workspace import open_store
from tests.helpers import work_at_once

Q = "carebench.escalation_needed"


def admin(s):
    return ensure_reviewer(s, "Jordan Lee")


def reviewers_per_item(s, rid) -> list[int]:
    """For each item answered in the round, how many reviewers answered it there."""
    return [r[0] for r in s.query(
        "SELECT COUNT(DISTINCT rater_id) FROM annotations WHERE round_id = ? GROUP BY item_id", (rid,))]


def answer(s, rid, rev, value="0A"):
    item_id = reserve_next_item(s, rid, rev)
    if item_id is None:
        return None
    commit_answer(s, rev, item_id, load_item(s, item_id).question_id, value, round_id=rid)
    return item_id


def test_only_an_admin_creates_rounds_and_strata_are_balanced(demo):
    reviewer = ensure_reviewer(demo, "Dr. Amara Okafor")
    with pytest.raises(RoundError, match="only an admin"):
        create_round(demo, RoundSpec("r", Q), reviewer)
    rid = create_round(demo, RoundSpec("r", Q, reviewers_per_item=2, stratify_by="gold", limit=20),
                       admin(demo))
    strata = dict(demo.query("SELECT stratum, COUNT(*) FROM round_items WHERE round_id = ? GROUP BY 1",
                             (rid,)))
    assert sum(strata.values()) == 20 and len(strata) == 4
    assert max(strata.values()) - min(strata.values()) <= 4
    # The first items offered cover every stratum (interleaved).
    first4 = [r[0] for r in demo.query(
        "SELECT stratum FROM round_items WHERE round_id = ? ORDER BY position LIMIT 4", (rid,))]
    assert len(set(first4)) == 4
    with pytest.raises(RoundError, match="exists already"):
        create_round(demo, RoundSpec("r", Q), admin(demo))


def test_overlap_share_gives_k_answers_to_a_share_only(demo):
    rid = create_round(demo, RoundSpec("overlap", Q, reviewers_per_item=2, overlap_share=0.2),
                       admin(demo))
    needs = dict(demo.query("SELECT answers_needed, COUNT(*) FROM round_items WHERE round_id = ?"
                            " GROUP BY 1", (rid,)))
    assert needs[2] == pytest.approx(0.2 * 85, abs=4) and needs[1] + needs[2] == 85


def test_an_item_never_gets_more_than_k_answers(demo):
    rid = create_round(demo, RoundSpec("k2", Q, reviewers_per_item=2, limit=10), admin(demo))
    a, b, c = (ensure_reviewer(demo, f"R{i}") for i in range(3))
    first = reserve_next_item(demo, rid, a)
    assert reserve_next_item(demo, rid, b) == first  # two slots
    assert reserve_next_item(demo, rid, c) != first  # the third reviewer gets another item
    qid = load_item(demo, first).question_id
    commit_answer(demo, a, first, qid, "0A", round_id=rid)
    commit_answer(demo, b, first, qid, "0B", round_id=rid)
    # A third answer in the round is kept, outside it: the round counts two.
    late = commit_answer(demo, c, first, qid, "1A", round_id=rid)
    assert demo.scalar("SELECT round_id FROM annotations WHERE id = ?", (late,)) is None
    assert late_for_round(demo, [late]) == rid
    assert demo.scalar("SELECT value FROM current_annotations WHERE item_id = ? AND rater_id = ?",
                       (first, c.id)).startswith("1A_")
    # A revision by someone who answered is still allowed.
    commit_answer(demo, a, first, qid, "0B", round_id=rid)
    assert demo.scalar("SELECT COUNT(DISTINCT rater_id) FROM annotations WHERE round_id = ? AND item_id = ?",
                       (rid, first)) == 2


def test_an_expired_reservation_returns_the_item_to_the_pool(demo):
    rid = create_round(demo, RoundSpec("k1", Q, reviewers_per_item=1, limit=3,
                                       reservation_minutes=5), admin(demo))
    a, b = ensure_reviewer(demo, "Walker"), ensure_reviewer(demo, "Stayer")
    taken = reserve_next_item(demo, rid, a)
    assert reserve_next_item(demo, rid, b) != taken
    later = datetime.now(UTC) + timedelta(minutes=10)
    c = ensure_reviewer(demo, "Latecomer")
    assert reserve_next_item(demo, rid, c, now=later) == taken


def test_a_skip_gives_the_slot_back(demo):
    rid = create_round(demo, RoundSpec("skip", Q, reviewers_per_item=1, limit=2), admin(demo))
    a, b = ensure_reviewer(demo, "Skipper"), ensure_reviewer(demo, "Taker")
    item = reserve_next_item(demo, rid, a)
    skip_item(demo, a, item, load_item(demo, item).question_id, "outside my specialty", round_id=rid)
    assert reserve_next_item(demo, rid, b) == item
    assert reserve_next_item(demo, rid, a) != item


def test_concurrent_reviewers_fill_every_item_exactly_k_times(demo_copy):
    s = open_store(demo_copy)
    rid = create_round(s, RoundSpec("race", Q, reviewers_per_item=2), admin(s))
    reviewers = [ensure_reviewer(s, f"Racer {i}") for i in range(6)]
    s.close()
    assert work_at_once(demo_copy, reviewers, lambda local, rev: answer(local, rid, rev)) == []
    s = open_store(demo_copy)
    counts = reviewers_per_item(s, rid)
    assert len(counts) == 85 and set(counts) == {2}
    info = list_rounds(s)[0]
    assert (info.answers_given, info.answers_needed) == (170, 170)


def test_adjudication_settles_conflicts_and_unanimous_items(demo):
    rid = create_round(demo, RoundSpec("adj", Q, reviewers_per_item=2, limit=4), admin(demo))
    a, b = ensure_reviewer(demo, "Rev A"), ensure_reviewer(demo, "Rev B")
    values_a, values_b = ["0A", "1B", "0B", "1A"], ["0A", "0A", "0B", "1B"]
    items = []
    for va, vb in zip(values_a, values_b, strict=True):
        item = answer(demo, rid, a, va)
        reserve_next_item(demo, rid, b)
        commit_answer(demo, b, item, load_item(demo, item).question_id, vb, round_id=rid)
        items.append(item)
    assert settle_unanimous(demo, rid) == 2
    judge = ensure_reviewer(demo, "Dr. Sam Rivera")
    queue = adjudication_queue(demo, rid, judge)
    assert [d.item_id for d in queue] == [items[1], items[3]]
    assert [x.reviewer for x in queue[0].answers] == ["Reviewer A", "Reviewer B"]  # names hidden
    assert queue[0].distance == 3
    # Someone who answered may not adjudicate; a reviewer may not either.
    grant_role(demo, admin(demo), "Rev A", "adjudicator")
    with pytest.raises(AdjudicationError, match="you answered this item"):
        settle(demo, rid, items[1], ensure_reviewer(demo, "Rev A"), "1B", "reviewer_error")
    assert items[1] not in [d.item_id for d in adjudication_queue(demo, rid, ensure_reviewer(demo, "Rev A"))]
    with pytest.raises(AdjudicationError, match="only an adjudicator"):
        settle(demo, rid, items[1], ensure_reviewer(demo, "Rev B2"), "1B", "reviewer_error")
    settle(demo, rid, items[1], judge, "1B", "reviewer_error", "red flag missed")
    assert [d.item_id for d in adjudication_queue(demo, rid, judge)] == [items[3]]
    settled = demo.query(
        "SELECT i.id, c.value, c.extra FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
        " JOIN items i ON i.id = c.item_id WHERE r.name = ? ORDER BY i.id", (ADJUDICATED,))
    assert [(r[0], r[1][:2]) for r in settled] == sorted(
        [(items[0], "0A"), (items[2], "0B"), (items[1], "1B")])
    assert any('"adjudicator":"Dr. Sam Rivera"' in r[2] for r in settled)


def test_a_label_that_settled_itself_reopens_when_a_reviewer_changes_their_answer(demo):
    rid = create_round(demo, RoundSpec("adj", Q, reviewers_per_item=2, limit=1), admin(demo))
    a, b = ensure_reviewer(demo, "Rev A"), ensure_reviewer(demo, "Rev B")
    item = answer(demo, rid, a, "0B")
    reserve_next_item(demo, rid, b)
    qid = load_item(demo, item).question_id
    commit_answer(demo, b, item, qid, "0B", round_id=rid)
    judge = ensure_reviewer(demo, "Dr. Sam Rivera")
    assert settle_unanimous(demo, rid) == 1 and adjudication_queue(demo, rid, judge) == []
    commit_answer(demo, b, item, qid, "1B", round_id=rid)  # B revises after the reveal
    # The old agreement is withdrawn at once, not left standing as the settled label.
    withdrawn = demo.query_one(
        "SELECT c.status, c.value, json_extract(c.extra, '$.reason') AS reason, c.round_id"
        " FROM current_annotations c JOIN raters r ON r.id = c.rater_id WHERE r.name = ?"
        " AND c.item_id = ?", (ADJUDICATED, item))
    assert tuple(withdrawn) == ("skipped", None, "reopened", rid)
    assert settle_unanimous(demo, rid) == 0
    assert [(d.item_id, d.reopened) for d in adjudication_queue(demo, rid, judge)] == [(item, True)]
    settle(demo, rid, item, judge, "1A", "ambiguous_item")
    commit_answer(demo, b, item, qid, "0B", round_id=rid)  # agreement again: the ruling stands
    assert settle_unanimous(demo, rid) == 0
    assert demo.scalar("SELECT c.value FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
                       " WHERE r.name = ? AND c.item_id = ?", (ADJUDICATED, item)).startswith("1A")


def test_adjudication_outside_rounds_uses_all_clinicians(demo):
    judge = ensure_reviewer(demo, "Dr. Sam Rivera")
    queue = adjudication_queue(demo, None, judge, question_key=Q)
    assert queue and all(len(d.answers) >= 2 for d in queue)


def test_roles_are_granted_by_an_admin_and_logged(demo):
    with pytest.raises(ValueError, match="only an admin"):
        grant_role(demo, ensure_reviewer(demo, "Dr. Amara Okafor"), "Dr. Lukas Brenner", "admin")
    updated = grant_role(demo, admin(demo), "Dr. Lukas Brenner", "adjudicator")
    assert updated.role == "adjudicator"
    entry = audit_entries(demo, action="grant_role")[0]
    assert (entry.actor, entry.old, entry.new) == ("Jordan Lee", {"role": "reviewer"}, {"role": "adjudicator"})


def test_progress_counts_pace_and_time(demo):
    me = ensure_reviewer(demo, "Counter")
    for i, item in enumerate(r[0] for r in demo.query("SELECT id FROM items WHERE kind='prefix' LIMIT 3")):
        commit_answer(demo, me, item, 1, "0A", seconds_on_task=[4.0, 6.0, 20.0][i])
    row = next(p for p in reviewer_progress(demo) if p.name == "Counter")
    assert (row.answers, row.imported, row.items, row.median_seconds) == (3, 0, 3, 6.0)
    # The demo's clinicians answered by import: counted apart, not as zero work.
    okafor = next(p for p in reviewer_progress(demo) if p.name == "Dr. Amara Okafor")
    assert okafor.imported == demo.scalar(
        "SELECT COUNT(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
        " WHERE r.name = 'Dr. Amara Okafor' AND a.source = 'import'") > 0


# -- rounds over agent runs and graded conversations -------------------------------------------

def verdicts_on(s, item_id, choice="met"):
    from review.reviewing.commit import Verdict
    from review.reviewing.criteria import item_questions

    return [Verdict(q.id, choice) for q in item_questions(s, item_id) if q.kind == "criterion"]


def review_run(s, rid, rev):
    """Take the next run of the round and commit a verdict on each of its criteria."""
    from review.reviewing.commit import commit_verdicts

    item_id = reserve_next_item(s, rid, rev)
    if item_id is not None:
        commit_verdicts(s, rev, item_id, verdicts_on(s, item_id), round_id=rid)
    return item_id


def test_a_criteria_round_over_agent_runs_fills_each_run_k_times(demo_copy):
    """Six clinicians at once on a round of the demo's agent runs, k = 2: each run
    ends with exactly two reviewers, however the batches of verdicts interleave."""
    from review.team.rounds import criteria_round_key

    s = open_store(demo_copy)
    rid = create_round(s, RoundSpec("runs", criteria_round_key("trajectory"), reviewers_per_item=2),
                       admin(s))
    runs = s.scalar("SELECT COUNT(*) FROM items WHERE kind = 'trajectory' AND failed = 0")
    assert s.scalar("SELECT COUNT(*) FROM round_items WHERE round_id = ?", (rid,)) == runs
    reviewers = [ensure_reviewer(s, f"Run racer {i}") for i in range(6)]
    s.close()
    assert work_at_once(demo_copy, reviewers, lambda local, rev: review_run(local, rid, rev)) == []
    s = open_store(demo_copy)
    counts = reviewers_per_item(s, rid)
    assert len(counts) == runs and set(counts) == {2}
    info = next(r for r in list_rounds(s) if r.id == rid)
    assert info.kind == "trajectory" and (info.answers_given, info.answers_needed) == (2 * runs, 2 * runs)
    s.close()


def test_a_third_reviewers_batch_is_kept_whole_outside_the_round(demo):
    from review.reviewing.commit import commit_verdicts
    from review.team.rounds import criteria_round_key

    rid = create_round(demo, RoundSpec("hb", criteria_round_key("graded_conversation"),
                                       reviewers_per_item=1, stratify_by="category"), admin(demo))
    # Only conversations with a completion to grade: the demo's prompts have none.
    kinds = {r[0] for r in demo.query(
        "SELECT json_extract(i.payload, '$.completion') IS NOT NULL FROM round_items ri"
        " JOIN items i ON i.id = ri.item_id WHERE ri.round_id = ?", (rid,))}
    assert kinds == {1}
    first, second = ensure_reviewer(demo, "Dr. One"), ensure_reviewer(demo, "Dr. Two")
    item_id = review_run(demo, rid, first)
    before = demo.scalar("SELECT COUNT(*) FROM annotations")
    verdicts = verdicts_on(demo, item_id, "not_met")
    ids = commit_verdicts(demo, second, item_id, verdicts, round_id=rid)
    # Kept whole, every verdict outside the round; the round still has one review.
    assert demo.scalar("SELECT COUNT(*) FROM annotations") == before + len(verdicts)
    assert {tuple(r) for r in demo.query(
        "SELECT round_id, json_extract(extra, '$.late_for_round') FROM annotations"
        " WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),))} == {(None, rid)}
    assert late_for_round(demo, ids) == rid
    assert demo.scalar("SELECT COUNT(*) FROM round_reviews WHERE round_id = ? AND item_id = ?",
                       (rid, item_id)) == 1
    assert reserve_next_item(demo, rid, second) != item_id


@pytest.mark.parametrize("question, stratify, message", [
    ("trajectory.step_error", "none", "step by step"),
    ("clinicare.verdict", "none", "make the round on criteria@trajectory"),
    ("criteria@trajectory", "gold", "no gold label"),
    ("criteria@prefix", "none", "a criteria round is over one of"),
])
def test_rounds_that_could_never_fill_are_refused(demo, question, stratify, message):
    with pytest.raises(RoundError, match=message):
        create_round(demo, RoundSpec("bad", question, stratify_by=stratify), admin(demo))


def test_a_run_reviewed_outside_the_round_is_not_handed_out_in_it(demo):
    from review.reviewing.commit import commit_verdicts
    from review.team.rounds import criteria_round_key

    rid = create_round(demo, RoundSpec("runs", criteria_round_key("trajectory"), stratify_by="none"),
                       admin(demo))
    me = ensure_reviewer(demo, "Dr. Free First")
    first = demo.scalar("SELECT item_id FROM round_items WHERE round_id = ? ORDER BY position", (rid,))
    commit_verdicts(demo, me, first, verdicts_on(demo, first))  # free review, no round
    got = reserve_next_item(demo, rid, me)
    assert got is not None and got != first


def test_a_review_begun_and_abandoned_frees_its_place_when_the_reservation_lapses(demo):
    from review.reviewing.commit import commit_verdicts
    from review.reviewing.navigation import unfinished_in_round
    from review.team.rounds import criteria_round_key, has_place

    rid = create_round(demo, RoundSpec("runs", criteria_round_key("trajectory"), reviewers_per_item=1,
                                       stratify_by="none", reservation_minutes=1), admin(demo))
    quitter, other = ensure_reviewer(demo, "Dr. Quitter"), ensure_reviewer(demo, "Dr. Other")
    began = reserve_next_item(demo, rid, quitter)
    commit_verdicts(demo, quitter, began, verdicts_on(demo, began)[:1], round_id=rid)  # one of many
    assert list_rounds(demo)[0].answers_given == 0  # begun is not reviewed
    assert unfinished_in_round(demo, rid, quitter.id) == began
    later = datetime.now(UTC) + timedelta(minutes=5)  # the quitter's place lapses
    demo.conn.execute("UPDATE reservations SET expires_at = ? WHERE rater_id = ?",
                      ((datetime.now(UTC) - timedelta(minutes=1)).isoformat(), quitter.id))
    assert reserve_next_item(demo, rid, other, now=later - timedelta(minutes=4)) == began
    assert not has_place(demo.conn, rid, began, quitter.id)
    assert unfinished_in_round(demo, rid, quitter.id) is None  # not handed back: it is taken
    commit_verdicts(demo, other, began, verdicts_on(demo, began), round_id=rid)
    # The quitter comes back and finishes: kept, outside the round, which counts one review.
    ids = commit_verdicts(demo, quitter, began, verdicts_on(demo, began), round_id=rid)
    assert late_for_round(demo, ids) == rid
    assert list_rounds(demo)[0].answers_given == 1
    assert demo.scalar("SELECT rater_id FROM round_reviews WHERE round_id = ?", (rid,)) == other.id


def test_settling_a_label_round_never_counts_the_adjudicator_as_a_reviewer(demo):
    rid = create_round(demo, RoundSpec("two", Q, reviewers_per_item=2, limit=3), admin(demo))
    a, b = ensure_reviewer(demo, "Dr. Same A"), ensure_reviewer(demo, "Dr. Same B")
    while answer(demo, rid, a) is not None:
        pass
    while answer(demo, rid, b) is not None:
        pass
    assert settle_unanimous(demo, rid) == 3
    info = next(r for r in list_rounds(demo) if r.id == rid)
    assert (info.answers_given, info.answers_needed) == (6, 6)


def test_a_step_mark_in_a_round_needs_the_run_to_be_in_it(demo):
    from review.reviewing.commit import mark_step
    from review.team.rounds import criteria_round_key

    rid = create_round(demo, RoundSpec("runs", criteria_round_key("trajectory"), stratify_by="none",
                                       limit=2), admin(demo))
    outside = demo.scalar("SELECT id FROM items WHERE kind = 'trajectory' AND failed = 0 AND id NOT IN"
                          " (SELECT item_id FROM round_items WHERE round_id = ?)", (rid,))
    with pytest.raises(RoundError, match="not part of the round"):
        mark_step(demo, ensure_reviewer(demo, "Dr. Marker"), outside, 3, "no_error", round_id=rid)


def test_a_step_mark_never_makes_a_review_past_k(demo):
    """A reviewer refused a place (the run has its k reviews) can still mark a step,
    but the mark does not turn their free-review verdicts into a review of the round."""
    from review.reviewing.commit import commit_verdicts, mark_step
    from review.team.rounds import criteria_round_key

    rid = create_round(demo, RoundSpec("one", criteria_round_key("trajectory"), reviewers_per_item=1,
                                       stratify_by="none"), admin(demo))
    a, c = ensure_reviewer(demo, "Dr. Place A"), ensure_reviewer(demo, "Dr. Place C")
    run = review_run(demo, rid, a)
    commit_verdicts(demo, c, run, verdicts_on(demo, run))  # free review: every criterion
    kept = commit_verdicts(demo, c, run, verdicts_on(demo, run, "not_met"), round_id=rid)
    assert late_for_round(demo, kept) == rid
    mark_step(demo, c, run, 3, "no_error", round_id=rid)
    assert demo.scalar("SELECT COUNT(*) FROM round_reviews WHERE round_id = ? AND item_id = ?",
                       (rid, run)) == 1


def test_the_migration_counts_only_complete_reviews_given_before_it(demo_copy):
    """Databases from before round_reviews: their reviews are read from the answers,
    a label round's from each reviewer's first counted answer, a criteria round's
    only where the reviewer answered every criterion."""
    import subprocess
    import sys
    from pathlib import Path

    from review.reviewing.commit import commit_verdicts
    from review.team.rounds import criteria_round_key

    s = open_store(demo_copy)
    labels = create_round(s, RoundSpec("labels", Q, reviewers_per_item=2, limit=2), admin(s))
    runs = create_round(s, RoundSpec("runs", criteria_round_key("trajectory"), stratify_by="none"),
                        admin(s))
    done, half = ensure_reviewer(s, "Dr. Done"), ensure_reviewer(s, "Dr. Half")
    answer(s, labels, done)
    review_run(s, runs, done)
    began = reserve_next_item(s, runs, half)
    commit_verdicts(s, half, began, verdicts_on(s, began)[:1], round_id=runs)
    before = sorted(tuple(r) for r in s.query(
        "SELECT round_id, item_id, rater_id FROM round_reviews"))
    assert len(before) == 2
    # Back to the schema before the table existed, as an older database is.
    s.conn.executescript(
        "DROP TRIGGER round_reviews_no_update; DROP TRIGGER round_reviews_no_delete;"
        " DROP TABLE round_reviews; DELETE FROM _sqlite_migrations WHERE name = 'm007_round_reviews';")
    s.close()
    code = ("import sys; sys.path.insert(0, '.'); from review.workspace import open_store;"
            f" s = open_store({str(demo_copy)!r});"
            " print(sorted(tuple(r) for r in s.query("
            "'SELECT round_id, item_id, rater_id FROM round_reviews')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1], check=True).stdout
    assert out.strip() == str(before)  # Dr. Half's one verdict of many is not a review


def test_an_answer_given_in_a_round_is_revised_not_skipped(demo):
    rid = create_round(demo, RoundSpec("r", Q, reviewers_per_item=1, limit=2), admin(demo))
    me = ensure_reviewer(demo, "Dr. Second Thoughts")
    item = answer(demo, rid, me)
    with pytest.raises(RoundError, match="instead of skipping"):
        skip_item(demo, me, item, load_item(demo, item).question_id, "unsure", round_id=rid)
    commit_answer(demo, me, item, load_item(demo, item).question_id, None, status="cannot_assess",
                  round_id=rid)  # a change of mind is a revision
    assert demo.scalar("SELECT COUNT(*) FROM round_reviews WHERE round_id = ?", (rid,)) == 1


def _lapse(s, rater_id):
    with s.transaction() as conn:
        conn.execute("UPDATE reservations SET expires_at = '2000-01-01' WHERE rater_id = ?", (rater_id,))


def test_once_kept_outside_a_round_a_reviewers_answers_on_that_run_stay_outside(demo):
    """A reviewer told their answers are 'an extra review, not one of the round's'
    is never later given a round review made mostly of those answers."""
    from review.reviewing.commit import commit_verdicts
    from review.reviewing.navigation import unfinished_in_round
    from review.team.rounds import criteria_round_key, has_place

    rid = create_round(demo, RoundSpec("one", criteria_round_key("trajectory"), reviewers_per_item=1,
                                       stratify_by="none"), admin(demo))
    a, b = ensure_reviewer(demo, "Dr. Late A"), ensure_reviewer(demo, "Dr. Late B")
    run = reserve_next_item(demo, rid, a)
    verdicts = verdicts_on(demo, run)
    commit_verdicts(demo, a, run, verdicts[:1], round_id=rid)  # begun in the round
    _lapse(demo, a.id)
    assert reserve_next_item(demo, rid, b) == run  # B takes the place ...
    late = commit_verdicts(demo, a, run, verdicts[1:-1], round_id=rid)  # ... A goes on: kept outside
    assert late_for_round(demo, late) == rid
    _lapse(demo, b.id)  # B walks away too: the place is free again
    assert not has_place(demo.conn, rid, run, a.id)
    assert unfinished_in_round(demo, rid, a.id) is None
    assert reserve_next_item(demo, rid, a) != run
    # A finishes the run by link: still outside; the round has no review of it from A.
    rest = commit_verdicts(demo, a, run, verdicts[-1:], round_id=rid)
    assert late_for_round(demo, rest) == rid
    assert demo.scalar("SELECT COUNT(*) FROM round_reviews WHERE round_id = ?", (rid,)) == 0
    # B (or anyone) can still give the run its review in the round.
    assert reserve_next_item(demo, rid, b) == run
    commit_verdicts(demo, b, run, verdicts, round_id=rid)
    assert [tuple(r) for r in demo.query("SELECT item_id, rater_id FROM round_reviews WHERE round_id = ?",
                                         (rid,))] == [(run, b.id)]


def test_a_label_item_answered_late_is_not_handed_back_by_the_round(demo):
    rid = create_round(demo, RoundSpec("k1", Q, reviewers_per_item=1, limit=3), admin(demo))
    a, b = ensure_reviewer(demo, "Dr. Label A"), ensure_reviewer(demo, "Dr. Label B")
    first = reserve_next_item(demo, rid, a)
    _lapse(demo, a.id)
    assert reserve_next_item(demo, rid, b) == first
    qid = load_item(demo, first).question_id
    assert late_for_round(demo, [commit_answer(demo, a, first, qid, "1A", round_id=rid)]) == rid
    _lapse(demo, b.id)
    assert reserve_next_item(demo, rid, a) not in (first, None)


def test_a_mixed_batch_is_kept_whole_outside_the_round(demo):
    from codebook import STEP_ERROR_QUESTION
    from review.reviewing.commit import AnswerSpec, commit_answers
    from review.team.rounds import criteria_round_key

    rid = create_round(demo, RoundSpec("one", criteria_round_key("trajectory"), reviewers_per_item=1,
                                       stratify_by="none"), admin(demo))
    a, c = ensure_reviewer(demo, "Dr. Mixed A"), ensure_reviewer(demo, "Dr. Mixed C")
    run = review_run(demo, rid, a)
    step_q = demo.scalar("SELECT id FROM questions WHERE key = ?", (STEP_ERROR_QUESTION,))
    crit = verdicts_on(demo, run)[0].question_id
    ids = commit_answers(demo, c, run, [AnswerSpec(step_q, "no_error", target="step:1"),
                                        AnswerSpec(crit, "met")], round_id=rid)
    assert {tuple(r) for r in demo.query(
        "SELECT round_id, json_extract(extra, '$.late_for_round') FROM annotations"
        " WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),))} == {(None, rid)}


def test_marking_steps_keeps_a_reviewers_place_and_needs_one(demo):
    """A clinician marking step after step is working on the run: each mark renews the
    reservation. A mark from someone without a place is kept outside the round."""
    from review.reviewing.commit import mark_step
    from review.team.rounds import criteria_round_key, has_place

    rid = create_round(demo, RoundSpec("one", criteria_round_key("trajectory"), reviewers_per_item=1,
                                       stratify_by="none", reservation_minutes=1), admin(demo))
    a, c = ensure_reviewer(demo, "Dr. Steps A"), ensure_reviewer(demo, "Dr. Steps C")
    run = reserve_next_item(demo, rid, a)
    before = demo.scalar("SELECT expires_at FROM reservations WHERE rater_id = ?", (a.id,))
    with demo.transaction() as conn:  # close to lapsing ...
        conn.execute("UPDATE reservations SET expires_at = ? WHERE rater_id = ?",
                     ((datetime.now(UTC) + timedelta(seconds=2)).isoformat(), a.id))
    inside = mark_step(demo, a, run, 3, "no_error", round_id=rid)  # ... a mark renews it
    assert demo.scalar("SELECT round_id FROM annotations WHERE id = ?", (inside,)) == rid
    assert demo.scalar("SELECT expires_at FROM reservations WHERE rater_id = ?", (a.id,)) >= before
    outside = mark_step(demo, c, run, 3, "wrong_tool", 2, round_id=rid)  # C has no place
    assert late_for_round(demo, [outside]) == rid
    assert has_place(demo.conn, rid, run, a.id) and not has_place(demo.conn, rid, run, c.id)
    assert demo.scalar("SELECT COUNT(DISTINCT rater_id) FROM annotations WHERE round_id = ?"
                       " AND item_id = ?", (rid, run)) == 1


def test_a_label_round_gives_no_item_its_reviewer_answered_before_but_a_skip_does_not_count(demo):
    """A round's answers are blind: an item the reviewer answered outside it
    (which revealed its labels) is not given to them; one they only skipped
    (which revealed nothing) is."""
    from review.team.rounds import answered_outside, my_round_items

    rid = create_round(demo, RoundSpec("blind", Q, limit=3), admin(demo))
    items = [r[0] for r in demo.query(
        "SELECT item_id FROM round_items WHERE round_id = ? ORDER BY position", (rid,))]
    me = ensure_reviewer(demo, "Dr. Fresh")
    qid = load_item(demo, items[0]).question_id
    commit_answer(demo, me, items[0], qid, "0A")  # before the round: labels revealed
    skip_item(demo, me, items[1], qid, "not now")  # before the round: nothing revealed
    assert answered_outside(demo, rid, me.id) == 1
    given = [answer(demo, rid, me) for _ in range(3)]
    assert given[:2] == [items[1], items[2]] and given[2] is None
    assert my_round_items(demo, rid, me.id) == [items[1], items[2]]
    # Okafor answered every prefix of the demo before the round: nothing for her.
    assert reserve_next_item(demo, rid, ensure_reviewer(demo, "Dr. Amara Okafor")) is None


def test_a_run_that_asks_nothing_as_a_whole_completes_its_round_review_with_step_marks(tmp_path):
    """A Harbor trial without a rewards file has no criterion: its review is
    its step marks, and a marked run counts in the round (the round used to
    hand the same run back for ever, below k)."""
    from review.datasets.sources import import_file
    from review.reviewing.commit import mark_step
    from review.reviewing.criteria import is_reviewed, item_questions
    from review.team.rounds import criteria_round_key
    from tests.test_sources_trajectories import atif_doc, make_trial

    s = open_store(tmp_path / "x.db")
    for name in ("trial-1", "trial-2"):
        make_trial(tmp_path / "job", name, atif=atif_doc(3))  # no rewards: no criteria
    import_file(s, tmp_path / "job", "harbor")
    rid = create_round(s, RoundSpec("runs", criteria_round_key("trajectory"), reviewers_per_item=1),
                       ensure_reviewer(s, "Adm", role="admin"))
    me = ensure_reviewer(s, "Dr. Steps")
    run = reserve_next_item(s, rid, me)
    assert item_questions(s, run) == []
    mark_step(s, me, run, 3, "no_error", round_id=rid)
    assert is_reviewed(s, me.id, run)
    assert s.scalar("SELECT COUNT(*) FROM round_reviews WHERE round_id = ?", (rid,)) == 1
    assert reserve_next_item(s, rid, me) not in (run, None)
    s.close()


@pytest.mark.parametrize("limit", [6, 17, 22])
def test_a_round_of_n_items_has_n_items_when_more_match(demo, limit):
    rid = create_round(demo, RoundSpec(f"n{limit}", Q, limit=limit), admin(demo))
    assert demo.scalar("SELECT COUNT(*) FROM round_items WHERE round_id = ?", (rid,)) == limit


def test_the_overlap_share_is_of_the_whole_round_however_it_is_stratified(demo):
    rid = create_round(demo, RoundSpec("half", Q, limit=4, overlap_share=0.5), admin(demo))
    needs = [r[0] for r in demo.query(
        "SELECT answers_needed FROM round_items WHERE round_id = ?", (rid,))]
    assert sorted(needs) == [1, 1, 2, 2]  # four one-item strata: half of them doubled, not none
    rid = create_round(demo, RoundSpec("quarter", Q, limit=12, overlap_share=0.25), admin(demo))
    assert demo.scalar("SELECT COUNT(*) FROM round_items WHERE round_id = ? AND answers_needed = 2",
                       (rid,)) == 3


def test_round_names_differing_only_in_capitals_are_refused(demo):
    create_round(demo, RoundSpec("Validation", Q, limit=2), admin(demo))
    with pytest.raises(RoundError, match="differ only in capitals"):
        create_round(demo, RoundSpec("validation", Q, limit=2), admin(demo))


def test_no_grant_leaves_the_database_without_an_admin(demo):
    first = admin(demo)
    second = grant_role(demo, first, "Dr. Sam Rivera", "admin")
    grant_role(demo, second, "Jordan Lee", "reviewer")  # second demotes first ...
    with pytest.raises(ValueError, match="only an admin"):  # ... whose screen still says admin
        grant_role(demo, first, "Dr. Sam Rivera", "reviewer")
    assert demo.scalar("SELECT role FROM raters WHERE name = 'Dr. Sam Rivera'") == "admin"


# -- the same clinician with the round in one tab and Free review in another -------------------

def test_an_item_answered_in_free_review_while_reserved_is_not_handed_back_by_the_round(demo):
    """The round reserved X; in a Free-review tab the clinician answers X, which
    reveals its labels. Back in the round tab (or on a reload) the round gives
    X back to the pool and hands them the next item, as it would never have
    handed X out after that answer."""
    from review.team.rounds import answered_outside, my_round_items

    rid = create_round(demo, RoundSpec("Double", Q, reviewers_per_item=2, limit=4), admin(demo))
    me = ensure_reviewer(demo, "Dr. Two Tabs")
    x = reserve_next_item(demo, rid, me)  # tab 1: the round
    commit_answer(demo, me, x, load_item(demo, x).question_id, "0A")  # tab 2: Free review
    again = reserve_next_item(demo, rid, me)  # tab 1 reloaded
    assert again not in (x, None), "the round hands back an item its reviewer answered outside it"
    assert reserve_next_item(demo, rid, me) == again  # the new reservation holds
    assert demo.scalar("SELECT COUNT(*) FROM reservations WHERE round_id = ? AND item_id = ?"
                       " AND rater_id = ? AND released_at IS NULL", (rid, x, me.id)) == 0
    assert my_round_items(demo, rid, me.id) == [again]
    assert answered_outside(demo, rid, me.id) == 1
    # X's place went back to the pool: another reviewer can take it.
    assert reserve_next_item(demo, rid, ensure_reviewer(demo, "Dr. Next In Line")) == x


def test_such_an_answer_is_kept_but_does_not_fill_a_place_of_the_round(demo):
    """The round tab still shows X and the clinician answers it there, after
    the Free-review tab revealed its labels: the answer is kept (after the
    reveal, outside the round, saying which round it was given in) and the
    round's places stay for blind reviews."""
    from review.team.rounds import full_text, has_place

    rid = create_round(demo, RoundSpec("Double", Q, reviewers_per_item=2, limit=4), admin(demo))
    me = ensure_reviewer(demo, "Dr. Two Tabs")
    x = reserve_next_item(demo, rid, me)
    qid = load_item(demo, x).question_id
    commit_answer(demo, me, x, qid, "0A")  # Free-review tab
    assert not has_place(demo.conn, rid, x, me.id)
    kept = commit_answer(demo, me, x, qid, "1B", round_id=rid)  # the round tab, still on X
    counted = demo.query("SELECT a.phase FROM round_reviews rr JOIN annotations a"
                         " ON a.round_id = rr.round_id AND a.item_id = rr.item_id"
                         " AND a.rater_id = rr.rater_id WHERE rr.round_id = ? AND rr.item_id = ?"
                         " AND rr.rater_id = ?", (rid, x, me.id))
    assert not counted, f"the round counts a review given after the reveal: {[tuple(r) for r in counted]}"
    assert demo.scalar("SELECT COUNT(*) FROM round_reviews WHERE round_id = ?", (rid,)) == 0
    row = demo.query_one("SELECT value, phase, round_id FROM annotations WHERE id = ?", (kept,))
    # Blind all the same: X is a case's first round, whose gold waits for its later
    # rounds (`later_rounds_owed`), so the Free-review answer revealed nothing.
    assert row["value"].startswith("1B") and (row["phase"], row["round_id"]) == ("blind", None)
    assert late_for_round(demo, [kept]) == rid
    assert "answered this item outside the round" in full_text(demo, rid, x)
    assert demo.scalar("SELECT COUNT(*) FROM reservations WHERE round_id = ? AND item_id = ?"
                       " AND rater_id = ? AND released_at IS NULL", (rid, x, me.id)) == 0
    assert reserve_next_item(demo, rid, me) not in (x, None)


def test_a_reviewer_revising_their_own_answers_inside_the_round_keeps_their_place(demo):
    """Answers given in the round are not 'outside' it: a revised label still
    counts once, and a run begun in the round (one verdict, then a change of
    mind) is handed back and its review counts when finished."""
    from review.reviewing.commit import commit_verdicts
    from review.team.rounds import criteria_round_key, has_place

    rid = create_round(demo, RoundSpec("r", Q, reviewers_per_item=1, limit=2), admin(demo))
    me = ensure_reviewer(demo, "Dr. Revises")
    item = answer(demo, rid, me, "0A")
    revised = commit_answer(demo, me, item, load_item(demo, item).question_id, "1B", round_id=rid)
    assert demo.scalar("SELECT round_id FROM annotations WHERE id = ?", (revised,)) == rid
    assert [tuple(r) for r in demo.query("SELECT item_id, rater_id FROM round_reviews"
                                         " WHERE round_id = ?", (rid,))] == [(item, me.id)]
    assert reserve_next_item(demo, rid, me) not in (item, None)

    runs = create_round(demo, RoundSpec("runs", criteria_round_key("trajectory"), reviewers_per_item=1,
                                        stratify_by="none"), admin(demo))
    run = reserve_next_item(demo, runs, me)
    first = verdicts_on(demo, run)[:1]
    commit_verdicts(demo, me, run, first, round_id=runs)
    commit_verdicts(demo, me, run, verdicts_on(demo, run, "not_met")[:1], round_id=runs)
    assert reserve_next_item(demo, runs, me) == run and has_place(demo.conn, runs, run, me.id)
    ids = commit_verdicts(demo, me, run, verdicts_on(demo, run), round_id=runs)
    assert late_for_round(demo, ids) is None
    assert [tuple(r) for r in demo.query("SELECT item_id, rater_id FROM round_reviews"
                                         " WHERE round_id = ?", (runs,))] == [(run, me.id)]


def test_keeping_a_reservation_renews_only_a_live_one_of_ones_own(demo):
    from datetime import UTC, datetime, timedelta

    from review.team.rounds import keep_reservation

    rid = create_round(demo, RoundSpec("Keep", Q, reviewers_per_item=1, limit=2, reservation_minutes=20),
                       ensure_reviewer(demo, "Jordan Lee"))
    me, other = ensure_reviewer(demo, "Dr. Keep"), ensure_reviewer(demo, "Dr. Other")
    x = reserve_next_item(demo, rid, me)
    soon = (datetime.now(UTC) + timedelta(minutes=1)).isoformat(timespec="microseconds")
    with demo.transaction() as conn:
        conn.execute("UPDATE reservations SET expires_at = ? WHERE round_id = ?", (soon, rid))
    assert keep_reservation(demo, rid, x, me.id)
    assert demo.scalar("SELECT expires_at FROM reservations WHERE round_id = ? AND rater_id = ?",
                       (rid, me.id)) > (datetime.now(UTC) + timedelta(minutes=19)).isoformat()
    assert not keep_reservation(demo, rid, x, other.id)  # not theirs
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat(timespec="microseconds")
    with demo.transaction() as conn:
        conn.execute("UPDATE reservations SET expires_at = ? WHERE round_id = ?", (past, rid))
    assert not keep_reservation(demo, rid, x, me.id)  # lapsed: the place may be someone else's


def test_round_never_gives_an_earlier_round_after_a_later_one_of_the_same_case(demo_copy):
    """A round's items are shuffled within strata; a case's rounds still come in their
    order to each reviewer (round 2, its text and its gold, tells about round 1)."""
    import re

    s = open_store(demo_copy)
    lead = ensure_reviewer(s, "Study Lead", role="admin")
    rid = create_round(s, RoundSpec(name="ED pilot", question_key="carebench.escalation_needed",
                                    reviewers_per_item=2, split="validation",
                                    stratify_by="gold", limit=12), lead)
    ava = ensure_reviewer(s, "Dr. Ava Cole", "emergency medicine", "consultant")
    seen: dict[str, int] = {}  # case -> highest conversation round already shown
    out_of_order = []
    while (item_id := reserve_next_item(s, rid, ava)) is not None:
        item = load_item(s, item_id)
        case, rnd = re.match(r"(.+)_r(\d+)$", item.uid).groups()
        if seen.get(case, 0) > int(rnd):
            out_of_order.append(f"{item.uid} after round {seen[case]}")
        seen[case] = max(seen.get(case, 0), int(rnd))
        commit_answer(s, ava, item_id, item.question_id, "1B_ESCALATION_URGENT_CARE", round_id=rid)
    s.close()
    assert not out_of_order, ("answered 'blind' after seeing a later round of the same case: "
                              + ", ".join(out_of_order))

"""A settlement that settled on its own is withdrawn when an answer it rests on
changes, in the scope it was made in: a round's reviewers' answers in that
round, or all clinicians' answers in force. To the other scope it is settled:
a round counts exactly its own reviewers, whatever others answer outside it."""

from review.reviewing.blinding import later_rounds_owed, reveal_reference_labels
from review.reviewing.commit import commit_answer
from review.reviewing.items import find_item_id, load_item
from review.team.adjudication import ADJUDICATED, adjudication_queue, settle_unanimous
from review.team.reviewers import ensure_reviewer
from review.team.rounds import RoundSpec, create_round, reserve_next_item

Q = "carebench.escalation_needed"


def in_force(s, item):
    return tuple(s.query_one(
        "SELECT c.status, c.value, json_extract(c.extra, '$.reason'), c.round_id"
        " FROM current_annotations c JOIN raters r ON r.id = c.rater_id WHERE r.name = ?"
        " AND c.item_id = ? AND c.target = ''", (ADJUDICATED, item)))


def round_item_agreed(s):
    rid = create_round(s, RoundSpec("scopes", Q, reviewers_per_item=2, limit=1),
                       ensure_reviewer(s, "Admin", role="admin"))
    a, b = ensure_reviewer(s, "Rev A"), ensure_reviewer(s, "Rev B")
    item = reserve_next_item(s, rid, a)
    qid = load_item(s, item).question_id
    commit_answer(s, a, item, qid, "0B", round_id=rid)
    assert reserve_next_item(s, rid, b) == item
    commit_answer(s, b, item, qid, "0B", round_id=rid)
    # no other clinician answered this demo item: both scopes see the same two answers
    assert s.scalar("SELECT COUNT(*) FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
                    " WHERE c.item_id = ? AND c.question_id = ? AND r.kind = 'human'", (item, qid)) == 2
    return rid, item, qid


def test_a_dissent_outside_the_round_withdraws_what_all_clinicians_settled_not_the_rounds(prefixes):
    rid, item, qid = round_item_agreed(prefixes)
    judge = ensure_reviewer(prefixes, "Judge", role="adjudicator")
    # Adjudicate opens on all clinicians' answers: they agree, so it settles there.
    assert settle_unanimous(prefixes, None, question_key=Q) >= 1
    assert in_force(prefixes, item) == ("answered", "0B_NO_ESCALATION_SELF_CARE_MONITOR", "unanimous", None)
    assert settle_unanimous(prefixes, rid) == 0  # settled: the round has nothing to add
    # A third clinician answers outside the round and disagrees: all clinicians no longer agree.
    commit_answer(prefixes, ensure_reviewer(prefixes, "Rev C"), item, qid, "1B")
    assert in_force(prefixes, item)[:3] == ("skipped", None, "reopened")
    # The round's own two reviewers still agree: the round settles it, once, and it stays.
    assert settle_unanimous(prefixes, rid) == 1
    assert in_force(prefixes, item) == ("answered", "0B_NO_ESCALATION_SELF_CARE_MONITOR", "unanimous", rid)
    assert settle_unanimous(prefixes, None, question_key=Q) == 0
    assert item not in [d.item_id for d in adjudication_queue(prefixes, None, judge, question_key=Q)]
    commit_answer(prefixes, ensure_reviewer(prefixes, "Rev C"), item, qid, "1A")  # outside again
    assert in_force(prefixes, item)[2:] == ("unanimous", rid)
    assert settle_unanimous(prefixes, rid) == 0


def test_an_answer_late_for_the_round_leaves_what_the_round_settled(prefixes):
    rid, item, qid = round_item_agreed(prefixes)
    assert settle_unanimous(prefixes, rid) == 1            # settled in the round
    # a third clinician's answer comes after the round's places were taken: kept outside it
    late = commit_answer(prefixes, ensure_reviewer(prefixes, "Rev C"), item, qid, "1B", round_id=rid)
    assert prefixes.scalar("SELECT json_extract(extra, '$.late_for_round') FROM annotations"
                           " WHERE id = ?", (late,)) == rid
    # The round counts exactly its two reviewers, who agree: the settlement stands, in every scope.
    assert in_force(prefixes, item) == ("answered", "0B_NO_ESCALATION_SELF_CARE_MONITOR", "unanimous", rid)
    judge = ensure_reviewer(prefixes, "Judge", role="adjudicator")
    assert item not in [d.item_id for d in adjudication_queue(prefixes, None, judge, question_key=Q)]
    assert settle_unanimous(prefixes, None, question_key=Q) == 0 and settle_unanimous(prefixes, rid) == 0
    # One of the round's reviewers changes their answer in the round: withdrawn.
    commit_answer(prefixes, ensure_reviewer(prefixes, "Rev B"), item, qid, "1B", round_id=rid)
    assert in_force(prefixes, item)[:3] == ("skipped", None, "reopened")
    assert item in [d.item_id for d in adjudication_queue(prefixes, rid, judge)]


def test_a_withdrawn_settlement_is_not_revealed_as_a_label(prefixes):

    rid, item, qid = round_item_agreed(prefixes)
    assert settle_unanimous(prefixes, rid) == 1
    b = ensure_reviewer(prefixes, "Rev B")
    commit_answer(prefixes, b, item, qid, "1B", round_id=rid)  # B revises in the round: withdrawn
    assert in_force(prefixes, item)[:3] == ("skipped", None, "reopened")
    for later in later_rounds_owed(prefixes, b.id, item):  # the case's labels wait for these
        uid = f"t_case_00000_r{later:02d}"
        commit_answer(prefixes, b, find_item_id(prefixes, uid), qid, "0A")
    labels = reveal_reference_labels(prefixes, b.id, load_item(prefixes, item))
    assert [x for x in labels if x.rater == ADJUDICATED] == [] and labels


def test_a_withdrawn_settlement_below_the_rounds_distance_is_like_any_disagreement_below_it(store):
    """adjudicate_distance=2: a one-step disagreement is not sent to adjudication, whether it
    was there from the start or came later: the item has no settled answer either way."""
    from tests.helpers import write_prefixes

    write_prefixes(store, 3)
    rid = create_round(store, RoundSpec("far", Q, reviewers_per_item=2, limit=1, adjudicate_distance=2),
                       ensure_reviewer(store, "Admin", role="admin"))
    a, b = ensure_reviewer(store, "Rev A"), ensure_reviewer(store, "Rev B")
    item = reserve_next_item(store, rid, a)
    qid = load_item(store, item).question_id
    commit_answer(store, a, item, qid, "0B", round_id=rid)
    reserve_next_item(store, rid, b)
    commit_answer(store, b, item, qid, "0B", round_id=rid)
    assert settle_unanimous(store, rid) == 1
    commit_answer(store, b, item, qid, "1A", round_id=rid)   # one step away
    assert in_force(store, item)[:3] == ("skipped", None, "reopened")
    judge = ensure_reviewer(store, "Judge", role="adjudicator")
    assert settle_unanimous(store, rid) == 0 and adjudication_queue(store, rid, judge) == []
    commit_answer(store, b, item, qid, "0B", round_id=rid)   # agreement again: settled again
    assert settle_unanimous(store, rid) == 1
    assert in_force(store, item)[:3] == ("answered", "0B_NO_ESCALATION_SELF_CARE_MONITOR", "unanimous")


def test_a_dissent_committed_while_the_page_settles_is_seen_under_the_write_lock(prefixes, monkeypatch):
    import review.team.settlements as settlements

    item = prefixes.scalar("SELECT id FROM items ORDER BY id LIMIT 1")
    qid = load_item(prefixes, item).question_id
    a, b = ensure_reviewer(prefixes, "Rev A"), ensure_reviewer(prefixes, "Rev B")
    commit_answer(prefixes, a, item, qid, "0B")
    commit_answer(prefixes, b, item, qid, "0B")
    real = settlements.label_answers

    def racing(s, round_id, question_id, item_id=None):
        found = real(s, round_id, question_id, item_id)
        monkeypatch.setattr(settlements, "label_answers", real)
        commit_answer(s, b, item, qid, "1B")  # B changes their mind meanwhile, on another page
        return found

    monkeypatch.setattr(settlements, "label_answers", racing)
    settle_unanimous(prefixes, None, question_key=Q)
    assert prefixes.query_one(
        "SELECT 1 FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
        " WHERE r.name = ? AND c.item_id = ? AND c.status = 'answered'", (ADJUDICATED, item)) is None
    judge = ensure_reviewer(prefixes, "Judge", role="adjudicator")
    assert item in [d.item_id for d in adjudication_queue(prefixes, None, judge, question_key=Q)]


def test_browse_offers_the_adjudicated_labels_only_while_one_is_in_force(prefixes):
    from review.browse import comparable_raters

    rid, item, qid = round_item_agreed(prefixes)
    assert settle_unanimous(prefixes, rid) == 1
    assert ADJUDICATED in comparable_raters(prefixes)
    commit_answer(prefixes, ensure_reviewer(prefixes, "Rev B"), item, qid, "1B", round_id=rid)
    assert ADJUDICATED not in comparable_raters(prefixes)


def test_a_clinician_who_passes_over_an_item_after_answering_withdraws_its_settlement(prefixes):
    from review.reviewing.commit import skip_item

    item = prefixes.scalar("SELECT id FROM items ORDER BY id LIMIT 1")
    qid = load_item(prefixes, item).question_id
    a, b = ensure_reviewer(prefixes, "Rev A"), ensure_reviewer(prefixes, "Rev B")
    commit_answer(prefixes, a, item, qid, "0B")
    commit_answer(prefixes, b, item, qid, "0B")
    assert settle_unanimous(prefixes, None, question_key=Q) == 1
    skip_item(prefixes, b, item, qid, "answered the wrong case")
    # One answer is left: all clinicians' answers would not settle it now, so it is not settled.
    assert in_force(prefixes, item) == ("skipped", None, "reopened", None)
    assert settle_unanimous(prefixes, None, question_key=Q) == 0
    commit_answer(prefixes, b, item, qid, "0B")  # they answer it again, alike
    assert settle_unanimous(prefixes, None, question_key=Q) == 1


def test_reopened_is_said_in_the_scope_whose_agreement_broke(prefixes):
    rid, item, qid = round_item_agreed(prefixes)
    assert settle_unanimous(prefixes, rid) == 1
    commit_answer(prefixes, ensure_reviewer(prefixes, "Rev B"), item, qid, "1B", round_id=rid)
    judge = ensure_reviewer(prefixes, "Judge", role="adjudicator")
    assert [(d.item_id, d.reopened) for d in adjudication_queue(prefixes, rid, judge)] == [(item, True)]
    everyone = [d for d in adjudication_queue(prefixes, None, judge, question_key=Q) if d.item_id == item]
    assert [d.reopened for d in everyone] == [False]  # listed there too, but it was not settled there


def test_on_an_agent_run_the_settling_and_the_withdrawing_count_the_same_clinicians(db):
    """Imported physicians' labels are data, not the app's reviewers: a run's criterion is not
    settled on one reviewer and one physician, so no later commit withdraws and resettles it."""
    from review.reviewing.criteria import find_item, item_questions
    from review.team.adjudication import settle_unanimous_rubric
    from store.records import AnnotationRecord, RaterRecord
    from store.writer import RecordWriter
    from tests.review_fixtures import KB_UID

    item = find_item(db, KB_UID)
    q = item_questions(db, item)[0]
    a, b = ensure_reviewer(db, "Dr. A"), ensure_reviewer(db, "Dr. B")
    with db.transaction() as conn:
        w = RecordWriter(conn, source="test")
        w.rater(RaterRecord("healthbench-physician:7", "human", role="physician"))
        w.annotation(AnnotationRecord(KB_UID, q.key, "healthbench-physician:7", "not_met"))
    commit_answer(db, a, item, q.id, "met")
    assert settle_unanimous(db, None, question_key=q.key) == 0  # one reviewer is not two
    commit_answer(db, b, item, q.id, "met")
    assert settle_unanimous_rubric(db) >= 1
    judge = ensure_reviewer(db, "Dr. Judge", role="adjudicator")
    commit_answer(db, a, item, q.id, "met", rationale="again, with a reason")
    assert settle_unanimous(db, None, question_key=q.key) == 0
    assert item not in [d.item_id for d in adjudication_queue(db, None, judge, question_key=q.key)]
    in_force_now = db.query_one(
        "SELECT c.status, json_extract(c.extra, '$.reason') FROM current_annotations c JOIN raters r"
        " ON r.id = c.rater_id WHERE r.name = ? AND c.item_id = ? AND c.question_id = ?",
        (ADJUDICATED, item, q.id))
    assert tuple(in_force_now) == ("answered", "unanimous")

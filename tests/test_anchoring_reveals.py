"""Anchoring is measured against what the clinician was shown (issue 17, point 2): each
reveal records the labels on screen, and a machine run (or re-run) after the clinician
answered does not move the result."""

from __future__ import annotations

from codebook import CAREBENCH, codebook
from labels.compare import anchoring
from review.reviewing.blinding import reveal_reference_labels, what_reviewer_sees
from review.reviewing.commit import commit_answer
from review.reviewing.items import load_item
from review.team.reviewers import ensure_reviewer
from store.records import AnnotationRecord, ItemRecord, RaterRecord
from store.writer import RecordWriter

A, B, C, D = codebook(CAREBENCH).codes
PREFIX_Q, RESPONSE_Q = "carebench.escalation_needed", "carebench.response_action"


def write(store, records) -> None:
    with store.transaction() as conn:
        RecordWriter(conn, source="test").write(records)


def one_response(store, machine_label=C):
    write(store, [RaterRecord("m@v1", "machine", role="mapper"),
                  ItemRecord(uid="p0", kind="prefix", dataset="t", payload={"turns": ["x"]}),
                  ItemRecord(uid="p0::x", kind="response", dataset="t", payload={},
                             parent_uid="p0", model="x"),
                  AnnotationRecord("p0::x", RESPONSE_Q, "m@v1", machine_label)])
    return store.scalar("SELECT id FROM items WHERE uid = 'p0::x'")


def test_a_reveal_records_the_labels_shown_once(store):
    item_id = one_response(store)
    me = ensure_reviewer(store, "Dr. Ann")
    item = load_item(store, item_id)
    assert reveal_reference_labels(store, me.id, item) is None  # blind until answered
    assert store.scalar("SELECT COUNT(*) FROM reveals") == 0
    commit_answer(store, me, item_id, item.question_id, A)
    for _ in range(3):  # the screen asks on every rerun: recorded once
        what_reviewer_sees(store, me.id, item_id)
    rows = store.query("SELECT v.rater_id, v.item_id, a.value, r.name FROM reveals v"
                       " JOIN annotations a ON a.id = v.annotation_id"
                       " JOIN raters r ON r.id = a.rater_id")
    assert [(r["rater_id"], r["item_id"], r["value"], r["name"]) for r in rows] == [
        (me.id, item_id, C, "m@v1")]


def test_anchoring_measures_toward_the_label_shown_not_a_later_run(store):
    item_id = one_response(store, machine_label=C)
    me = ensure_reviewer(store, "Dr. Ann")
    item = load_item(store, item_id)
    commit_answer(store, me, item_id, item.question_id, A)          # blind
    assert what_reviewer_sees(store, me.id, item_id).shown           # m@v1's C shown
    commit_answer(store, me, item_id, item.question_id, C)          # adopted it
    first = anchoring(store, RESPONSE_Q)
    assert first.machine == "m@v1" and first.shown == {"m@v1": 1}
    (revision,) = first.revisions
    assert (revision.machine, revision.direction, revision.as_shown) == (C, "adopted", True)
    # Afterwards a new model labels the item, and m@v1 is re-run with another label.
    write(store, [RaterRecord("a-late@v1", "machine", role="mapper"),
                  AnnotationRecord("p0::x", RESPONSE_Q, "a-late@v1", D),
                  AnnotationRecord("p0::x", RESPONSE_Q, "m@v1", B)])
    later = anchoring(store, RESPONSE_Q)
    assert later.machine == "m@v1"  # still the machine the clinician saw
    (revision,) = later.revisions
    assert (revision.machine, revision.direction) == (C, "adopted")
    # The user may pick another machine: one never shown is said to be so.
    other = anchoring(store, RESPONSE_Q, machine="a-late@v1")
    assert other.revisions == [] and any("not a-late@v1's" in n for n in other.notes)


def test_revisions_without_a_reveal_record_fall_back_and_say_so(store):
    one_response(store, machine_label=C)
    write(store, [RaterRecord("Dr. Bo", "human", role="reviewer"),
                  AnnotationRecord("p0::x", RESPONSE_Q, "Dr. Bo", A, phase="blind"),
                  AnnotationRecord("p0::x", RESPONSE_Q, "Dr. Bo", C, phase="after_reveal",
                                   rationale="again")])
    report = anchoring(store, RESPONSE_Q)
    (revision,) = report.revisions
    assert not revision.as_shown and revision.direction == "adopted"
    assert any("no record of what was shown" in n for n in report.notes)

"""What a reviewer's choice to see every rater's labels covers, and what comes after it."""

from __future__ import annotations

from review.reviewing.criteria import blind_work_left, labels_mark, labels_opened, open_labels
from review.team.reviewers import ensure_reviewer
from store.records import QuestionRecord
from store.writer import RecordWriter
from tests.helpers import write_prefixes


def test_the_choice_covers_the_items_there_were_and_new_ones_come_after_it(store):
    write_prefixes(store, 6)
    me = ensure_reviewer(store, "Dr. Blind")
    assert labels_opened(store, me.id) is None  # never chose: everything waiting is asked about
    open_labels(store, me, "agreement", blind_work_left(store, me.id))
    assert labels_opened(store, me.id) == labels_mark(store)
    assert blind_work_left(store, me.id, after=labels_opened(store, me.id)) == 0
    # A question of another kind of item (agent runs) changes nothing for prefixes ...
    with store.transaction() as conn:
        RecordWriter(conn, source="test").question(QuestionRecord(
            key="test.run_outcome", codebook="test", kind="labelset", text="Outcome?",
            applies_to="trajectory"))
    assert blind_work_left(store, me.id, after=labels_opened(store, me.id)) == 0
    # ... new prefixes come after the choice.
    write_prefixes(store, 9)
    assert blind_work_left(store, me.id, after=labels_opened(store, me.id)) == 3


def test_a_choice_recorded_before_it_said_what_it_covered_is_asked_again(store):
    write_prefixes(store, 3)
    me = ensure_reviewer(store, "Dr. Blind")
    with store.transaction():  # as recorded before the choice named the newest item, import, question
        store.audit(me.name, "labels_opened", "screen", None, None, {"screen": "browse", "unanswered": 3})
    assert labels_opened(store, me.id) is None


def test_a_new_question_of_one_benchmark_brings_back_only_that_benchmarks_runs(db):
    from review.reviewing.criteria import find_item, item_questions
    from tests.review_fixtures import KB_UID

    me = ensure_reviewer(db, "Dr. Blind")
    open_labels(db, me, "agreement", blind_work_left(db, me.id))
    assert blind_work_left(db, me.id, after=labels_opened(db, me.id)) == 0
    with db.transaction() as conn:  # e.g. a new codebook version adds a CliniCARE outcome question
        RecordWriter(conn, source="test").question(QuestionRecord(
            key="clinicare.second_verdict", codebook="clinicare-verdict", kind="labelset",
            text="Second?", applies_to="trajectory"))
    assert "clinicare.second_verdict" not in [q.key for q in item_questions(db, find_item(db, KB_UID))]
    clinicare_runs = db.scalar("SELECT COUNT(*) FROM items i JOIN datasets d ON d.id = i.dataset_id"
                               " WHERE i.kind = 'trajectory' AND (i.uid LIKE 'clinicare:%'"
                               " OR d.kind = 'clinicare')")
    assert 0 < clinicare_runs < db.scalar("SELECT COUNT(*) FROM items WHERE kind = 'trajectory'")
    assert blind_work_left(db, me.id, after=labels_opened(db, me.id)) == clinicare_runs

"""What a reviewer's choice to see every rater's labels covers, and what comes after it."""

from __future__ import annotations

import json

from review.reviewing.blinding import blind_work_left, labels_mark, labels_opened, open_labels
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


def test_choices_recorded_in_the_audit_log_move_to_their_table_and_an_old_one_is_asked_again(
        tmp_path):
    """Before m012 a choice to see the labels was found by the reviewer's name
    in the audit log; the migration moves each into `labels_opened`, by the
    reviewer's id. A choice recorded before choices said what they covered
    covers nothing: its reviewer is asked about everything again."""
    from sqlite_utils import Database

    from review.workspace import open_store
    from store.migrations import migrations

    path = tmp_path / "before_m012.db"
    old = Database(path)
    migrations.apply(old, stop_before="m012_labels_opened")
    for name in ("Dr. Old", "Dr. Covered"):
        old.execute("INSERT INTO raters (name, kind, role, created_at) VALUES (?, 'human',"
                    " 'reviewer', '2026-01-01T00:00:00+00:00')", (name,))
    entries = [("Dr. Old", {"screen": "browse", "unanswered": 3}),
               ("Dr. Covered", {"screen": "browse", "unanswered": 5, "newest_item": 1,
                                "newest_import": 0, "newest_question": 2}),
               ("Dr. Covered", {"screen": "agreement", "unanswered": 4, "newest_item": 7,
                                "newest_import": 1, "newest_question": 3})]
    for actor, new in entries:
        old.execute("INSERT INTO audit_log (at, actor, action, entity, new) VALUES"
                    " ('2026-01-02T00:00:00+00:00', ?, 'labels_opened', 'screen', ?)",
                    (actor, json.dumps(new)))
    old.conn.commit()
    old.close()

    store = open_store(path)
    by_name = {r["name"]: r["id"] for r in store.query("SELECT id, name FROM raters")}
    assert labels_opened(store, by_name["Dr. Old"]) is None
    assert labels_opened(store, by_name["Dr. Covered"]) == (7, 1, 3)  # the newest choice
    assert [tuple(r) for r in store.query(
        "SELECT screen, unanswered FROM labels_opened ORDER BY id")] == [
        ("browse", 3), ("browse", 5), ("agreement", 4)]
    # A choice recorded since is read from the table alone, not from a name in the log.
    with store.transaction():
        store.audit("Dr. Old", "labels_opened", "screen", None, None,
                    {"screen": "browse", "unanswered": 0, "newest_item": 9,
                     "newest_import": 9, "newest_question": 9})
    assert labels_opened(store, by_name["Dr. Old"]) is None
    store.close()


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

"""The answers read once per database version are never handed to a reader who may
not read them, and never outlive a new answer."""

from __future__ import annotations

from labels.compare.answers import load_answers
from review.reviewing.commit import commit_answer
from review.team.access import open_as_viewer
from review.team.reviewers import ensure_reviewer
from review.workspace import open_store

Q = "carebench.response_action"


def test_a_readers_answers_are_read_apart_from_everyones(demo_copy):
    everyone = open_store(demo_copy)
    okafor = ensure_reviewer(everyone, "Dr. Amara Okafor")
    full = load_answers(everyone, Q)
    assert load_answers(everyone, Q) is full  # the same read, kept
    reader = open_as_viewer(demo_copy, okafor.id, labels=True)
    limited = load_answers(reader, Q)
    assert {"Dr. Lukas Brenner", "Dr. Mei Tanaka"} <= set(full.values)
    assert not {"Dr. Lukas Brenner", "Dr. Mei Tanaka"} & set(limited.values)
    assert load_answers(everyone, Q) is full and load_answers(reader, Q) is limited
    reader.close()


def test_a_new_answer_makes_a_new_read(demo_copy):
    s = open_store(demo_copy)
    before = load_answers(s, Q)
    newcomer = ensure_reviewer(s, "Dr. New")
    item = s.scalar("SELECT id FROM items WHERE kind = 'response' LIMIT 1")
    qid = s.scalar("SELECT id FROM questions WHERE key = ?", (Q,))
    commit_answer(s, newcomer, item, qid, "0A_NO_ESCALATION_INFO_NEEDED")
    after = load_answers(s, Q)
    assert after is not before and "Dr. New" in after.values and "Dr. New" not in before.values
    s.close()

"""Committing an answer: the one path every clinician's answer takes.

A label, a rubric verdict, "cannot assess", a skip and a step mark are all
answers about an item, written here and nowhere else: validated against the
codebook, the review round's place claimed, written in one transaction
through the store, a settlement the answer breaks reopened, the review marked
complete, the draft cleared and the audit trail written.

- `commit_answers` (a batch about one item, all or nothing) and
  `commit_answer` (one), `skip_item`;
- `commit_verdicts` (a rubric's criteria, as a screen hands them over) and
  `mark_step` (one step of an agent run).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from codebook import CANNOT_ASSESS, NO_ERROR, REVEAL_AFTER_COMMIT, RUBRIC_KINDS
from review.reviewing.answers import normalise_value
from review.reviewing.blinding import (
    DEFAULT_MODE,
    labels_opened,
    labels_visible,
    later_rounds_owed,
    phase_for_commit,
)
from review.reviewing.criteria import (
    is_reviewed,
    item_questions,
    step_codebook,
    step_count,
    step_question_id,
)
from review.reviewing.drafts import clear_draft
from review.team.adjudication import ADJUDICATED, reopen_broken
from review.team.reviewers import Reviewer
from review.team.rounds import claim_answer_slot, complete_review
from store import Store, from_json, to_json, utcnow


@dataclass(frozen=True)
class Verdict:
    """A reviewer's draft answer to one question, as the screen hands it over."""

    question_id: int
    choice: str
    """A label code, 'met' / 'not_met', or 'cannot_assess'."""
    rationale: str | None = None
    labels_seen: bool = False
    """Picked with the machine and reference labels on screen (its draft says so)."""




@dataclass(frozen=True)
class AnswerSpec:
    """One answer of a batch given to `commit_answers` (one criterion, one step mark)."""

    question_id: int
    value: str | None
    status: str = "answered"
    rationale: str | None = None
    confidence: int | None = None
    target: str = ""
    """'' for the whole item, 'step:<step_id>' for one step of a trajectory."""
    extra: dict[str, Any] | None = None
    labels_seen: bool = False
    """Given with the machine and reference labels already seen (a draft made
    under a 'suggest' round or after a reveal): recorded after the reveal."""


def commit_answer(store: Store, reviewer: Reviewer, item_id: int, question_id: int,
                  value: str | None, *, status: str = "answered", rationale: str | None = None,
                  confidence: int | None = None, seconds_on_task: float | None = None,
                  mode: str = DEFAULT_MODE, target: str = "",
                  extra: dict[str, Any] | None = None, source: str = "app",
                  round_id: int | None = None) -> int:
    """Record one answer as one transaction and return its annotation id.

    A second answer to the same question is a new row that supersedes the
    first; it is recorded as 'after_reveal' when the labels were visible to
    the reviewer before they answered again. Within a review round the
    round's answer limit is checked in the same transaction (see
    `review.team.rounds.claim_answer_slot`), so an item never counts more answers
    in the round than it asks for, however many reviewers commit at once; an
    answer that comes after its places were taken is kept outside the round
    (`review.team.rounds.late_for_round` tells the caller)."""
    answer = AnswerSpec(question_id, value, status, rationale, confidence, target, extra)
    return commit_answers(store, reviewer, item_id, [answer], seconds_on_task=seconds_on_task,
                          mode=mode, source=source, round_id=round_id)[0]


def commit_answers(store: Store, reviewer: Reviewer, item_id: int, answers: list[AnswerSpec], *,
                   seconds_on_task: float | None = None, mode: str = DEFAULT_MODE,
                   source: str = "app", round_id: int | None = None) -> list[int]:
    """Record several answers about one item (a rubric's criteria) as one
    transaction: all are written, or none is. Each follows `commit_answer`'s
    rules; returns the annotation ids in the order given."""
    for answer in answers:
        if answer.status not in ("answered", "cannot_assess", "skipped"):
            raise ValueError(f"unknown status {answer.status!r}")
        if answer.confidence is not None and not 1 <= int(answer.confidence) <= 5:
            raise ValueError("confidence must be 1 to 5")
    with store.transaction() as conn:
        late = None
        if round_id is not None:
            # Decided once for the whole batch, before anything is written: all
            # of it counts in the round, or all of it is kept outside.
            if not claim_answer_slot(conn, round_id, item_id, reviewer.id,
                                     [a.status for a in answers if a.target == ""]):
                late, round_id = round_id, None
        ids = [_record_answer(store, conn, reviewer, item_id, answer, seconds_on_task, mode,
                              source, round_id, late) for answer in answers]
        # An answer that breaks an agreement which settled on its own withdraws that settlement.
        reopen_broken(store, conn, [(item_id, a.question_id, a.target) for a in answers])
        # Step marks alone complete a review only of a run that asks nothing as a whole
        # (`_review_complete` -> `is_reviewed`); anything else needs its whole-item answers.
        if round_id is not None and _review_complete(store, conn, reviewer, item_id, answers):
            if complete_review(conn, round_id, item_id, reviewer.id):
                store.audit(reviewer.name, "complete_review", "round_reviews", None, None,
                            {"round_id": round_id, "item_id": item_id})
        return ids


def _review_complete(store: Store, conn: Any, reviewer: Reviewer, item_id: int,
                     answers: list[AnswerSpec]) -> bool:
    """Whether, with these answers, the reviewer's review of the item is complete:
    an agent run or graded conversation once every criterion has an answer;
    any other item with one counted answer about the whole item."""
    kind = conn.execute("SELECT kind FROM items WHERE id = ?", (item_id,)).fetchone()[0]
    if kind in RUBRIC_KINDS:
        return is_reviewed(store, reviewer.id, item_id)
    return any(a.target == "" and a.status in ("answered", "cannot_assess") for a in answers)


def _same_answer(prev: Any, status: str, value: str | None, rationale: str | None,
                 confidence: int | None, round_id: int | None,
                 extra: dict[str, Any] | None) -> bool:
    """Whether an answer repeats the reviewer's answer in force word for word,
    in the same round (its provenance aside)."""
    kept = {k: v for k, v in from_json(prev[6] or "{}").items() if k != "blinding"}
    return (prev[1], prev[2], prev[3] or None, prev[4], prev[5]) == (
        status, value, rationale or None, confidence, round_id) and kept == (extra or {})


def _labels_seen_before(store: Store, conn: Any, reviewer: Reviewer, item_id: int,
                        question_id: int, target: str, own_reveals: bool = True) -> bool:
    """Whether this reviewer has seen the item's labels before this answer,
    whatever answer is in force now: an earlier answer of theirs was given
    where the labels are shown once it is committed (or up front) - on this
    item, or on another run of the same task, whose reveal shows the task's
    expected verdict too; they settled the item as its adjudicator; or they
    chose to see every rater's labels (Browse, Agreement) while the item was
    there. A step mark is revealed nothing on the review screens: only the
    last two count for it (a corrected mark is not an answer after a reveal).
    `own_reveals` False: the reviewer's earlier answers revealed nothing (a
    round whose case's later rounds they still owe: `later_rounds_owed`)."""
    if own_reveals and not target and conn.execute(
        "SELECT 1 FROM annotations a WHERE a.question_id = ?1 AND a.rater_id = ?2"
        " AND a.target = '' AND a.status != 'skipped'"
        " AND coalesce(json_extract(a.extra, '$.blinding'), '') != 'blind'"
        " AND (a.item_id = ?3 OR a.item_id IN (SELECT s.id FROM items s JOIN items i"
        " ON i.parent_id = s.parent_id WHERE i.id = ?3 AND i.kind = 'trajectory'"
        " AND s.kind = 'trajectory')) LIMIT 1",
        (question_id, reviewer.id, item_id)).fetchone():
        return True
    if conn.execute(
        "SELECT 1 FROM annotations a JOIN raters r ON r.id = a.rater_id WHERE a.item_id = ?"
        " AND r.name = ? AND json_extract(a.extra, '$.adjudicator') = ? LIMIT 1",
        (item_id, ADJUDICATED, reviewer.name)).fetchone():
        return True

    opened = labels_opened(store, reviewer.id)
    if opened is None:
        return False
    row = conn.execute("SELECT id, coalesce(import_id, 0) FROM items WHERE id = ?",
                       (item_id,)).fetchone()
    return row is not None and row[0] <= opened[0] and row[1] <= opened[1] \
        and question_id <= opened[2]


def _record_answer(store: Store, conn: Any, reviewer: Reviewer, item_id: int, answer: AnswerSpec,
                   seconds_on_task: float | None, mode: str, source: str,
                   round_id: int | None, late: int | None) -> int:
    """Write one answer inside the caller's transaction (see `commit_answers`).
    `late`: the round it was given in and is kept outside of (its places were
    taken meanwhile, see `claim_answer_slot`); its provenance names it
    (`late_for_round`)."""
    question_id, status, target = answer.question_id, answer.status, answer.target
    rationale, confidence = answer.rationale, answer.confidence
    q = conn.execute("SELECT codebook, kind FROM questions WHERE id = ?", (question_id,)).fetchone()
    if q is None:
        raise ValueError(f"no question {question_id}")
    value = normalise_value(q[0], q[1], answer.value) if status == "answered" else None
    prev = conn.execute(
        "SELECT id, status, value, rationale, confidence, round_id, extra FROM annotations"
        " WHERE item_id = ? AND question_id = ? AND rater_id = ? AND target = ?"
        " ORDER BY id DESC LIMIT 1",
        (item_id, question_id, reviewer.id, target),
    ).fetchone()
    if prev is not None and _same_answer(prev, status, value, rationale, confidence, round_id,
                                         answer.extra):
        return prev[0]  # the same answer again (a double click): nothing new to record
    # A CARE-Bench round whose case's later rounds still wait for this reviewer
    # has had nothing revealed by their earlier answers (`later_rounds_owed`).
    held = not target and mode == REVEAL_AFTER_COMMIT \
        and bool(later_rounds_owed(store, reviewer.id, item_id))
    seen = answer.labels_seen or (not target and not held and prev is not None
                                  and prev[1] != "skipped" and labels_visible(mode, True)) \
        or _labels_seen_before(store, conn, reviewer, item_id, question_id, target,
                               own_reveals=not held)
    version = conn.execute(
        "SELECT version FROM codebook_versions WHERE codebook = ? ORDER BY id DESC LIMIT 1",
        (q[0],),
    ).fetchone()
    cur = conn.execute(
        "INSERT INTO annotations (item_id, question_id, rater_id, target, status, value,"
        " rationale, confidence, phase, codebook_version, seconds_on_task, supersedes_id,"
        " source, extra, created_at, round_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (item_id, question_id, reviewer.id, target, status, value, rationale or None,
         confidence, phase_for_commit(mode, seen), version[0] if version else None,
         seconds_on_task, prev[0] if prev else None, source,
         to_json({"blinding": mode, **(answer.extra or {}),
                  **({"late_for_round": late} if late else {})}), utcnow(), round_id),
    )
    clear_draft(conn, reviewer.id, item_id, question_id, target)
    action = {"skipped": "skip"}.get(status, "revise" if prev else "answer")
    store.audit(
        reviewer.name, action, "annotations", cur.lastrowid,
        None if prev is None else {"status": prev[1], "value": prev[2], "rationale": prev[3],
                                   "confidence": prev[4]},
        {"item_id": item_id, "question_id": question_id, "target": target, "status": status,
         "value": value, "rationale": rationale or None, "confidence": confidence,
         "round_id": round_id, **({"late_for_round": late} if late else {})},
    )
    return cur.lastrowid


def skip_item(store: Store, reviewer: Reviewer, item_id: int, question_id: int,
              reason: str, **kw: Any) -> int:
    """Pass over an item, with the reason; it leaves the reviewer's queue."""
    if not reason.strip():
        raise ValueError("say why you skip this item")
    return commit_answer(store, reviewer, item_id, question_id, None, status="skipped",
                         rationale=reason.strip(), **kw)



def commit_verdicts(store: Store, reviewer: Reviewer, item_id: int, verdicts: Iterable[Verdict],
                    *, mode: str = DEFAULT_MODE, seconds_on_task: float | None = None,
                    round_id: int | None = None) -> list[int]:
    """Record a batch of answers about one item as one transaction, and return
    their annotation ids. Only questions the item asks are accepted; a bad
    value anywhere rejects the whole batch. In a review round (`round_id`),
    the batch takes the reviewer's place on the item; if the item already
    has all the reviewers the round asks for, the whole batch is kept outside
    the round (`review.team.rounds.late_for_round`)."""
    asked = {q.id for q in item_questions(store, item_id)}
    answers = []
    for v in verdicts:
        if v.question_id not in asked:
            raise ValueError(f"question {v.question_id} is not asked of this item")
        rationale = (v.rationale or "").strip() or None
        if v.choice == CANNOT_ASSESS:
            answers.append(AnswerSpec(v.question_id, None, "cannot_assess", rationale,
                                      labels_seen=v.labels_seen))
        else:
            answers.append(AnswerSpec(v.question_id, v.choice, "answered", rationale,
                                      labels_seen=v.labels_seen))
    if not answers:
        raise ValueError("nothing to commit: answer at least one question")
    return commit_answers(store, reviewer, item_id, answers, mode=mode,
                          seconds_on_task=seconds_on_task, round_id=round_id)


def mark_step(store: Store, reviewer: Reviewer, item_id: int, step_id: int, error: str,
              severity: int | None = None, note: str | None = None, *,
              mode: str = DEFAULT_MODE, seconds_on_task: float | None = None,
              round_id: int | None = None) -> int:
    """Mark one step of a trajectory with an error type and a severity (1-5),
    or record it as checked with `no_error` (no severity). One transaction;
    a new mark on the same step supersedes the old one."""
    qid = step_question_id(store)
    if qid is None:
        raise ValueError("the trajectory-errors codebook is not loaded")
    if not 1 <= int(step_id) <= step_count(store, item_id):
        raise ValueError(f"this run has no step {step_id}")
    book = step_codebook(store)
    error = book.normalise(error)
    if error == NO_ERROR:
        severity = None
    elif severity is None or not 1 <= int(severity) <= 5:
        raise ValueError("choose a severity from 1 (negligible) to 5 (critical)")
    extra = {"severity": int(severity)} if severity is not None else {}
    answer = AnswerSpec(qid, error, "answered", (note or "").strip() or None,
                        target=f"step:{int(step_id)}", extra=extra)
    return commit_answers(store, reviewer, item_id, [answer], mode=mode,
                          seconds_on_task=seconds_on_task, round_id=round_id)[0]

